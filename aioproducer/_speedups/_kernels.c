/* Compiled twins of the producer's per-record kernels.
 *
 * Each function here computes exactly what its pure-Python reference computes
 * (tests/unit/test_kernels_equal.py checks byte equality on random input):
 *
 *   murmur2            aioproducer.engine.partitioner._murmur2_pure
 *   _partition_for_key, _time_to_switch   partitioner.partition_for_key, .time_to_switch
 *                      (test hooks of _partitioning.h, the partitioner's compiled twin)
 *   headers_bytes      aioproducer.protocol.records._headers_bytes_pure
 *   encode_record      the encoding half of RecordBatchBuilder._append_pure
 *   encode_run         the per-record loops of RecordBatchBuilder.append_run
 *   append_unkeyed     ProducerBatch._append_unkeyed_pure (in _append.c)
 *   UnkeyedLane.append UnkeyedLane._append_pure (in _lane.c; KeyedLane.append likewise)
 *   EnqueueShortcut.take  EnqueueShortcut._take_pure (in _lane.c)
 *   byte_lengths, reservations, fill_counting   the bulk column passes (in _columns.c)
 *
 * Record layout: message format v2 (KIP-98); every varint is zigzag encoded.
 * The functions here hold no Python objects of the producer: they read bytes-like
 * inputs and append to a bytearray, so the producer's classes stay pure Python
 * (weak references, slots and subclassing keep working). append_unkeyed reaches
 * a batch's slots, and stays within the batch module's methods (see _append.c).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_outcome.h"
#include "_partitioning.h"
#include "_state.h"
#include "_varint.h"

/* ---- murmur2 ------------------------------------------------------------ */

/* Hashes the bytes a buffer holds, in C order, as the pure reference does
 * (``memoryview(data).tobytes()`` for anything but exactly bytes): so a
 * memoryview of any format or stride, an array('b') or a bytes subclass hashes
 * as the bytes it holds, never as its items; no buffer: memoryview's TypeError. */
static PyObject *k_murmur2(PyObject *self, PyObject *arg) {
    if (PyBytes_CheckExact(arg)) {
        return PyLong_FromLong((long)murmur2_buffer((const unsigned char *)PyBytes_AS_STRING(arg),
                                                    PyBytes_GET_SIZE(arg)));
    }
    /* memoryview() runs the object's __buffer__ (3.12+) once; the copy then
     * owns the bytes, whatever that code does to the object afterwards. */
    PyObject *view = PyMemoryView_FromObject(arg);
    if (!view) return NULL;
    PyObject *data = PyBytes_FromObject(view);
    Py_DECREF(view);
    if (!data) return NULL;
    int h = murmur2_buffer((const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
    Py_DECREF(data);
    return PyLong_FromLong((long)h);
}

/* ---- the partitioning twin's hooks (tests compare them with partitioner.py) ---- */

/* _partition_for_key(key, num_partitions): _partitioning.h's partition_for_key_buffer,
 * as the keyed lane runs it; num_partitions in [1, 2**31 - 1] (Java's int). */
static PyObject *k_partition_for_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_partition_for_key(key, num_partitions) takes 2 arguments");
        return NULL;
    }
    long long n = PyLong_AsLongLong(args[1]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || n > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be in [1, %d], got %lld", INT32_MAX, n);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    int32_t p = partition_for_key_buffer((const unsigned char *)view.buf, view.len, (int32_t)n);
    PyBuffer_Release(&view);
    return PyLong_FromLong((long)p);
}

/* _time_to_switch(produced, limit, filled, size): _partitioning.h's rule over int64s. */
static PyObject *k_time_to_switch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "_time_to_switch(produced, limit, filled, size) takes 4 arguments");
        return NULL;
    }
    int64_t v[4];
    for (int i = 0; i < 4; i++) {
        long long x = PyLong_AsLongLong(args[i]);
        if (x == -1 && PyErr_Occurred()) return NULL;
        v[i] = (int64_t)x;
    }
    return PyBool_FromLong(time_to_switch(v[0], v[1], v[2], v[3]));
}

/* ---- headers ------------------------------------------------------------ */

