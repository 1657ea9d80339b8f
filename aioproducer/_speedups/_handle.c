/* BatchOutcome and RecordHandle, compiled: a record's future as a view on its batch's outcome.
 *
 * The reference is aioproducer/engine/record_handle.py (BatchOutcomePy,
 * RecordHandlePy), which explains the design (Java's FutureRecordMetadata over
 * ProduceRequestResult). Both types here own their state in C fields: a
 * handle is its outcome, its offset delta, timestamp and packed sizes, as
 * C integers; nothing per record is a Python object until asked for.
 *
 * A handle is tracked by the cyclic collector from birth, like a Future. It
 * refers to its outcome, which holds a failed batch's error; raised into a
 * coroutine, that error's traceback holds the coroutine's frame, whose locals
 * hold handles of the same batch: a cycle the collector only sees if every
 * handle in it is tracked.
 * The metadata tuple a handle makes is untracked when it is made of a str and
 * ints, as the collector itself would untrack it.
 *
 * Every call that can run Python code (call_soon, a metadata class, a
 * callback list's comparison) is made on owned references, and what it could
 * change is read again after it. The types are final (no subclass can change
 * their layout or methods) and heap types of the module (PEP 573), so their
 * methods find the module's state through their own type.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <structmember.h>

#include "_outcome_layout.h"
#include "_state.h"

static int handle_done(Handle *h) { return h->cancelled || handle_current(h)->state != PENDING; }

typedef struct {
    PyObject_HEAD
    Handle *handle; /* NULL once exhausted */
    int yielded;    /* it gave the handle to the awaiting task once */
} HandleIter;

/* ---- RecordHandle -------------------------------------------------------------------- */

static PyObject *handle_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *outcome;
    PyObject *rest[3];
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "RecordHandle() takes positional arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "RecordHandle", 4, 4, &outcome, &rest[0], &rest[1], &rest[2]))
        return NULL;
    kernels_state *st = (kernels_state *)PyType_GetModuleState(type);
    if (!Py_IS_TYPE(outcome, st->batch_outcome_type)) {
        PyErr_SetString(PyExc_TypeError, "RecordHandle() needs a BatchOutcome");
        return NULL;
    }
    long long delta, ts;
    unsigned long long sizes;
    if (parse_handle_args(rest, &delta, &ts, &sizes) < 0) return NULL;
    return make_record_handle(outcome, delta, ts, sizes);
}

