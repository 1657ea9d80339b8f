/* Reading what callers hand the compiled RecordBatchBuilder: arguments, keys
 * and values, headers. The reference is the pure builder's helpers in
 * aioproducer/protocol/records.py (_plain, _int_arg, _headers_bytes_pure):
 * the same bytes, and the same errors with the same messages, in the same order.
 *
 * A bytes-like object is read as the bytes it holds in C order, whatever its
 * format, shape or strides (memoryview(x).tobytes()), and its buffer is asked
 * for once (a __buffer__ of 3.12+ runs once). Headers are read from a snapshot
 * owned here (a tuple of tuples): whatever a name's or value's buffer export
 * does to the caller's list, nothing read here changes or goes away. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_builder_internal.h"

int scratch_reserve(scratch *s, Py_ssize_t more) {
    if (more > PY_SSIZE_T_MAX / 2 - s->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = s->len + more;
    if (need <= s->cap) return 0;
    Py_ssize_t cap = s->cap * 2 > need ? s->cap * 2 : need;
    char *p;
    if (s->p == s->local) {
        p = PyMem_Malloc(cap);
        if (p) memcpy(p, s->local, s->len);
    } else {
        p = PyMem_Realloc(s->p, cap);
    }
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    s->p = p;
    s->cap = cap;
    return 0;
}

static inline int scratch_put(scratch *s, const char *data, Py_ssize_t n) {
    if (n > MAX_PART) { /* no batch holds it; and n + 10 stays within Py_ssize_t */
        PyErr_NoMemory();
        return -1;
    }
    if (scratch_reserve(s, n + 10) < 0) return -1;
    char *p = put_uvarint(s->p + s->len, zigzag64(n));
    if (n) memcpy(p, data, n);
    s->len = p + n - s->p;
    return 0;
}

/* type(obj).__name__, as a new str. */
static PyObject *type_name(PyObject *obj) {
    PyTypeObject *type = Py_TYPE(obj);
    if (type->tp_flags & Py_TPFLAGS_HEAPTYPE) return Py_NewRef(((PyHeapTypeObject *)type)->ht_name);
    const char *dot = strrchr(type->tp_name, '.');
    return PyUnicode_FromString(dot ? dot + 1 : type->tp_name);
}

/* Replaces a TypeError (the object has no buffer, or its __buffer__ raised one)
 * by "<what>[<index>] <expect>, got <type>", as the pure twin's except clause does. */
static void retype_error(PyObject *obj, const char *what, int indexed, Py_ssize_t index,
                         PyObject *index_obj, const char *expect) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return;
    PyErr_Clear();
    PyObject *name = type_name(obj);
    if (!name) return;
    if (index_obj)
        PyErr_Format(PyExc_TypeError, "%s[%S] %s, got %U", what, index_obj, expect, name);
    else if (indexed)
        PyErr_Format(PyExc_TypeError, "%s[%zd] %s, got %U", what, index, expect, name);
    else
        PyErr_Format(PyExc_TypeError, "%s %s, got %U", what, expect, name);
    Py_DECREF(name);
}

static int span_read(PyObject *obj, builder_span *span) {
    span->held = 0;
    span->copy = NULL;
    if (obj == Py_None) {
        span->buf = NULL;
        span->len = -1;
        return 0;
    }
    if (PyBytes_CheckExact(obj)) { /* immutable, and alive while the caller holds it */
        span->buf = PyBytes_AS_STRING(obj);
        span->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    /* memoryview(obj)'s request: every exporter answers it alike for both twins. */
    if (PyObject_GetBuffer(obj, &span->view, PyBUF_FULL_RO) < 0) return -1;
    span->held = 1;
    span->buf = span->view.buf;
    span->len = span->view.len;
    if (PyBuffer_IsContiguous(&span->view, 'C')) return 0;
    /* Strided: its bytes in C order, copied as memoryview.tobytes() copies them. */
    span->copy = PyBytes_FromStringAndSize(NULL, span->view.len);
    if (!span->copy ||
        PyBuffer_ToContiguous(PyBytes_AS_STRING(span->copy), &span->view, span->view.len, 'C') < 0) {
        builder_span_release(span);
        return -1;
    }
    span->buf = PyBytes_AS_STRING(span->copy);
    span->held = 0;
    PyBuffer_Release(&span->view);
    return 0;
}

void builder_span_release(builder_span *span) {
    if (span->held) {
        span->held = 0;
        PyBuffer_Release(&span->view);
    }
    Py_CLEAR(span->copy);
}

int builder_span_get(PyObject *obj, builder_span *span, const char *what) {
    if (span_read(obj, span) == 0) return 0;
    retype_error(obj, what, 0, 0, NULL, "must be bytes-like or None");
    return -1;
}

int builder_span_at(PyObject *obj, builder_span *span, const char *what, Py_ssize_t index,
                    PyObject *index_obj) {
    if (span_read(obj, span) == 0) return 0;
    retype_error(obj, what, 1, index, index_obj, "must be bytes-like or None");
    return -1;
}

int builder_parse_args(const char *fname, const char *const *names, int n, int npos, int required,
                       PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out) {
    for (int i = 0; i < n; i++) out[i] = NULL;
    if (nargs > npos) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                     fname, npos, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k); /* always an exact str */
        int j = 0;
        while (j < n && PyUnicode_CompareWithASCIIString(key, names[j]) != 0) j++;
        if (j == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, key);
            return -1;
        }
        if (out[j]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname,
                         names[j]);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    for (int i = 0; i < required; i++) {
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname, names[i]);
            return -1;
        }
    }
    return 0;
}

