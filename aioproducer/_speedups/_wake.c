/* Running a decided batch's done callbacks: what BatchOutcome.complete and fail
 * do last, and the loop callback that runs them.
 *
 * The reference is BatchOutcomePy._wake and _run_callbacks in
 * aioproducer/engine/record_handle.py. An asyncio.Future makes a loop callback
 * (call_soon, a Handle) per done callback; a batch takes the done callbacks of
 * its waiting handles when it is decided (as a future does) and runs them from
 * one loop callback, a slice per turn, each in its own context, as Handle._run
 * runs one. Every call that can run Python code is made on owned references,
 * and what it could change is read again after it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_outcome_layout.h"
#include "_state.h"

/* Done callbacks run per turn of the event loop: a batch of many awaited
 * records runs their callbacks a slice at a time, so it never holds the loop. */
#define WAKE_SLICE 512

/* loop.call_soon(fn, h, context=ctx) for one of a handle's done callbacks; 0 to go on,
 * -1 once the loop is closed (nothing would run the rest). */
static int schedule_one(kernels_state *st, PyObject *loop, Handle *h, PyObject *fn, PyObject *ctx) {
    PyObject *call[5] = {NULL, loop, fn, (PyObject *)h, ctx};
    PyObject *r = PyObject_VectorcallMethod(st->str_call_soon, call + 1,
                                            3 | PY_VECTORCALL_ARGUMENTS_OFFSET, st->context_kwnames);
    if (r) {
        Py_DECREF(r);
        return 0;
    }
    /* The loop is closed: nothing will run them; the outcome stands. */
    if (PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        PyErr_Clear();
        return -1;
    }
    PyErr_WriteUnraisable((PyObject *)h);
    return 0;
}

/* A handle's own done callbacks, each by loop.call_soon, once. */
void handle_schedule_callbacks(Handle *h) {
    /* Owned from here: a callback added while these are scheduled waits its turn. */
    PyObject *fn0 = h->callback0, *ctx0 = h->context0, *callbacks = h->callbacks;
    h->callback0 = h->context0 = h->callbacks = NULL;
    h->waiting = 0;
    if (!fn0 && !callbacks) return;
    kernels_state *st = state_of((PyObject *)h);
    PyObject *loop = Py_NewRef(h->outcome->loop);
    int open = !fn0 || schedule_one(st, loop, h, fn0, ctx0) == 0;
    for (Py_ssize_t i = 0; open && callbacks && i < PyList_GET_SIZE(callbacks); i++) {
        /* re-read each time: the list is ours, but a callee may still hold it */
        PyObject *entry = Py_NewRef(PyList_GET_ITEM(callbacks, i));
        open = schedule_one(st, loop, h, PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1)) == 0;
        Py_DECREF(entry);
    }
    Py_DECREF(loop);
    Py_XDECREF(fn0);
    Py_XDECREF(ctx0);
    Py_XDECREF(callbacks);
}

/* loop.call_soon(fn, arg, context=ctx), or without a context when ctx is NULL;
 * 0, or -1 with an error set. A closed loop (RuntimeError) is 0: nothing would
 * run the callback. */