static int handle_traverse(PyObject *op, visitproc visit, void *arg) {
    Handle *h = (Handle *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(h->outcome);
    Py_VISIT(h->callback0);
    Py_VISIT(h->context0);
    Py_VISIT(h->callbacks);
    Py_VISIT(h->cancel_message);
    Py_VISIT(h->metadata);
    return 0;
}

static int handle_clear(PyObject *op) {
    Handle *h = (Handle *)op;
    /* The outcome stays (every method reads it); the rest closes no cycle once cleared. */
    Py_CLEAR(h->callback0);
    Py_CLEAR(h->context0);
    Py_CLEAR(h->callbacks);
    Py_CLEAR(h->cancel_message);
    Py_CLEAR(h->metadata);
    return 0;
}

static void handle_dealloc(PyObject *op) {
    Handle *h = (Handle *)op;
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    if (h->weakreflist) PyObject_ClearWeakRefs(op);
    handle_clear(op);
    Py_CLEAR(h->outcome);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyObject *cancelled_error(kernels_state *st, Handle *h) {
    if (!h->cancel_message) {
        PyErr_SetNone(st->cancelled_error);
        return NULL;
    }
    /* CancelledError(msg) made here: a tuple given to PyErr_SetObject would be its arguments */
    PyObject *exc = PyObject_CallOneArg(st->cancelled_error, h->cancel_message);
    if (exc) {
        PyErr_SetObject(st->cancelled_error, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* The record's metadata (new reference), made once. */
static PyObject *metadata_of(kernels_state *st, Handle *h, Outcome *o) {
    if (h->metadata) return Py_NewRef(h->metadata);
    /* Checked before the sum: a signed overflow is undefined behaviour in C. */
    if (o->base_offset >= 0 && h->delta > 0 && h->delta > LLONG_MAX - o->base_offset) {
        PyErr_SetString(PyExc_OverflowError, "the record's offset does not fit in 64 bits");
        return NULL;
    }
    long long offset = o->base_offset < 0 ? -1 : o->base_offset + h->delta;
    long long ts = o->log_append_time_ms >= 0 ? o->log_append_time_ms : h->timestamp_ms;
    PyObject *items[6];
    items[0] = Py_NewRef(o->topic);
    items[1] = Py_NewRef(o->partition);
    items[2] = PyLong_FromLongLong(offset);
    items[3] = PyLong_FromLongLong(ts);
    items[4] = PyLong_FromLongLong((long long)(h->sizes >> 32) - 1);
    items[5] = PyLong_FromLongLong((long long)(h->sizes & 0xFFFFFFFFull) - 1);
    PyObject *meta = NULL;
    if (items[2] && items[3] && items[4] && items[5]) {
        PyObject *type = Py_NewRef(o->metadata_type);
        if (type == st->record_metadata_type) {
            /* The producer's own NamedTuple (checked when it was registered):
             * tuple.__new__ without its Python-level __new__. */
            PyObject *tuple = PyTuple_New(6);
            if (tuple) {
                for (int i = 0; i < 6; i++) PyTuple_SET_ITEM(tuple, i, Py_NewRef(items[i]));
                PyObject *args = PyTuple_Pack(2, type, tuple);
                if (args) {
                    meta = PyObject_Call(st->tuple_new, args, NULL);
                    Py_DECREF(args);
                }
                Py_DECREF(tuple);
            }
            /* Of a str and ints it can be in no reference cycle: untracked, the
             * cyclic collector never walks it (as it untracks such tuples itself,
             * but only once it has walked them), nor the handle that keeps it. */
            if (meta && PyUnicode_CheckExact(o->topic) && PyLong_CheckExact(o->partition) &&
                Py_IS_TYPE(meta, (PyTypeObject *)type))
                PyObject_GC_UnTrack(meta);
        } else {
            meta = PyObject_Vectorcall(type, items, 6, NULL);
        }
        Py_DECREF(type);
    }
    for (int i = 0; i < 6; i++) Py_XDECREF(items[i]);
    if (!meta) return NULL;
    if (!h->metadata) { /* the call above may have run code that asked for it first */
        h->metadata = Py_NewRef(meta);
    }
    return meta;
}

static PyObject *handle_result(PyObject *op, PyObject *unused) {
    Handle *h = (Handle *)op;
    kernels_state *st = state_of(op);
    if (h->cancelled) return cancelled_error(st, h);
    Outcome *o = handle_current(h);
    if (o->state == DONE) return metadata_of(st, h, o);
    if (o->state == FAILED && o->error) {
        PyErr_SetObject((PyObject *)Py_TYPE(o->error), o->error);
        return NULL;
    }
    PyErr_SetString(st->invalid_state_error, "Result is not set.");
    return NULL;
}

static PyObject *handle_exception(PyObject *op, PyObject *unused) {
    Handle *h = (Handle *)op;
    kernels_state *st = state_of(op);
    if (h->cancelled) return cancelled_error(st, h);
    Outcome *o = handle_current(h);
    if (o->state == DONE) Py_RETURN_NONE;
    if (o->state == FAILED && o->error) return Py_NewRef(o->error);
    PyErr_SetString(st->invalid_state_error, "Exception is not set.");
    return NULL;
}

static PyObject *handle_done_m(PyObject *op, PyObject *unused) { return PyBool_FromLong(handle_done((Handle *)op)); }

static PyObject *handle_cancelled_m(PyObject *op, PyObject *unused) {
    return PyBool_FromLong(((Handle *)op)->cancelled);
}

static PyObject *handle_get_loop(PyObject *op, PyObject *unused) {
    return Py_NewRef(((Handle *)op)->outcome->loop);
}

static PyObject *handle_cancel(PyObject *op, PyObject *args, PyObject *kwds) {
    static char *names[] = {"msg", NULL};
    PyObject *msg = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:cancel", names, &msg)) return NULL;
    Handle *h = (Handle *)op;
    if (handle_done(h)) Py_RETURN_FALSE;
    h->cancelled = 1;
    if (msg != Py_None) {
        Py_XSETREF(h->cancel_message, Py_NewRef(msg));
    }
    handle_schedule_callbacks(h);
    Py_RETURN_TRUE;
}

static PyObject *handle_add_done_callback(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                          PyObject *kwnames) {
    Handle *h = (Handle *)op;
    kernels_state *st = state_of(op);
    PyObject *fn, *context = Py_None;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs != 1 || nkw > 1) {
        PyErr_SetString(PyExc_TypeError, "add_done_callback(fn, *, context=None)");
        return NULL;
    }
    fn = args[0];
    if (nkw) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0)) ||
            PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "context") != 0) {
            PyErr_SetString(PyExc_TypeError, "add_done_callback() takes only the keyword 'context'");
            return NULL;
        }
        context = args[1];
    }
    PyObject *ctx = context == Py_None ? PyContext_CopyCurrent() : Py_NewRef(context);
    if (!ctx) return NULL;
    /* The first callback goes in callback0, the others in a list of (fn, context)
     * tuples. Making the tuple or the list may run the collector, and finalizers with
     * it, which may decide the handle or change its callbacks: read again after. */
    PyObject *entry = NULL;
    if (!handle_done(h) && (h->callback0 || h->callbacks)) {
        entry = PyTuple_Pack(2, fn, ctx);
        if (!entry) {
            Py_DECREF(ctx);
            return NULL;
        }
        if (!h->callbacks && !handle_done(h)) {
            PyObject *list = PyList_New(0);
            if (!list) {
                Py_DECREF(entry);
                Py_DECREF(ctx);
                return NULL;
            }
            if (h->callbacks || handle_done(h)) Py_DECREF(list); /* empty: freeing it runs nothing */
            else h->callbacks = list;
        }
    }
    /* From here on nothing allocates a container: no Python code runs until the
     * callback is stored, or scheduled if the handle is done. */
    if (handle_done(h)) {
        Py_XDECREF(entry);
        PyObject *loop = Py_NewRef(h->outcome->loop);
        PyObject *call[5] = {NULL, loop, fn, op, ctx};
        PyObject *r = PyObject_VectorcallMethod(st->str_call_soon, call + 1,
                                                3 | PY_VECTORCALL_ARGUMENTS_OFFSET, st->context_kwnames);
        Py_DECREF(loop);
        Py_DECREF(ctx);
        if (!r) return NULL;
        Py_DECREF(r);
        Py_RETURN_NONE;
    }
    if (!h->callback0 && !h->callbacks) {
        Py_XDECREF(entry);
        h->callback0 = Py_NewRef(fn);
        h->context0 = ctx; /* the reference is the handle's now */
    } else {
        Py_DECREF(ctx);
        if (!entry || !h->callbacks) { /* only a bug could get here: never lose the callback silently */
            Py_XDECREF(entry);
            PyErr_SetString(PyExc_SystemError, "add_done_callback: no room for the callback");
            return NULL;
        }
        /* Appending only reallocates the item array: it runs no Python code. */
        int rc = PyList_Append(h->callbacks, entry);
        Py_DECREF(entry);
        if (rc < 0) return NULL;
    }
    if (!h->waiting && outcome_wait_on(h) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Append the handle's done callbacks to ``flat`` as fn, context, fn, context... first to
 * last; 0, or -1 out of memory. Appending only reallocates an item array: no Python code
 * runs here, so this is the state at one moment. */
static int append_callbacks(PyObject *flat, Handle *h) {
    if (h->callback0 && (PyList_Append(flat, h->callback0) < 0 || PyList_Append(flat, h->context0) < 0))
        return -1;
    PyObject *rest = h->callbacks;
    for (Py_ssize_t i = 0; rest && i < PyList_GET_SIZE(rest); i++) {
        PyObject *entry = PyList_GET_ITEM(rest, i); /* (fn, context) */
        if (PyList_Append(flat, PyTuple_GET_ITEM(entry, 0)) < 0 ||
            PyList_Append(flat, PyTuple_GET_ITEM(entry, 1)) < 0)
            return -1;
    }
    return 0;
}

static PyObject *handle_remove_done_callback(PyObject *op, PyObject *fn) {
    Handle *h = (Handle *)op;
    if (!h->callback0 && (!h->callbacks || PyList_GET_SIZE(h->callbacks) == 0)) return PyLong_FromLong(0);
    /* A copy first, taken after making its list (which may run the collector, and
     * finalizers that change the callbacks): comparing callables runs their __eq__,
     * which may change them too. As in the reference, the kept ones then replace them
     * all (those added meanwhile are dropped), unless the handle was decided meanwhile
     * (its callbacks then are scheduled already). */
    PyObject *kept = NULL, *snapshot = PyList_New(0);
    if (!snapshot || append_callbacks(snapshot, h) < 0 || !(kept = PyList_New(0))) goto error;
    for (Py_ssize_t i = 0; i + 1 < PyList_GET_SIZE(snapshot); i += 2) { /* the snapshot is ours */
        PyObject *cb = PyList_GET_ITEM(snapshot, i), *ctx = PyList_GET_ITEM(snapshot, i + 1);
        int eq = PyObject_RichCompareBool(cb, fn, Py_EQ);
        if (eq < 0) goto error;
        if (!eq) {
            PyObject *entry = PyTuple_Pack(2, cb, ctx);
            int rc = entry ? PyList_Append(kept, entry) : -1;
            Py_XDECREF(entry);
            if (rc < 0) goto error;
        }
    }
    Py_ssize_t removed = PyList_GET_SIZE(snapshot) / 2 - PyList_GET_SIZE(kept);
    /* Nothing allocates between this check and the swap. */
    if (!handle_done(h)) {
        /* The kept ones all go in the list (callback0 is only ever the first). */
        PyObject *fn0 = h->callback0, *ctx0 = h->context0, *old = h->callbacks;
        h->callback0 = h->context0 = NULL;
        h->callbacks = Py_NewRef(kept);
        Py_XDECREF(fn0); /* may run finalizers: the handle is consistent already */
        Py_XDECREF(ctx0);
        Py_XDECREF(old);
    }
    Py_DECREF(snapshot);
    Py_DECREF(kept);
    return PyLong_FromSsize_t(removed);
error:
    Py_XDECREF(snapshot);
    Py_XDECREF(kept);
    return NULL;
}

static PyObject *handle_await(PyObject *op) {
    kernels_state *st = state_of(op);
    HandleIter *it = PyObject_GC_New(HandleIter, st->handle_iter_type);
    if (!it) return NULL;
    it->handle = (Handle *)Py_NewRef(op);
    it->yielded = 0;
    PyObject_GC_Track(it);
    return (PyObject *)it;
}

static PyObject *handle_get_blocking(PyObject *op, void *closure) {
    return PyBool_FromLong(((Handle *)op)->blocking);
}

static int handle_set_blocking(PyObject *op, PyObject *value, void *closure) {
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete _asyncio_future_blocking");
        return -1;
    }
    int truth = PyObject_IsTrue(value);
    if (truth < 0) return -1;
    ((Handle *)op)->blocking = (char)truth;
    return 0;
}