/* count + (keyLength, key UTF-8, valueLength, value)*, as a new bytes object. */
static PyObject *encode_headers(PyObject *headers) {
    PyObject *seq = PySequence_Fast(headers, "headers must be a sequence of (name, value) pairs");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, 0);
    PyObject *result = NULL;
    if (!out) goto done;
    char tmp[10];
    Py_ssize_t used = put_uvarint(tmp, zigzag64(n)) - tmp;
    if (PyByteArray_Resize(out, used) < 0) goto done;
    memcpy(PyByteArray_AS_STRING(out), tmp, used);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *pair = PySequence_Fast(item, "a header must be a (name, value) pair");
        if (!pair) goto done;
        if (PySequence_Fast_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_ValueError, "a header must be a (name, value) pair, got %zd items",
                         PySequence_Fast_GET_SIZE(pair));
            Py_DECREF(pair);
            goto done;
        }
        PyObject *hkey = PySequence_Fast_GET_ITEM(pair, 0);
        PyObject *hvalue = PySequence_Fast_GET_ITEM(pair, 1);
        PyObject *kb;
        if (PyUnicode_Check(hkey)) kb = PyUnicode_AsUTF8String(hkey);
        else kb = PyObject_CallOneArg((PyObject *)&PyBytes_Type, hkey);
        if (!kb) { Py_DECREF(pair); goto done; }
        Py_buffer vview;
        int has_value = hvalue != Py_None;
        if (has_value && PyObject_GetBuffer(hvalue, &vview, PyBUF_SIMPLE) < 0) {
            Py_DECREF(kb); Py_DECREF(pair); goto done;
        }
        Py_ssize_t klen = PyBytes_GET_SIZE(kb);
        Py_ssize_t vlen = has_value ? vview.len : 0;
        Py_ssize_t add = uvarint_size(zigzag64(klen)) + klen +
                         (has_value ? uvarint_size(zigzag64(vlen)) + vlen : 1);
        if (PyByteArray_Resize(out, used + add) < 0) {
            if (has_value) PyBuffer_Release(&vview);
            Py_DECREF(kb); Py_DECREF(pair); goto done;
        }
        char *p = PyByteArray_AS_STRING(out) + used;
        p = put_uvarint(p, zigzag64(klen));
        memcpy(p, PyBytes_AS_STRING(kb), klen);
        p += klen;
        if (has_value) {
            p = put_uvarint(p, zigzag64(vlen));
            memcpy(p, vview.buf, vlen);
            PyBuffer_Release(&vview);
        } else {
            *p = 1; /* zigzag(-1): a null header value */
        }
        used += add;
        Py_DECREF(kb);
        Py_DECREF(pair);
    }
    result = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(out), used);
done:
    Py_XDECREF(out);
    Py_DECREF(seq);
    return result;
}

static PyObject *k_headers_bytes(PyObject *self, PyObject *headers) {
    return encode_headers(headers);
}

/* ---- one record ----------------------------------------------------------- */

/* encode_record(buf, batch_size, count, timestamp_delta, key, value, headers) -> int
 *
 * Appends one record (offset delta ``count``) to ``buf`` and returns its encoded
 * size, or returns -1 and leaves ``buf`` unchanged when ``count`` > 0 and the
 * record would take the batch (buf, which starts with the 61-byte header's room)
 * past ``batch_size``. */
