/* Compiled twins of the bulk path's per-record column passes.
 *
 * A bulk call (enqueue_many) looks at every record three times before and
 * while it encodes: the values' lengths, each record's buffer-memory
 * reservation (summed over slices and batches), and each record's position in
 * its partition's stream. In Python each pass is a list or array built one
 * int object at a time; here each is one loop over machine integers. The
 * pure-Python references, which tests/unit/test_column_kernels.py proves
 * equal on random input, are:
 *
 *   byte_lengths     aioproducer.bulk.input._lengths (for a list of bytes/None)
 *   reservations     aioproducer.bulk.bounds.reservations_pure
 *   fill_counting    aioproducer.bulk.bounds.fill_counting_pure
 *
 * Each writes into an array('q') the caller allocated, through the buffer
 * protocol: no Python object is created per record.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <limits.h>
#include <string.h>

/* A writable, contiguous buffer of int64 (an array('q')). */
static int int64_view(PyObject *obj, Py_buffer *view, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->itemsize != 8 || !view->format || (strcmp(view->format, "q") && strcmp(view->format, "l"))) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must be an array('q')", what);
        return -1;
    }
    return 0;
}

/* byte_lengths(column, out) -> bool
 *
 * ``column`` a list; ``out`` an array('q') of its length. When every element
 * is exactly bytes or None, fills ``out`` with each length (-1 for None) and
 * returns True; otherwise returns False (``out`` partly written), and the
 * caller takes the general path, which names the first bad element. */
static PyObject *k_byte_lengths(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "byte_lengths(list, array('q'))");
        return NULL;
    }
    PyObject *column = args[0];
    Py_buffer out;
    if (int64_view(args[1], &out, 1, "out") < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(column);
    PyObject *result = Py_False;
    if (out.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "out must have one entry per element");
        result = NULL;
        goto done;
    }
    int64_t *lengths = (int64_t *)out.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(column, i);
        if (PyBytes_CheckExact(v)) {
            lengths[i] = (int64_t)PyBytes_GET_SIZE(v);
        } else if (v == Py_None) {
            lengths[i] = -1;
        } else {
            goto done; /* not bytes: the general path decides */
        }
    }
    result = Py_True;
done:
    PyBuffer_Release(&out);
    Py_XINCREF(result);
    return result;
}

/* reservations(out, fixed, value_lengths, key_lengths, limit) -> int
 *
 * ``out`` an array('q') of n + 1 entries: out[0] = 0 and out[i + 1] = out[i] +
 * record i's reservation, which is ``fixed - 1 + value_length`` without keys,
 * ``fixed + value_length + key_length`` with them (lengths are -1 for None).
 * Returns the index of the first record whose reservation exceeds ``limit``,
 * or -1. */