static int call_soon(kernels_state *st, PyObject *loop, PyObject *fn, PyObject *arg, PyObject *ctx) {
    PyObject *call[5] = {NULL, loop, fn, arg, ctx};
    PyObject *r = PyObject_VectorcallMethod(st->str_call_soon, call + 1,
                                            3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            ctx ? st->context_kwnames : NULL);
    if (r) {
        Py_DECREF(r);
        return 0;
    }
    if (PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* Schedule ``o._run_callbacks(entries, start)`` on the outcome's loop. */
static int schedule_run(Outcome *o, PyObject *entries, Py_ssize_t start) {
    kernels_state *st = state_of((PyObject *)o);
    PyObject *loop = Py_NewRef(o->loop);
    PyObject *run = PyObject_GetAttrString((PyObject *)o, "_run_callbacks");
    PyObject *args = run ? Py_BuildValue("(On)", entries, start) : NULL;
    int rc = -1;
    if (args) {
        /* call_soon(run, entries, start): its arguments unpacked from the tuple */
        PyObject *call[5] = {NULL, loop, run, PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1)};
        PyObject *r = PyObject_VectorcallMethod(st->str_call_soon, call + 1,
                                                4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (r) {
            Py_DECREF(r);
            rc = 0;
        } else if (PyErr_ExceptionMatches(PyExc_RuntimeError)) {
            PyErr_Clear(); /* the loop is closed: nothing would run the callbacks */
            rc = 0;
        }
    }
    Py_DECREF(loop);
    Py_XDECREF(run);
    Py_XDECREF(args);
    return rc;
}

static int take_one(PyObject *entries, Handle *h, PyObject *fn, PyObject *ctx) {
    return (PyList_Append(entries, (PyObject *)h) < 0 || PyList_Append(entries, fn) < 0 ||
            PyList_Append(entries, ctx) < 0) ? -1 : 0;
}

/* The done callbacks of the waiting handles as (handle, fn, context) triples, taken
 * from the handles as a future's are when it is done; NULL with an error set (out of
 * memory), and then no handle has lost its callbacks.
 *
 * The list is built first, the handles give up their callbacks after: allocating a
 * container may run the cyclic collector (3.10, 3.11), whose finalizers may change
 * a handle's callbacks; appending to a list only reallocates its item array. */
static PyObject *take_callbacks(PyObject *waiting) {
    PyObject *entries = PyList_New(0);
    if (!entries) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(waiting); i++) { /* the list is ours */
        Handle *h = (Handle *)PyList_GET_ITEM(waiting, i);
        int failed = h->callback0 && take_one(entries, h, h->callback0, h->context0) < 0;
        PyObject *callbacks = h->callbacks;
        for (Py_ssize_t j = 0; !failed && callbacks && j < PyList_GET_SIZE(callbacks); j++) {
            PyObject *entry = PyList_GET_ITEM(callbacks, j); /* (fn, context) */
            failed = take_one(entries, h, PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1)) < 0;
        }
        if (failed) {
            Py_DECREF(entries); /* the handles still hold every callback */
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(waiting); i++) {
        Handle *h = (Handle *)PyList_GET_ITEM(waiting, i);
        /* entries holds every callback and context: freeing these runs no finalizer */
        Py_CLEAR(h->callback0);
        Py_CLEAR(h->context0);
        Py_CLEAR(h->callbacks);
        h->waiting = 0;
    }
    return entries;
}

/* Once the outcome is decided: one loop callback runs the waiting handles' done
 * callbacks, each in its own context (an asyncio.Future makes a loop callback
 * per done callback). In debug mode each gets its own, so that asyncio's
 * slow-callback warnings name it. */
void outcome_wake(Outcome *o) {
    PyObject *waiting = o->waiting;
    o->waiting = NULL;
    if (!waiting) return;
    kernels_state *st = state_of((PyObject *)o);
    PyObject *entries = take_callbacks(waiting);
    if (!entries) {
        /* No memory for the list: schedule each handle's callbacks on its own. */
        PyErr_Clear();
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(waiting); i++) {
            Handle *h = (Handle *)Py_NewRef(PyList_GET_ITEM(waiting, i));
            handle_schedule_callbacks(h);
            Py_DECREF(h);
        }
        Py_DECREF(waiting);
        return;
    }
    Py_DECREF(waiting);
    if (PyList_GET_SIZE(entries) == 0) {
        Py_DECREF(entries);
        return;
    }
    PyObject *loop = Py_NewRef(o->loop);
    PyObject *debug = PyObject_CallMethod(loop, "get_debug", NULL);
    int is_debug = debug ? PyObject_IsTrue(debug) : -1;
    Py_XDECREF(debug);
    int rc = -1;
    if (is_debug == 0) {
        rc = schedule_run(o, entries, 0);
    } else if (is_debug == 1) {
        rc = 0;
        for (Py_ssize_t i = 0; i + 2 < PyList_GET_SIZE(entries); i += 3) { /* the list is ours */
            PyObject *h = Py_NewRef(PyList_GET_ITEM(entries, i));
            PyObject *fn = Py_NewRef(PyList_GET_ITEM(entries, i + 1));
            PyObject *ctx = Py_NewRef(PyList_GET_ITEM(entries, i + 2));
            if (call_soon(st, loop, fn, h, ctx) < 0) PyErr_WriteUnraisable(h); /* the others still go */
            Py_DECREF(h);
            Py_DECREF(fn);
            Py_DECREF(ctx);
        }
    } else if (PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        PyErr_Clear(); /* as call_soon on a closed loop */
        rc = 0;
    }
    if (rc < 0) PyErr_WriteUnraisable((PyObject *)o);
    Py_DECREF(loop);
    Py_DECREF(entries);
}

/* Report ``exc`` (an exception instance) from ``fn(h)`` to the loop's exception
 * handler, as Handle._run does from its except block: ``exc`` is the exception being
 * handled meanwhile (sys.exc_info() in the handler, the __context__ of an error
 * raised while reporting). The context's "handle" is the record handle. */
