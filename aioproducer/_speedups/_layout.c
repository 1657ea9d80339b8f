/* What the kernels share (declared in _varint.h): how a module-level function
 * is added to the module, and the clock a record is stamped with. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <time.h>

#include "_varint.h"

/* Milliseconds since the epoch now: time.time_ns() // 1_000_000 without the
 * Python int of nanoseconds and its division (CPython reads the same clock). */
int now_ms(long long *out) {
#if defined(CLOCK_REALTIME)
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) == 0) {
        *out = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
        return 0;
    }
#endif
    PyObject *time = PyImport_ImportModule("time");
    if (!time) return -1;
    PyObject *ns = PyObject_CallMethod(time, "time_ns", NULL);
    Py_DECREF(time);
    if (!ns) return -1;
    long long value = PyLong_AsLongLong(ns);
    Py_DECREF(ns);
    if (value == -1 && PyErr_Occurred()) return -1;
    *out = value / 1000000; /* after the epoch: truncation is the floor */
    return 0;
}

/* Adds the module-level function ``def`` to ``module``: 0, or -1. */
int add_module_function(PyObject *module, PyMethodDef *def) {
    PyObject *name = PyModule_GetNameObject(module);
    if (!name) return -1;
    PyObject *function = PyCFunction_NewEx(def, module, name);
    Py_DECREF(name);
    if (!function) return -1;
    int rc = PyModule_AddObjectRef(module, def->ml_name, function);
    Py_DECREF(function);
    return rc;
}