static PyObject *k_reservations(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "reservations takes 5 arguments");
        return NULL;
    }
    long long fixed = PyLong_AsLongLong(args[1]);
    if (fixed == -1 && PyErr_Occurred()) return NULL;
    /* A limit past int64 compares as the pure twin's Python int does. */
    int limit_overflow;
    long long limit = PyLong_AsLongLongAndOverflow(args[4], &limit_overflow);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    Py_buffer out, vlen, klen;
    int has_keys = args[3] != Py_None;
    if (int64_view(args[0], &out, 1, "out") < 0) return NULL;
    if (int64_view(args[2], &vlen, 0, "value_lengths") < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    if (has_keys && int64_view(args[3], &klen, 0, "key_lengths") < 0) {
        PyBuffer_Release(&vlen);
        PyBuffer_Release(&out);
        return NULL;
    }
    Py_ssize_t n = vlen.len / 8;
    Py_ssize_t first_over = -1;
    PyObject *result = NULL;
    if (out.len != (n + 1) * 8 || (has_keys && klen.len != vlen.len)) {
        PyErr_SetString(PyExc_ValueError, "reservations: arrays of mismatched lengths");
        goto done;
    }
    const int64_t *v = (const int64_t *)vlen.buf;
    const int64_t *k = has_keys ? (const int64_t *)klen.buf : NULL;
    int64_t *cum = (int64_t *)out.buf;
    /* Exact sums, as the pure twin's Python ints: a size of three int64s
     * fits in 66 bits and n of them in 128; a running total that leaves int64
     * fails as the pure twin's array('q', ...) does, after the same pass. */
    __int128 total = 0;
    int overflow = 0;
    cum[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        __int128 size = has_keys ? (__int128)fixed + v[i] + k[i] : (__int128)fixed - 1 + v[i];
        if (first_over < 0 && (limit_overflow ? limit_overflow < 0 : size > limit)) first_over = i;
        total += size;
        if (!overflow && (total > INT64_MAX || total < INT64_MIN)) overflow = total > 0 ? 1 : -1;
        if (!overflow) cum[i + 1] = (int64_t)total;
    }
    if (overflow) {
        /* array('q')'s own OverflowError, for a value of this sign. */
        PyObject *big = overflow > 0 ? PyLong_FromUnsignedLongLong(1ull << 63)
                                     : PyLong_FromDouble(-18446744073709551616.0); /* -2**64 */
        if (big) {
            (void)PyLong_AsLongLong(big);
            Py_DECREF(big);
        }
        goto done;
    }
    result = PyLong_FromSsize_t(first_over);
done:
    if (has_keys) PyBuffer_Release(&klen);
    PyBuffer_Release(&vlen);
    PyBuffer_Release(&out);
    return result;
}

/* fill_counting(out, start, count, first) -> None: out[start + j] = first + j. */
static PyObject *k_fill_counting(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "fill_counting takes 4 arguments");
        return NULL;
    }
    /* In the pure twin's order: the range first (an index past Py_ssize_t is
     * outside any array), then the positions (array('q')'s OverflowError). */
    int start_over, count_over, first_over;
    long long start = PyLong_AsLongLongAndOverflow(args[1], &start_over);
    if (start == -1 && PyErr_Occurred()) return NULL;
    long long count = PyLong_AsLongLongAndOverflow(args[2], &count_over);
    if (count == -1 && PyErr_Occurred()) return NULL;
    long long first = PyLong_AsLongLongAndOverflow(args[3], &first_over);
    if (first == -1 && PyErr_Occurred()) return NULL;
    Py_buffer out;
    if (int64_view(args[0], &out, 1, "out") < 0) return NULL;
    long long n = (long long)(out.len / 8);
    if (start_over || count_over || start < 0 || count < 0 || start > n || count > n - start) {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_IndexError, "fill_counting: range outside the array");
        return NULL;
    }
    if (count && (first_over || first > LLONG_MAX - (count - 1))) {
        PyBuffer_Release(&out);
        /* array('q')'s own OverflowError, for the first position past int64. */
        PyObject *big = first_over < 0 ? Py_NewRef(args[3]) : PyLong_FromUnsignedLongLong(1ull << 63);
        if (big) {
            (void)PyLong_AsLongLong(big);
            Py_DECREF(big);
        }
        return NULL;
    }
    int64_t *o = (int64_t *)out.buf + start;
    for (Py_ssize_t j = 0; j < count; j++) o[j] = (int64_t)(first + j);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyMethodDef column_defs[] = {
    {"byte_lengths", (PyCFunction)(void (*)(void))k_byte_lengths, METH_FASTCALL,
     "byte_lengths(list, out) -> True when every element is bytes or None (lengths in out)"},
    {"reservations", (PyCFunction)(void (*)(void))k_reservations, METH_FASTCALL,
     "reservations(out, fixed, value_lengths, key_lengths, limit) -> first index over limit or -1"},
    {"fill_counting", (PyCFunction)(void (*)(void))k_fill_counting, METH_FASTCALL,
     "fill_counting(out, start, count, first) -> None"},
    {NULL, NULL, 0, NULL},
};

int add_column_kernels(PyObject *module) {
    return PyModule_AddFunctions(module, column_defs);
}
