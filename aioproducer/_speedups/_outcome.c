/* BatchOutcome, compiled: what happened to a batch, shared by its records' handles.
 *
 * The reference is aioproducer/engine/record_handle.py (BatchOutcomePy). An
 * outcome is decided once (complete, fail, or move_to for a split batch,
 * KIP-126); deciding it visits only the handles someone waits on, to run
 * their done callbacks (_wake.c; the handles are _handle.c). Every call that can run
 * Python code (call_soon) is made on owned references, and what it could
 * change is read again after it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_outcome_layout.h"
#include "_state.h"

/* ---- following a split (KIP-126) ------------------------------------------- */

/* The outcome a record at *delta of ``outcome`` now belongs to (borrowed), *delta adjusted. */
static Outcome *follow(Outcome *outcome, long long *delta) {
    while (outcome->state == MOVED && outcome->parts) {
        PyObject *starts = outcome->starts, *parts = outcome->parts;
        Py_ssize_t n = PyList_GET_SIZE(parts), i = 0;
        long long first = 0;
        /* starts hold exact ints, checked by move_to; the last start <= delta wins */
        for (Py_ssize_t j = 0; j < n && j < PyList_GET_SIZE(starts); j++) {
            long long s = PyLong_AsLongLong(PyList_GET_ITEM(starts, j));
            if (s > *delta) break;
            i = j;
            first = s;
        }
        *delta -= first;
        outcome = (Outcome *)PyList_GET_ITEM(parts, i);
    }
    return outcome;
}

Outcome *handle_current(Handle *h) {
    if (h->outcome->state == MOVED) {
        long long delta = h->delta;
        Outcome *leaf = follow(h->outcome, &delta);
        if (leaf != h->outcome) {
            Py_INCREF(leaf);
            Py_SETREF(h->outcome, leaf);
            h->delta = delta;
        }
    }
    return h->outcome;
}

/* Put ``h`` (which has callbacks) in its current outcome's waiting list, or schedule its
 * callbacks if that outcome is decided. Making the list may run the cyclic collector, and
 * finalizers with it, which may decide or split the outcome, or add a callback to ``h`` and
 * so register it: all is read again after it. */
int outcome_wait_on(Handle *h) {
    for (;;) {
        if (h->waiting) return 0; /* registered meanwhile (it is in one waiting list only) */
        Outcome *o = (Outcome *)Py_NewRef(handle_current(h));
        if (o->state != PENDING) {
            Py_DECREF(o);
            handle_schedule_callbacks(h);
            return 0;
        }
        if (o->waiting) {
            /* Appending only reallocates the item array: it runs no Python code. */
            int rc = PyList_Append(o->waiting, (PyObject *)h);
            if (rc == 0) h->waiting = 1;
            Py_DECREF(o);
            return rc;
        }
        PyObject *list = PyList_New(0);
        if (!list) {
            Py_DECREF(o);
            return -1;
        }
        if (!o->waiting && o->state == PENDING) o->waiting = list;
        else Py_DECREF(list); /* empty: freeing it runs nothing */
        Py_DECREF(o);
    }
}

/* ---- making handles ---------------------------------------------------------------- */

PyObject *make_record_handle(PyObject *outcome, long long delta, long long timestamp_ms,
                             unsigned long long sizes) {
    kernels_state *st = state_of(outcome);
    Handle *h = PyObject_GC_New(Handle, st->record_handle_type);
    if (!h) return NULL;
    h->outcome = (Outcome *)Py_NewRef(outcome);
    h->delta = delta;
    h->timestamp_ms = timestamp_ms;
    h->sizes = sizes;
    h->callback0 = h->context0 = h->callbacks = NULL;
    h->cancel_message = h->metadata = h->weakreflist = NULL;
    h->cancelled = h->blocking = h->waiting = 0;
    PyObject_GC_Track(h); /* as a Future is: see the top of _handle.c */
    return (PyObject *)h;
}

int parse_handle_args(PyObject *const *args, long long *delta, long long *ts,
                             unsigned long long *sizes) {
    *delta = PyLong_AsLongLong(args[0]);
    if (*delta == -1 && PyErr_Occurred()) return -1;
    *ts = PyLong_AsLongLong(args[1]);
    if (*ts == -1 && PyErr_Occurred()) return -1;
    *sizes = PyLong_AsUnsignedLongLong(args[2]);
    if (*sizes == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    return 0;
}

/* ---- BatchOutcome ---------------------------------------------------------------- */

static PyObject *outcome_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *names[] = {"loop", "topic", "partition", "metadata_type", NULL};
    PyObject *loop, *topic, *partition, *metadata_type;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO:BatchOutcome", names, &loop, &topic, &partition,
                                     &metadata_type))
        return NULL;
    Outcome *o = (Outcome *)type->tp_alloc(type, 0);
    if (!o) return NULL;
    o->loop = Py_NewRef(loop);
    o->topic = Py_NewRef(topic);
    o->partition = Py_NewRef(partition);
    o->metadata_type = Py_NewRef(metadata_type);
    o->base_offset = o->log_append_time_ms = -1;
    o->state = PENDING;
    return (PyObject *)o;
}