static PyObject *k_encode_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "encode_record takes 7 arguments");
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyByteArray_Check(buf)) {
        PyErr_SetString(PyExc_TypeError, "encode_record needs a bytearray");
        return NULL;
    }
    Py_ssize_t batch_size = PyLong_AsSsize_t(args[1]);
    if (batch_size == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t count = PyLong_AsSsize_t(args[2]);
    if (count == -1 && PyErr_Occurred()) return NULL;
    long long delta = PyLong_AsLongLong(args[3]);
    if (delta == -1 && PyErr_Occurred()) return NULL;
    PyObject *key = args[4], *value = args[5], *headers = args[6];
    Py_buffer kview, vview;
    int has_key = key != Py_None, has_value = value != Py_None;
    PyObject *hdr = NULL, *result = NULL;
    if (has_key && PyObject_GetBuffer(key, &kview, PyBUF_SIMPLE) < 0) return NULL;
    if (has_value && PyObject_GetBuffer(value, &vview, PyBUF_SIMPLE) < 0) {
        if (has_key) PyBuffer_Release(&kview);
        return NULL;
    }
    /* Pure: ``_headers_bytes(headers) if headers else _ZERO`` */
    int truth = PyObject_IsTrue(headers);
    if (truth < 0) goto done;
    if (truth) {
        hdr = encode_headers(headers);
        if (!hdr) goto done;
    }
    uint64_t ts = count ? zigzag64((int64_t)delta) : 0;
    uint64_t off = zigzag64(count);
    Py_ssize_t klen = has_key ? kview.len : 0, vlen = has_value ? vview.len : 0;
    Py_ssize_t hlen = hdr ? PyBytes_GET_SIZE(hdr) : 1;
    Py_ssize_t size = 1 + uvarint_size(ts) + uvarint_size(off) +
                      (has_key ? uvarint_size(zigzag64(klen)) + klen : 1) +
                      (has_value ? uvarint_size(zigzag64(vlen)) + vlen : 1) + hlen;
    Py_ssize_t total = uvarint_size(zigzag64(size)) + size;
    Py_ssize_t old = PyByteArray_GET_SIZE(buf);
    if (count && old + total > batch_size) {
        result = PyLong_FromLong(-1);
        goto done;
    }
    if (resize_growing(buf, old + total, batch_size) < 0) goto done;
    char *p = PyByteArray_AS_STRING(buf) + old;
    p = put_uvarint(p, zigzag64(size));
    *p++ = 0; /* attributes: always 0 in a producer's record */
    p = put_uvarint(p, ts);
    p = put_uvarint(p, off);
    if (has_key) {
        p = put_uvarint(p, zigzag64(klen));
        memcpy(p, kview.buf, klen);
        p += klen;
    } else {
        *p++ = 1;
    }
    if (has_value) {
        p = put_uvarint(p, zigzag64(vlen));
        memcpy(p, vview.buf, vlen);
        p += vlen;
    } else {
        *p++ = 1;
    }
    if (hdr) memcpy(p, PyBytes_AS_STRING(hdr), hlen);
    else *p = 0;
    result = PyLong_FromSsize_t(size);
done:
    Py_XDECREF(hdr);
    if (has_key) PyBuffer_Release(&kview);
    if (has_value) PyBuffer_Release(&vview);
    return result;
}

/* ---- a run of records ----------------------------------------------------- */

/* Makes ``buf`` (``*cap`` bytes long) at least ``need`` bytes long: as long as
 * ``hint`` (where the run is expected to end) or twice as long, whichever is
 * more, but not past ``limit`` (the batch's end) unless ``need`` is. A run of
 * like records costs one copy of the buffer, and short runs one per doubling. */
static inline int grow(PyObject *buf, Py_ssize_t *cap, Py_ssize_t need, Py_ssize_t hint,
                       Py_ssize_t limit) {
    if (need <= *cap) return 0;
    Py_ssize_t want = *cap * 2 < limit ? *cap * 2 : limit;
    if (hint > want) want = hint;
    if (need > want) want = need;
    if (PyByteArray_Resize(buf, want) < 0) return -1;
    *cap = want;
    return 0;
}

/* encode_run(buf, room, count, fixed, hdr, values, keys, order, start, stop) -> int
 *
 * Appends records ``values[i]`` (and ``keys[i]`` when keys is not None) for each
 * ``i`` of ``range(start, stop)``, or of ``order`` when it is not None (then the
 * slice ``order[start:stop]`` already), while they fit in ``room`` bytes (the
 * first record of an empty batch always does). ``fixed`` is the attributes byte
 * and timestamp delta, ``hdr`` the encoded header section. Returns the new
 * record count; on an error ``buf`` is left as it was. */
