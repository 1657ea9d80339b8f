/* The state of one _kernels module object (PEP 573): what the kernels look up
 * once, and the classes the module makes. Nothing of it is process-wide: each
 * module object (one per interpreter) has its own, released with it. */
#ifndef AIOPRODUCER_STATE_H
#define AIOPRODUCER_STATE_H

#include <Python.h>
#include <structmember.h>

/* Heap types are immutable from 3.10 on when they say so. */
#ifdef Py_TPFLAGS_IMMUTABLETYPE
#define Py_TPFLAGS_IMMUTABLETYPE_COMPAT Py_TPFLAGS_IMMUTABLETYPE
#else
#define Py_TPFLAGS_IMMUTABLETYPE_COMPAT 0
#endif

typedef struct {
    /* _handle.c */
    PyObject *str_call_soon;           /* "call_soon", interned */
    PyObject *context_kwnames;         /* ("context",) */
    PyObject *tuple_new;               /* tuple.__new__ */
    PyObject *invalid_state_error;     /* asyncio.InvalidStateError */
    PyObject *cancelled_error;         /* asyncio.CancelledError */
    PyObject *record_metadata_type;    /* register_record_metadata's class, or NULL */
    PyTypeObject *batch_outcome_type;
    PyTypeObject *record_handle_type;
    PyTypeObject *handle_iter_type;
    /* _builder.c */
    PyTypeObject *builder_type;        /* RecordBatchBuilder */
    PyObject *codec_type;              /* compression.Codec, looked up on first use */
    PyObject *codec_none;              /* Codec.NONE */
    PyObject *compress;                /* compression.compress */
    /* _counter.c */
    PyTypeObject *counter_type;        /* BufferCounter */
    /* _batch_core.c */
    PyTypeObject *batch_core_type;     /* BatchCore */
    PyObject *open_state;              /* BatchState.OPEN, once registered */
    /* _lanes.c, _shortcut.c */
    PyTypeObject *unkeyed_lane_type;   /* UnkeyedLane */
    PyTypeObject *keyed_lane_type;     /* KeyedLane */
    PyTypeObject *shortcut_type;       /* EnqueueShortcut */
    PyObject *str_snapshot, *str_topics, *str_try_reserve, *str_release, *str_partitions, *str_tps;
    PyObject *str_thread_id, *str_append;  /* interned */
    PyObject *code_appended, *code_full, *code_switch;  /* batch.py's APPENDED, FULL, SWITCH */
    unsigned long ident;               /* the thread whose id ident_obj holds */
    PyObject *ident_obj;               /* threading.get_ident() of that thread, or NULL */
} kernels_state;

static inline kernels_state *get_kernels_state(PyObject *module) {
    return (kernels_state *)PyModule_GetState(module);
}

#endif
