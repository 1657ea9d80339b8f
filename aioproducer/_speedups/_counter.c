/* BufferCounter, compiled: the free bytes of buffer memory and the exhausted flag.
 *
 * The reference is aioproducer/engine/buffer_pool.py (BufferCounterPy).
 * BufferPool (waiters, grants, timeouts) subclasses whichever twin is active
 * and is the only writer of the counter besides try_reserve, which the lanes
 * call per record: the counter is a C struct the lanes reach without a
 * method call (_counter.h), instead of slots of a Python class read in place.
 * Sizes are ints in [0, 2**63 - 1]; anything else is refused with TypeError
 * (not an int) or ValueError (out of range), as the pure twin refuses it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>

#include "_counter.h"
#include "_state.h"

/* ``obj`` as a size: an int in [0, 2**63 - 1] (read as its value, no Python code
 * runs), else -1 with TypeError or ValueError. */
static int size_arg(PyObject *obj, long long *out) {
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "size must be an int, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (overflow || n < 0) {
        PyErr_Format(PyExc_ValueError, "size must be in [0, 2**63 - 1], got %R", obj);
        return -1;
    }
    *out = n;
    return 0;
}

static int counter_init(PyObject *op, PyObject *args, PyObject *kwds) {
    PyObject *available = NULL;
    static char *names[] = {"available", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:BufferCounter", names, &available)) return -1;
    long long n = 0;
    if (available && size_arg(available, &n) < 0) return -1;
    ((Counter *)op)->available = n;
    ((Counter *)op)->exhausted = 0;
    return 0;
}

static void counter_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *counter_try_reserve_method(PyObject *op, PyObject *arg) {
    long long n;
    if (size_arg(arg, &n) < 0) return NULL;
    return PyBool_FromLong(counter_try_reserve(op, n));
}

/* take(n): the pool grants ``n`` bytes to a waiter (exhausted or not). */
static PyObject *counter_take(PyObject *op, PyObject *arg) {
    long long n;
    if (size_arg(arg, &n) < 0) return NULL;
    Counter *c = (Counter *)op;
    if (c->available < n) {
        PyErr_Format(PyExc_ValueError, "cannot take %lld bytes: %lld available", n, c->available);
        return NULL;
    }
    c->available -= n;
    Py_RETURN_NONE;
}

/* give(n): ``n`` bytes come back. */
static PyObject *counter_give(PyObject *op, PyObject *arg) {
    long long n;
    if (size_arg(arg, &n) < 0) return NULL;
    Counter *c = (Counter *)op;
    if (c->available > LLONG_MAX - n) {
        PyErr_Format(PyExc_ValueError, "cannot give %lld bytes: %lld available, 2**63 - 1 at most", n,
                     c->available);
        return NULL;
    }
    c->available += n;
    Py_RETURN_NONE;
}

static PyObject *counter_set_exhausted(PyObject *op, PyObject *arg) {
    int flag = PyObject_IsTrue(arg); /* may run __bool__: nothing is held across it */
    if (flag < 0) return NULL;
    ((Counter *)op)->exhausted = (char)flag;
    Py_RETURN_NONE;
}

static PyObject *counter_get_available(PyObject *op, void *closure) {
    return PyLong_FromLongLong(((Counter *)op)->available);
}

static PyObject *counter_get_exhausted(PyObject *op, void *closure) {
    return PyBool_FromLong(((Counter *)op)->exhausted);
}

static PyMethodDef counter_methods[] = {
    {"try_reserve", counter_try_reserve_method, METH_O,
     "try_reserve(n) -> take n bytes if not exhausted and n are free"},
    {"take", counter_take, METH_O, "take(n): n bytes granted (ValueError if fewer are free)"},
    {"give", counter_give, METH_O, "give(n): n bytes come back"},
    {"set_exhausted", counter_set_exhausted, METH_O, "set_exhausted(flag): someone waits for memory"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef counter_getset[] = {
    {"available", counter_get_available, NULL, "free bytes of buffer memory", NULL},
    {"exhausted", counter_get_exhausted, NULL, "someone waits for memory", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot counter_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, counter_init},
    {Py_tp_dealloc, counter_dealloc},
    {Py_tp_methods, counter_methods},
    {Py_tp_getset, counter_getset},
    {Py_tp_doc, "BufferCounter(available=0): free bytes of buffer memory and the exhausted flag."},
    {0, NULL},
};

static PyType_Spec counter_spec = {
    .name = "aioproducer._speedups._kernels.BufferCounter",
    .basicsize = sizeof(Counter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = counter_slots,
};

int add_counter_type(PyObject *module) {
    kernels_state *st = get_kernels_state(module);
    st->counter_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &counter_spec, NULL);
    if (!st->counter_type) return -1;
    return PyModule_AddType(module, st->counter_type);
}