static int not_int(PyObject *obj, const char *what, const char *expect) {
    PyObject *name = type_name(obj);
    if (name) {
        PyErr_Format(PyExc_TypeError, "%s must be %s, got %U", what, expect, name);
        Py_DECREF(name);
    }
    return -1;
}

int builder_int_arg(PyObject *obj, const char *what, long long lo, long long hi,
                    const char *range, long long *out) {
    /* An int subclass is read as its value: none of its methods run. */
    if (!PyLong_Check(obj)) return not_int(obj, what, "an int");
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < lo || v > hi) {
        PyObject *exact = PyNumber_Index(obj); /* an exact int: str() of it runs no method of ours */
        if (exact) {
            PyErr_Format(PyExc_ValueError, "%s %S is outside the %s range", what, exact, range);
            Py_DECREF(exact);
        }
        return -1;
    }
    *out = v;
    return 0;
}

int builder_length_arg(PyObject *obj, const char *what, Py_ssize_t cap, Py_ssize_t *out) {
    if (obj == NULL || obj == Py_None) {
        *out = -1;
        return 0;
    }
    if (!PyLong_Check(obj)) return not_int(obj, what, "an int or None");
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow < 0 || (!overflow && v < 0)) *out = -1; /* any negative length: null */
    else if (overflow > 0 || v > cap) *out = cap;        /* more than any batch holds */
    else *out = (Py_ssize_t)v;
    return 0;
}

int builder_timestamp(PyObject *obj, long long *ts, int *overflow) {
    if (!PyLong_Check(obj)) return not_int(obj, "timestamp_ms", "an int");
    *ts = PyLong_AsLongLongAndOverflow(obj, overflow);
    return *ts == -1 && PyErr_Occurred() ? -1 : 0;
}

void builder_timestamp_range_error(PyObject *ts_obj) {
    PyObject *exact = PyNumber_Index(ts_obj);
    if (!exact) return;
    PyErr_Format(PyExc_ValueError, "timestamp_ms %S is outside the int64 range", exact);
    Py_DECREF(exact);
}

void builder_delta_range_error(long long ts, long long base) {
    PyErr_Format(PyExc_ValueError,
                 "timestamp_ms %lld is too far from the batch's base timestamp %lld: "
                 "their difference does not fit in 64 bits", ts, base);
}

/* Appends one header's name: a str as UTF-8, else a bytes-like object's bytes. */
static int put_name(scratch *out, PyObject *name, Py_ssize_t i) {
    if (PyUnicode_Check(name)) { /* a subclass too: its characters, none of its methods */
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(name) < 0) return -1; /* every str is ready from 3.12 on */
#endif
        if (PyUnicode_IS_ASCII(name))
            return scratch_put(out, (const char *)PyUnicode_DATA(name), PyUnicode_GET_LENGTH(name));
        PyObject *utf8 = PyUnicode_AsUTF8String(name);
        if (!utf8) return -1;
        int rc = scratch_put(out, PyBytes_AS_STRING(utf8), PyBytes_GET_SIZE(utf8));
        Py_DECREF(utf8);
        return rc;
    }
    builder_span span;
    if (span_read(name, &span) < 0) {
        retype_error(name, "headers", 1, i, NULL, "name must be a str or bytes-like");
        return -1;
    }
    int rc = scratch_put(out, span.buf, span.len);
    builder_span_release(&span);
    return rc;
}

static int put_value(scratch *out, PyObject *value, Py_ssize_t i) {
    builder_span span;
    if (span_read(value, &span) < 0) {
        retype_error(value, "headers", 1, i, NULL, "value must be bytes-like or None");
        return -1;
    }
    int rc;
    if (span.len < 0) {
        rc = scratch_reserve(out, 1);
        if (rc == 0) out->p[out->len++] = 1; /* zigzag(-1): a null value */
    } else {
        rc = scratch_put(out, span.buf, span.len);
    }
    builder_span_release(&span);
    return rc;
}

int builder_encode_headers(PyObject *headers, scratch *out) {
    PyObject *pairs = PySequence_Tuple(headers); /* the caller's list, iterator...: a snapshot */
    if (!pairs) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(pairs);
    if (scratch_reserve(out, 10) < 0) goto fail;
    out->len = put_uvarint(out->p + out->len, zigzag64(n)) - out->p;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(pairs, i);
        PyObject *pair = PyTuple_CheckExact(item) ? Py_NewRef(item) : PySequence_Tuple(item);
        if (!pair) goto fail;
        if (PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_ValueError, "headers[%zd] must be a (name, value) pair, got %zd items",
                         i, PyTuple_GET_SIZE(pair));
            Py_DECREF(pair);
            goto fail;
        }
        /* Both held by ``pair``, a tuple nothing else changes. */
        int rc = put_name(out, PyTuple_GET_ITEM(pair, 0), i);
        if (rc == 0) rc = put_value(out, PyTuple_GET_ITEM(pair, 1), i);
        Py_DECREF(pair);
        if (rc < 0) goto fail;
    }
    Py_DECREF(pairs);
    return 0;
fail:
    Py_DECREF(pairs);
    return -1;
}
