/* What the kernels that bind a Python class's layout share (declared in
 * _varint.h): where a slot sits in an instance, how a binder is added to the
 * module, and the clock a record is stamped with. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
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

/* The offset of slot ``name`` of ``type`` (a PyObject * at a fixed place in every
 * instance, subclasses too: CPython's member descriptors), or -1 with an error.
 * With ``writable``, a read-only member does not count. Shared by the kernels
 * that bind a class's layout (_lane.c). */
Py_ssize_t slot_offset(PyTypeObject *type, const char *name, int writable) {
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (!descr) return -1;
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX && !(writable && (member->flags & READONLY)))
            offset = member->offset;
    }
    Py_DECREF(descr);
    if (offset < 0)
        PyErr_Format(PyExc_TypeError, "%s.%s is not a%s slot", type->tp_name, name,
                     writable ? " writable" : "");
    return offset;
}

/* The offsets of ``n`` slots of ``type`` into ``out``: 0, or -1 with an error. */
int slot_offsets(PyTypeObject *type, const char *const *names, int n, Py_ssize_t *out) {
    for (int i = 0; i < n; i++) {
        out[i] = slot_offset(type, names[i], 0);
        if (out[i] < 0) return -1;
    }
    return 0;
}

/* Adds the module-level function ``def`` (a binder) to ``module``: 0, or -1. */
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