static int report_callback_error(PyObject *loop, PyObject *fn, PyObject *h, PyObject *exc) {
    PyObject *old_type, *old_value, *old_tb;
    PyErr_GetExcInfo(&old_type, &old_value, &old_tb);
    PyErr_SetExcInfo(Py_NewRef((PyObject *)Py_TYPE(exc)), Py_NewRef(exc), PyException_GetTraceback(exc));
    int rc = -1;
    PyObject *message = PyUnicode_FromFormat("Exception in callback %R(%R)", fn, h);
    PyObject *context = message ? Py_BuildValue("{sOsOsO}", "message", message, "exception", exc,
                                                "handle", h)
                                : NULL;
    Py_XDECREF(message);
    if (context) {
        PyObject *r = PyObject_CallMethod(loop, "call_exception_handler", "O", context);
        Py_DECREF(context);
        if (r) {
            Py_DECREF(r);
            rc = 0;
        }
    }
    PyErr_SetExcInfo(old_type, old_value, old_tb); /* steals the three */
    return rc;
}

/* The current exception, normalized, with its traceback; NULL if none. */
static PyObject *take_exception(void) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (!type) return NULL;
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb && value) PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}

PyObject *outcome_run_callbacks(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    Outcome *o = (Outcome *)op;
    kernels_state *st = state_of(op);
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_run_callbacks() takes 2 positional arguments");
        return NULL;
    }
    if (!PyList_CheckExact(args[0]) || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_ValueError, "_run_callbacks() takes (handle, fn, context) triples and a start");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(args[0]);
    int overflow = 0;
    long long start = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (start == -1 && PyErr_Occurred()) return NULL;
    if (overflow || n % 3 || start < 0 || start > n || start % 3) {
        PyErr_SetString(PyExc_ValueError, "_run_callbacks() takes (handle, fn, context) triples and a start");
        return NULL;
    }
    Py_ssize_t stop = (Py_ssize_t)start + 3 * WAKE_SLICE < n ? (Py_ssize_t)start + 3 * WAKE_SLICE : n;
    for (Py_ssize_t i = (Py_ssize_t)start; i < stop; i += 3) {
        if (!Py_IS_TYPE(PyList_GET_ITEM(args[0], i), st->record_handle_type) ||
            !PyContext_CheckExact(PyList_GET_ITEM(args[0], i + 2))) {
            PyErr_SetString(PyExc_TypeError, "_run_callbacks() takes record handles and contexts");
            return NULL;
        }
    }
    PyObject *entries = Py_NewRef(args[0]);
    PyObject *loop = Py_NewRef(o->loop);
    Py_ssize_t i = (Py_ssize_t)start;
    int failed = 0;
    while (i < stop) {
        /* A callback may have changed the list (only a caller of this method can
         * hold it): read each triple again, and check it. */
        if (i + 2 >= PyList_GET_SIZE(entries)) break;
        PyObject *h = Py_NewRef(PyList_GET_ITEM(entries, i));
        PyObject *fn = Py_NewRef(PyList_GET_ITEM(entries, i + 1));
        PyObject *ctx = Py_NewRef(PyList_GET_ITEM(entries, i + 2));
        i += 3;
        PyObject *r = NULL;
        if (!Py_IS_TYPE(h, st->record_handle_type) || !PyContext_CheckExact(ctx)) {
            PyErr_SetString(PyExc_TypeError, "_run_callbacks() takes record handles and contexts");
            failed = 1;
        } else if (PyContext_Enter(ctx) == 0) { /* what Context.run does */
            r = PyObject_CallOneArg(fn, h);
            if (PyContext_Exit(ctx) < 0) Py_CLEAR(r);
        }
        if (!failed && !r) {
            if (PyErr_ExceptionMatches(PyExc_SystemExit) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
                failed = 1;
            } else {
                PyObject *exc = take_exception(); /* an exception instance: r is NULL */
                if (!exc || report_callback_error(loop, fn, h, exc) < 0) failed = 1;
                Py_XDECREF(exc);
            }
        }
        Py_XDECREF(r);
        Py_DECREF(h);
        Py_DECREF(fn);
        Py_DECREF(ctx);
        if (failed) break;
    }
    /* The rest on a later turn, also when an exception propagates (as the finally
     * of the reference): no callback is lost. */
    if (i < PyList_GET_SIZE(entries)) {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        if (schedule_run(o, entries, i) < 0) {
            if (exc_type) PyErr_WriteUnraisable(op); /* keep the first error */
            else failed = 1;
        }
        if (exc_type) PyErr_Restore(exc_type, exc_value, exc_tb);
    }
    Py_DECREF(loop);
    Py_DECREF(entries);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