static int outcome_traverse(PyObject *op, visitproc visit, void *arg) {
    Outcome *o = (Outcome *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(o->loop);
    Py_VISIT(o->topic);
    Py_VISIT(o->partition);
    Py_VISIT(o->metadata_type);
    Py_VISIT(o->error);
    Py_VISIT(o->waiting);
    Py_VISIT(o->starts);
    Py_VISIT(o->parts);
    return 0;
}

static int outcome_clear(PyObject *op) {
    Outcome *o = (Outcome *)op;
    Py_CLEAR(o->error);
    Py_CLEAR(o->waiting);
    Py_CLEAR(o->starts);
    Py_CLEAR(o->parts);
    Py_CLEAR(o->loop);
    Py_CLEAR(o->topic);
    Py_CLEAR(o->partition);
    Py_CLEAR(o->metadata_type);
    return 0;
}

static void outcome_dealloc(PyObject *op) {
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    outcome_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyObject *outcome_handle(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "handle(delta, timestamp_ms, sizes) takes 3 arguments");
        return NULL;
    }
    long long delta, ts;
    unsigned long long sizes;
    if (parse_handle_args(args, &delta, &ts, &sizes) < 0) return NULL;
    return make_record_handle(op, delta, ts, sizes);
}

static PyObject *outcome_complete(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    Outcome *o = (Outcome *)op;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "complete(base_offset, log_append_time_ms=-1)");
        return NULL;
    }
    long long base = PyLong_AsLongLong(args[0]);
    if (base == -1 && PyErr_Occurred()) return NULL;
    long long log_time = -1;
    if (nargs == 2) {
        log_time = PyLong_AsLongLong(args[1]);
        if (log_time == -1 && PyErr_Occurred()) return NULL;
    }
    if (o->state == PENDING) {
        o->base_offset = base;
        o->log_append_time_ms = log_time;
        o->state = DONE;
        outcome_wake(o);
    }
    Py_RETURN_NONE;
}

static PyObject *outcome_fail(PyObject *op, PyObject *error) {
    Outcome *o = (Outcome *)op;
    if (!PyExceptionInstance_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "fail() takes an exception instance");
        return NULL;
    }
    if (o->state == PENDING) {
        o->error = Py_NewRef(error);
        o->state = FAILED;
        outcome_wake(o);
    }
    Py_RETURN_NONE;
}

static PyObject *outcome_move_to(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    Outcome *o = (Outcome *)op;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "move_to(starts, parts) takes 2 arguments");
        return NULL;
    }
    if (o->state != PENDING) Py_RETURN_NONE;
    PyObject *starts = PySequence_List(args[0]);
    if (!starts) return NULL;
    PyObject *parts = PySequence_List(args[1]);
    if (!parts) {
        Py_DECREF(starts);
        return NULL;
    }
    /* Checked on our own lists, which nothing else can change. */
    Py_ssize_t n = PyList_GET_SIZE(parts);
    int ok = n > 0 && PyList_GET_SIZE(starts) == n;
    long long previous = -1;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *s = PyList_GET_ITEM(starts, i);
        ok = PyLong_CheckExact(s) && Py_IS_TYPE(PyList_GET_ITEM(parts, i), Py_TYPE(op));
        if (ok) {
            long long v = PyLong_AsLongLong(s);
            if (v == -1 && PyErr_Occurred()) PyErr_Clear(), ok = 0;
            ok = ok && (i ? v > previous : v == 0);
            previous = v;
        }
    }
    if (!ok) {
        Py_DECREF(starts);
        Py_DECREF(parts);
        PyErr_SetString(PyExc_ValueError, "a split needs parts, the first starting at record 0");
        return NULL;
    }
    if (o->state != PENDING) { /* a conversion above could not run code; checked all the same */
        Py_DECREF(starts);
        Py_DECREF(parts);
        Py_RETURN_NONE;
    }
    o->starts = starts;
    o->parts = parts;
    o->state = MOVED;
    PyObject *waiting = o->waiting;
    o->waiting = NULL;
    if (waiting) {
        /* Each waiting handle goes to the part its record is in now. The old list is
         * dropped, so a handle is in no list until it is put in its part's. */
        int failed = 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(waiting); i++) {
            Handle *h = (Handle *)Py_NewRef(PyList_GET_ITEM(waiting, i));
            if (h->waiting) {
                h->waiting = 0;
                /* Out of memory: the rest stay unregistered, and a later callback of theirs
                 * registers them (their callbacks are kept). */
                if (!failed && !h->cancelled && outcome_wait_on(h) < 0) failed = 1;
            }
            Py_DECREF(h);
        }
        Py_DECREF(waiting);
        if (failed) return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *outcome_get_decided(PyObject *op, void *closure) {
    return PyBool_FromLong(((Outcome *)op)->state != PENDING);
}