static PyObject *k_encode_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "encode_run takes 10 arguments");
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyByteArray_Check(buf) || !PyBytes_Check(args[3]) || !PyBytes_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "encode_run needs a bytearray and bytes");
        return NULL;
    }
    Py_ssize_t room = PyLong_AsSsize_t(args[1]);
    if (room == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t count = PyLong_AsSsize_t(args[2]);
    if (count == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t first = PyLong_AsSsize_t(args[8]);
    if (first == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t last = PyLong_AsSsize_t(args[9]);
    if (last == -1 && PyErr_Occurred()) return NULL;
    const char *fixed = PyBytes_AS_STRING(args[3]);
    Py_ssize_t fixed_len = PyBytes_GET_SIZE(args[3]);
    const char *hdr = PyBytes_AS_STRING(args[4]);
    Py_ssize_t hdr_len = PyBytes_GET_SIZE(args[4]);
    PyObject *values = args[5];
    PyObject *keys = args[6] == Py_None ? NULL : args[6];
    PyObject *order = NULL;
    Py_ssize_t n = last > first ? last - first : 0;
    if (args[7] != Py_None) {
        order = PySequence_Fast(args[7], "order must be a sequence of indices");
        if (!order) return NULL;
        n = PySequence_Fast_GET_SIZE(order);
    }
    Py_ssize_t start = PyByteArray_GET_SIZE(buf), used = start, cap = start;
    /* The memory the buffer already holds past its length (from an earlier
     * run's reservation) is used first: made part of its length at once (no
     * copy: within its allocation), trimmed back to ``used`` at the end. */
    PyByteArrayObject *array = (PyByteArrayObject *)buf;
    if (array->ob_start == array->ob_bytes && array->ob_alloc - 1 > start) {
        if (PyByteArray_Resize(buf, array->ob_alloc - 1) < 0) goto fail;
        cap = PyByteArray_GET_SIZE(buf);
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t i = first + j;
        if (order) {
            i = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(order, j), PyExc_IndexError);
            if (i == -1 && PyErr_Occurred()) goto fail;
        }
        PyObject *value = PySequence_GetItem(values, i);
        if (!value) goto fail;
        PyObject *key = NULL;
        if (keys) {
            key = PySequence_GetItem(keys, i);
            if (!key) { Py_DECREF(value); goto fail; }
        }
        Py_buffer kview, vview;
        int has_key = key && key != Py_None, has_value = value != Py_None;
        if (has_key && PyObject_GetBuffer(key, &kview, PyBUF_SIMPLE) < 0) {
            Py_XDECREF(key); Py_DECREF(value); goto fail;
        }
        if (has_value && PyObject_GetBuffer(value, &vview, PyBUF_SIMPLE) < 0) {
            if (has_key) PyBuffer_Release(&kview);
            Py_XDECREF(key); Py_DECREF(value); goto fail;
        }
        Py_ssize_t klen = has_key ? kview.len : 0, vlen = has_value ? vview.len : 0;
        uint64_t off = zigzag64(count);
        Py_ssize_t body = fixed_len + uvarint_size(off) +
                          (has_key ? uvarint_size(zigzag64(klen)) + klen : 1) +
                          (has_value ? uvarint_size(zigzag64(vlen)) + vlen : 1) + hdr_len;
        Py_ssize_t size = uvarint_size(zigzag64(body)) + body;
        int full = size > room && count;
        /* The rest of the run, were its records like this one (and a byte
         * longer: their offset deltas grow), within the room left. */
        Py_ssize_t left = n - j, hint = room;
        if (left <= room / (size + 1)) hint = (size + 1) * left;
        if (full || grow(buf, &cap, used + size, used + hint, used + room) < 0) {
            if (has_key) PyBuffer_Release(&kview);
            if (has_value) PyBuffer_Release(&vview);
            Py_XDECREF(key);
            Py_DECREF(value);
            if (full) break;
            goto fail;
        }
        room -= size;
        char *p = PyByteArray_AS_STRING(buf) + used;
        p = put_uvarint(p, zigzag64(body));
        memcpy(p, fixed, fixed_len);
        p += fixed_len;
        p = put_uvarint(p, off);
        if (has_key) {
            p = put_uvarint(p, zigzag64(klen));
            memcpy(p, kview.buf, klen);
            p += klen;
            PyBuffer_Release(&kview);
        } else {
            *p++ = 1;
        }
        if (has_value) {
            p = put_uvarint(p, zigzag64(vlen));
            memcpy(p, vview.buf, vlen);
            p += vlen;
            PyBuffer_Release(&vview);
        } else {
            *p++ = 1;
        }
        memcpy(p, hdr, hdr_len);
        used += size;
        count++;
        Py_XDECREF(key);
        Py_DECREF(value);
    }
    if (PyByteArray_Resize(buf, used) < 0) goto fail;
    Py_XDECREF(order);
    return PyLong_FromSsize_t(count);
fail:
    if (PyByteArray_GET_SIZE(buf) != start) {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        PyByteArray_Resize(buf, start); /* nothing of a failed run stays */
        PyErr_Restore(exc_type, exc_value, exc_tb);
    }
    Py_XDECREF(order);
    return NULL;
}

static PyMethodDef methods[] = {
    {"murmur2", k_murmur2, METH_O, "Kafka's murmur2 (seed 0x9747b28c) as a signed 32-bit int."},
    {"_partition_for_key", (PyCFunction)(void (*)(void))k_partition_for_key, METH_FASTCALL,
     "_partition_for_key(key, num_partitions) -> Java's toPositive(murmur2(key)) % num_partitions"},
    {"_time_to_switch", (PyCFunction)(void (*)(void))k_time_to_switch, METH_FASTCALL,
     "_time_to_switch(produced, limit, filled, size) -> the sticky partitioner's switch rule"},
    {"headers_bytes", k_headers_bytes, METH_O, "A record's header count and headers, encoded."},
    {"encode_record", (PyCFunction)(void (*)(void))k_encode_record, METH_FASTCALL,
     "encode_record(buf, batch_size, count, timestamp_delta, key, value, headers) -> size or -1"},
    {"encode_run", (PyCFunction)(void (*)(void))k_encode_run, METH_FASTCALL,
     "encode_run(buf, room, count, fixed, hdr, values, keys, order, start, stop) -> new record count"},
    {NULL, NULL, 0, NULL},
};

/* ---- the module: multi-phase initialisation (PEP 489), its state per module (PEP 573) ---- */

static int kernels_traverse(PyObject *module, visitproc visit, void *arg) {
    kernels_state *st = get_kernels_state(module);
    Py_VISIT(st->str_call_soon);
    Py_VISIT(st->context_kwnames);
    Py_VISIT(st->tuple_new);
    Py_VISIT(st->invalid_state_error);
    Py_VISIT(st->cancelled_error);
    Py_VISIT(st->record_metadata_type);
    Py_VISIT(st->batch_outcome_type);
    Py_VISIT(st->record_handle_type);
    Py_VISIT(st->handle_iter_type);
    return 0;
}

static int kernels_clear(PyObject *module) {
    kernels_state *st = get_kernels_state(module);
    Py_CLEAR(st->str_call_soon);
    Py_CLEAR(st->context_kwnames);
    Py_CLEAR(st->tuple_new);
    Py_CLEAR(st->invalid_state_error);
    Py_CLEAR(st->cancelled_error);
    Py_CLEAR(st->record_metadata_type);
    Py_CLEAR(st->batch_outcome_type);
    Py_CLEAR(st->record_handle_type);
    Py_CLEAR(st->handle_iter_type);
    return 0;
}

static void kernels_free(void *module) { kernels_clear((PyObject *)module); }

static int kernels_exec(PyObject *module) {
    if (add_handle_types(module) < 0 || add_append_kernel(module) < 0 || add_column_kernels(module) < 0 ||
        add_lane_kernel(module) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot kernels_slots[] = {
    {Py_mod_exec, kernels_exec},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aioproducer._speedups._kernels",
    .m_doc = "Compiled twins of the producer's per-record kernels.",
    .m_size = sizeof(kernels_state),
    .m_methods = methods,
    .m_slots = kernels_slots,
    .m_traverse = kernels_traverse,
    .m_clear = kernels_clear,
    .m_free = kernels_free,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModuleDef_Init(&module); }