static PyObject *handle_repr(PyObject *op) {
    Handle *h = (Handle *)op;
    if (h->cancelled) return PyUnicode_FromString("<RecordHandle cancelled>");
    Outcome *o = handle_current(h);
    if (o->state == PENDING) return PyUnicode_FromString("<RecordHandle pending>");
    if (o->state == FAILED && o->error) return PyUnicode_FromFormat("<RecordHandle exception=%R>", o->error);
    PyObject *meta = metadata_of(state_of(op), h, o);
    if (!meta) return NULL;
    PyObject *r = PyUnicode_FromFormat("<RecordHandle result=%R>", meta);
    Py_DECREF(meta);
    return r;
}

static PyMethodDef handle_methods[] = {
    {"result", handle_result, METH_NOARGS, "The record's metadata, or raises its error."},
    {"exception", handle_exception, METH_NOARGS, "The record's error, or None once written."},
    {"done", handle_done_m, METH_NOARGS, "Written, failed or cancelled."},
    {"cancelled", handle_cancelled_m, METH_NOARGS, "The wait was cancelled."},
    {"cancel", (PyCFunction)(void (*)(void))handle_cancel, METH_VARARGS | METH_KEYWORDS,
     "Stop waiting for the record (it is sent all the same); False once done."},
    {"get_loop", handle_get_loop, METH_NOARGS, "The event loop of the producer."},
    {"add_done_callback", (PyCFunction)(void (*)(void))handle_add_done_callback,
     METH_FASTCALL | METH_KEYWORDS, "add_done_callback(fn, *, context=None)"},
    {"remove_done_callback", handle_remove_done_callback, METH_O,
     "Remove every registration of fn; how many there were."},
    {"__class_getitem__", Py_GenericAlias, METH_O | METH_CLASS, "See PEP 585."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef handle_getset[] = {
    {"_asyncio_future_blocking", handle_get_blocking, handle_set_blocking,
     "asyncio's mark of a future-like object: True while a task waits on it.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef handle_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(Handle, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot handle_slots[] = {
    {Py_tp_new, handle_new},
    {Py_tp_traverse, handle_traverse},
    {Py_tp_clear, handle_clear},
    {Py_tp_dealloc, handle_dealloc},
    {Py_tp_repr, handle_repr},
    {Py_tp_methods, handle_methods},
    {Py_tp_getset, handle_getset},
    {Py_tp_members, handle_members},
    {Py_tp_iter, handle_await},
    {Py_am_await, handle_await},
    {Py_tp_doc, "One record's outcome, awaitable as an asyncio.Future "
                "(aioproducer.engine.record_handle.RecordHandlePy is the reference)."},
    {0, NULL},
};

static PyType_Spec handle_spec = {
    .name = "aioproducer._speedups._kernels.RecordHandle",
    .basicsize = sizeof(Handle),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = handle_slots,
};

/* ---- the await iterator ---------------------------------------------------------------- */

static PyObject *iter_next(PyObject *op) {
    HandleIter *it = (HandleIter *)op;
    Handle *h = it->handle;
    if (!h) return NULL;
    if (!handle_done(h)) {
        if (!it->yielded) {
            it->yielded = 1;
            h->blocking = 1;
            return Py_NewRef((PyObject *)h); /* the task waits on it */
        }
        Py_CLEAR(it->handle);
        PyErr_SetString(PyExc_RuntimeError, "await wasn't used with future");
        return NULL;
    }
    it->handle = NULL;
    PyObject *result = handle_result((PyObject *)h, NULL);
    Py_DECREF(h);
    if (!result) return NULL;
    /* StopIteration(result), made explicitly: a tuple given to PyErr_SetObject
     * would be taken as the exception's arguments. */
    PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, result);
    Py_DECREF(result);
    if (!stop) return NULL;
    PyErr_SetObject(PyExc_StopIteration, stop);
    Py_DECREF(stop);
    return NULL;
}

static int iter_traverse(PyObject *op, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(((HandleIter *)op)->handle);
    return 0;
}

static int iter_clear(PyObject *op) {
    Py_CLEAR(((HandleIter *)op)->handle);
    return 0;
}

static void iter_dealloc(PyObject *op) {
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    iter_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyType_Slot iter_slots[] = {
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, iter_next},
    {Py_tp_traverse, iter_traverse},
    {Py_tp_clear, iter_clear},
    {Py_tp_dealloc, iter_dealloc},
    {0, NULL},
};

static PyType_Spec iter_spec = {
    .name = "aioproducer._speedups._kernels.RecordHandleIter",
    .basicsize = sizeof(HandleIter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = iter_slots,
};

int add_handle_types(PyObject *module) {
    kernels_state *st = get_kernels_state(module);
    PyObject *asyncio = PyImport_ImportModule("asyncio");
    if (!asyncio) return -1;
    st->invalid_state_error = PyObject_GetAttrString(asyncio, "InvalidStateError");
    st->cancelled_error = st->invalid_state_error ? PyObject_GetAttrString(asyncio, "CancelledError") : NULL;
    Py_DECREF(asyncio);
    if (!st->cancelled_error) return -1;
    st->str_call_soon = PyUnicode_InternFromString("call_soon");
    st->context_kwnames = Py_BuildValue("(s)", "context");
    st->tuple_new = PyObject_GetAttrString((PyObject *)&PyTuple_Type, "__new__");
    if (!st->str_call_soon || !st->context_kwnames || !st->tuple_new) return -1;
    st->record_handle_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &handle_spec, NULL);
    if (!st->record_handle_type) return -1;
    st->handle_iter_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &iter_spec, NULL);
    if (!st->handle_iter_type) return -1;
    if (PyModule_AddObjectRef(module, "RecordHandle", (PyObject *)st->record_handle_type) < 0) return -1;
    return add_outcome_type(module);
}
