/* BatchOutcome and RecordHandle (_outcome.c, _handle.c, _wake.c): their layouts, shared by
 * those files only, and what the batch kernels call. The reference is
 * aioproducer/engine/record_handle.py. */
#ifndef AIOPRODUCER_OUTCOME_LAYOUT_H
#define AIOPRODUCER_OUTCOME_LAYOUT_H

#include <Python.h>

#include "_state.h"

enum { PENDING = 0, DONE = 1, FAILED = 2, MOVED = 3 };

typedef struct Outcome Outcome;
typedef struct Handle Handle;

struct Outcome {
    PyObject_HEAD
    PyObject *loop, *topic, *partition, *metadata_type;
    long long base_offset, log_append_time_ms;
    PyObject *error;   /* NULL until failed */
    PyObject *waiting; /* list of handles with done callbacks, or NULL */
    PyObject *starts;  /* after a move: list of ints */
    PyObject *parts;   /* after a move: list of outcomes */
    int state;
};

struct Handle {
    PyObject_HEAD
    Outcome *outcome;
    long long delta, timestamp_ms;
    unsigned long long sizes;
    /* Done callbacks, in the order added: the first in callback0/context0 (most
     * handles never get another: no tuple, no list), then callbacks, a list of
     * (fn, context) tuples, or NULL. Taken together when they are scheduled. */
    PyObject *callback0, *context0;
    PyObject *callbacks;
    PyObject *cancel_message; /* NULL or the message */
    PyObject *metadata;       /* cached result */
    PyObject *weakreflist;
    char cancelled, blocking;
    char waiting; /* in its outcome's waiting list, its callbacks not taken yet */
};

static inline kernels_state *state_of(PyObject *obj) {
    return (kernels_state *)PyType_GetModuleState(Py_TYPE(obj));
}

/* _outcome.c: the outcome a handle's record belongs to now (following splits; borrowed). */
Outcome *handle_current(Handle *h);
/* _wake.c: schedule a handle's done callbacks on its loop, once. */
void handle_schedule_callbacks(Handle *h);
/* _wake.c: once ``o`` is decided, run its waiting handles' done callbacks (on the loop). */
void outcome_wake(Outcome *o);
/* _wake.c: BatchOutcome._run_callbacks(entries, start), the loop callback outcome_wake schedules. */
PyObject *outcome_run_callbacks(PyObject *op, PyObject *const *args, Py_ssize_t nargs);
/* _outcome.c: put a handle with callbacks in its current outcome's waiting list, or
 * schedule them if that outcome is decided; 0, or -1 with an error set. */
int outcome_wait_on(Handle *h);
/* _outcome.c: a new handle of ``outcome`` (exactly a BatchOutcome of this module) for the
 * record at offset ``delta``, with its timestamp and packed sizes (batch.pack_sizes). */
PyObject *make_record_handle(PyObject *outcome, long long delta, long long timestamp_ms,
                             unsigned long long sizes);
/* _outcome.c: parse (delta, timestamp_ms, sizes) as make_record_handle takes them. */
int parse_handle_args(PyObject *const *args, long long *delta, long long *ts, unsigned long long *sizes);
/* Add BatchOutcome and register_record_metadata / RecordHandle to the module. */
int add_outcome_type(PyObject *module);
int add_handle_types(PyObject *module);

#endif