static PyObject *outcome_get_error(PyObject *op, void *closure) {
    Outcome *o = (Outcome *)op;
    return Py_NewRef(o->error ? o->error : Py_None);
}

static PyObject *outcome_repr(PyObject *op) {
    Outcome *o = (Outcome *)op;
    static const char *const names[] = {"pending", "done", "failed", "moved"};
    return PyUnicode_FromFormat("<BatchOutcome %S-%S %s>", o->topic, o->partition, names[o->state]);
}

static PyMethodDef outcome_methods[] = {
    {"handle", (PyCFunction)(void (*)(void))outcome_handle, METH_FASTCALL,
     "handle(delta, timestamp_ms, sizes) -> a RecordHandle for the record at offset delta."},
    {"complete", (PyCFunction)(void (*)(void))outcome_complete, METH_FASTCALL,
     "complete(base_offset, log_append_time_ms=-1): the batch was written; once."},
    {"fail", outcome_fail, METH_O, "fail(error): every record of the batch failed; once."},
    {"move_to", (PyCFunction)(void (*)(void))outcome_move_to, METH_FASTCALL,
     "move_to(starts, parts): the batch was split (KIP-126)."},
    {"_run_callbacks", (PyCFunction)(void (*)(void))outcome_run_callbacks, METH_FASTCALL,
     "_run_callbacks(entries, start): run a slice of (handle, fn, context) triples (a loop callback)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef outcome_members[] = {
    {"loop", T_OBJECT, offsetof(Outcome, loop), READONLY, NULL},
    {"topic", T_OBJECT, offsetof(Outcome, topic), READONLY, NULL},
    {"partition", T_OBJECT, offsetof(Outcome, partition), READONLY, NULL},
    {"metadata_type", T_OBJECT, offsetof(Outcome, metadata_type), READONLY, NULL},
    {"base_offset", T_LONGLONG, offsetof(Outcome, base_offset), READONLY, NULL},
    {"log_append_time_ms", T_LONGLONG, offsetof(Outcome, log_append_time_ms), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef outcome_getset[] = {
    {"decided", outcome_get_decided, NULL, "Completed, failed or moved.", NULL},
    {"error", outcome_get_error, NULL, "The batch's error once failed, else None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot outcome_slots[] = {
    {Py_tp_new, outcome_new},
    {Py_tp_traverse, outcome_traverse},
    {Py_tp_clear, outcome_clear},
    {Py_tp_dealloc, outcome_dealloc},
    {Py_tp_repr, outcome_repr},
    {Py_tp_methods, outcome_methods},
    {Py_tp_members, outcome_members},
    {Py_tp_getset, outcome_getset},
    {Py_tp_doc, "What happened to a batch, shared by its records' handles "
                "(aioproducer.engine.record_handle.BatchOutcomePy is the reference)."},
    {0, NULL},
};

static PyType_Spec outcome_spec = {
    .name = "aioproducer._speedups._kernels.BatchOutcome",
    .basicsize = sizeof(Outcome),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = outcome_slots,
};

/* register_record_metadata(cls): the class whose results are made without its Python __new__. */
static PyObject *k_register_record_metadata(PyObject *module, PyObject *cls) {
    kernels_state *st = get_kernels_state(module);
    PyTypeObject *t = (PyTypeObject *)cls;
    /* Only a plain tuple subclass of six fields and no instance dict: a
     * NamedTuple. (A struct sequence, or anything with its own layout or
     * __new__ checks, is called as a class instead.) */
    PyObject *fields = PyType_Check(cls) ? PyObject_GetAttrString(cls, "_fields") : NULL;
    int ok = fields && PyTuple_CheckExact(fields) && PyTuple_GET_SIZE(fields) == 6 &&
             t->tp_base == &PyTuple_Type && t->tp_basicsize == PyTuple_Type.tp_basicsize &&
             t->tp_itemsize == PyTuple_Type.tp_itemsize && t->tp_dictoffset == 0 &&
             !PyObject_HasAttrString(cls, "n_fields");
    Py_XDECREF(fields);
    PyErr_Clear();
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "register_record_metadata() takes a NamedTuple class of six fields");
        return NULL;
    }
    Py_XSETREF(st->record_metadata_type, Py_NewRef(cls));
    Py_RETURN_NONE;
}

static PyMethodDef register_def = {
    "register_record_metadata", k_register_record_metadata, METH_O,
    "register_record_metadata(cls): results of this NamedTuple class are made without its __new__.",
};

int add_outcome_type(PyObject *module) {
    kernels_state *st = get_kernels_state(module);
    st->batch_outcome_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &outcome_spec, NULL);
    if (!st->batch_outcome_type) return -1;
    if (PyModule_AddObjectRef(module, "BatchOutcome", (PyObject *)st->batch_outcome_type) < 0) return -1;
    PyObject *fn = PyCFunction_NewEx(&register_def, module, NULL);
    if (!fn) return -1;
    int rc = PyModule_AddObjectRef(module, register_def.ml_name, fn);
    Py_DECREF(fn);
    return rc;
}
