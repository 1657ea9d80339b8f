/* Compiled twins of the producer's per-record kernels.
 *
 * Each function here computes exactly what its pure-Python reference computes
 * (tests/unit/test_kernels_equal.py checks byte equality on random input):
 *
 *   murmur2            aioproducer.engine.partitioner._murmur2_pure
 *   headers_bytes      aioproducer.protocol.records._headers_bytes_pure
 *   encode_record      the encoding half of RecordBatchBuilder._append_pure
 *   encode_run         the per-record loops of RecordBatchBuilder.append_run
 *   resolve_futures    the set_result loop of ProducerBatch._resolve_from
 *   append_unkeyed     ProducerBatch._append_unkeyed_pure (in _append.c)
 *   UnkeyedLane.append UnkeyedLane._append_pure (in _lane.c; KeyedLane.append likewise)
 *   EnqueueShortcut.take  EnqueueShortcut._take_pure (in _lane.c)
 *   future_factory     functools.partial(asyncio.Future, loop=loop)
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

#include "_handle.h"
#include "_murmur2.h"
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

/* ---- completing futures ------------------------------------------------ */

static inline PyObject *item(PyObject *seq, Py_ssize_t i) {
    if (PyList_CheckExact(seq)) {
        if (i < 0 || i >= PyList_GET_SIZE(seq)) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            return NULL;
        }
        PyObject *o = PyList_GET_ITEM(seq, i);
        Py_INCREF(o);
        return o;
    }
    return PySequence_GetItem(seq, i);
}

/* The tp_dealloc of every class made by a class statement (CPython's
 * subtype_dealloc), read off a probe class when the module is made: one C
 * function for the whole process, whichever interpreter reads it. */
static destructor python_class_dealloc = NULL;

static int find_python_class_dealloc(void) {
    PyObject *probe = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O){}", "_probe",
                                            (PyObject *)&PyTuple_Type);
    if (!probe) return -1;
    python_class_dealloc = ((PyTypeObject *)probe)->tp_dealloc;
    Py_DECREF(probe);
    return 0;
}

/* Whether ``tp_alloc(type, 6)`` and six PyTuple_SET_ITEMs make what
 * ``tuple.__new__(type, items)`` makes: every class from ``type`` down to
 * tuple is a Python class (subtype_dealloc) with tuple's item layout. A struct
 * sequence (time.struct_time, os.stat_result) has hidden fields its dealloc
 * reads past the six items; a C subclass may have any layout: those go
 * through tuple.__new__, as in the pure twin. */
static int plain_tuple_class(PyTypeObject *type) {
    for (PyTypeObject *t = type; t != &PyTuple_Type; t = t->tp_base) {
        if (!t || !(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || t->tp_dealloc != python_class_dealloc ||
            t->tp_itemsize != PyTuple_Type.tp_itemsize)
            return 0;
    }
    return 1;
}

/* base + delta as a Python int, exactly (past the int64 range too). */
static PyObject *offset_of(PyObject *base_obj, long long base, PyObject *delta_obj, long long delta) {
    long long sum;
    if (base_obj == NULL && delta_obj == NULL && !__builtin_add_overflow(base, delta, &sum))
        return PyLong_FromLongLong(sum);
    PyObject *b = base_obj ? Py_NewRef(base_obj) : PyLong_FromLongLong(base);
    PyObject *d = delta_obj ? Py_NewRef(delta_obj) : PyLong_FromLongLong(delta);
    PyObject *r = b && d ? PyNumber_Add(b, d) : NULL;
    Py_XDECREF(b);
    Py_XDECREF(d);
    return r;
}

/* ``(packed >> 32) - 1`` (high) or ``(packed & 0xFFFFFFFF) - 1``, with Python's operators. */
static PyObject *unpack_size(PyObject *packed, int high) {
    PyObject *operand = high ? PyLong_FromLong(32) : PyLong_FromUnsignedLong(0xFFFFFFFFul);
    PyObject *one = PyLong_FromLong(1);
    PyObject *part = NULL, *r = NULL;
    if (operand && one) part = high ? PyNumber_Rshift(packed, operand) : PyNumber_And(packed, operand);
    if (part) r = PyNumber_Subtract(part, one);
    Py_XDECREF(operand);
    Py_XDECREF(one);
    Py_XDECREF(part);
    return r;
}

/* resolve_futures(futures, start, stop, metadata_type, topic, partition, base_offset,
 *                 deltas, log_append_time_ms, timestamps, sizes, invalid_state) -> None
 *
 * For each record j in [start, stop): futures[j].set_result(tuple.__new__(metadata_type,
 * (topic, partition, offset, timestamp, key_size, value_size))) where offset is -1 when
 * base_offset < 0 (acks=0), else base_offset + (deltas[j] if deltas is not None
 * else j), deltas indexed like futures, computed as Python ints (no int64 wrap);
 * timestamp is log_append_time_ms when >= 0, else timestamps[j]; the sizes
 * are unpacked from sizes[j] (see batch.pack_sizes). A future whose set_result
 * raises ``invalid_state`` (an exception type or a tuple of them) is skipped:
 * batch.py passes InvalidStateError (its caller cancelled it) and RuntimeError
 * (its loop is closed and it had callbacks to schedule; it is set all the same).
 * Every object read from a sequence is held (owned) while used: a list
 * subclass's __getitem__, an int's __index__ or a set_result may run code that
 * changes the sequences, which are read again, with bounds checks, per record. */
static PyObject *k_resolve_futures(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    kernels_state *st = get_kernels_state(module);
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "resolve_futures takes 12 arguments");
        return NULL;
    }
    PyObject *futures = args[0];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    if (stop == -1 && PyErr_Occurred()) return NULL;
    PyTypeObject *meta_type = (PyTypeObject *)args[3];
    if (!PyType_Check(args[3]) || !PyType_IsSubtype(meta_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "metadata_type must be a tuple subclass");
        return NULL;
    }
    /* tuple or a plain Python subclass of it (the producer's RecordMetadata
     * NamedTuple): allocated here; anything else through tuple.__new__. */
    int direct = meta_type == &PyTuple_Type || plain_tuple_class(meta_type);
    PyObject *topic = args[4], *partition = args[5];
    /* Outside int64 a Python int still has a sign, and offsets are exact. */
    int overflow;
    long long base_offset = PyLong_AsLongLongAndOverflow(args[6], &overflow);
    if (base_offset == -1 && PyErr_Occurred()) return NULL;
    PyObject *base_obj = NULL;
    if (overflow) {
        base_offset = overflow;
        base_obj = args[6];
    }
    PyObject *deltas = args[7] == Py_None ? NULL : args[7];
    long long log_append = PyLong_AsLongLongAndOverflow(args[8], &overflow);
    if (log_append == -1 && PyErr_Occurred()) return NULL;
    PyObject *timestamps = args[9], *sizes = args[10], *invalid_state = args[11];
    PyObject *log_append_obj = log_append >= 0 || overflow > 0 ? args[8] : NULL;
    int atoms = meta_type->tp_dictoffset == 0 && PyUnicode_CheckExact(topic) &&
                PyLong_CheckExact(partition) &&
                (!log_append_obj || PyLong_CheckExact(log_append_obj));
    for (Py_ssize_t j = start; j < stop; j++) {
        PyObject *fut = item(futures, j);
        if (!fut) return NULL;
        PyObject *offset;
        if (base_offset < 0) {
            offset = PyLong_FromLong(-1);
        } else if (deltas) {
            PyObject *d = item(deltas, j);
            if (!d) { Py_DECREF(fut); return NULL; }
            if (PyLong_CheckExact(d) && PyLong_CheckExact(args[6])) {
                long long dv = PyLong_AsLongLongAndOverflow(d, &overflow);
                offset = offset_of(base_obj, base_offset, overflow ? d : NULL, dv);
            } else {
                /* The pure twin's ``base_offset + d``, whatever their types. */
                offset = PyNumber_Add(args[6], d);
            }
            Py_DECREF(d);
        } else {
            offset = offset_of(base_obj, base_offset, NULL, (long long)j);
        }
        if (!offset) { Py_DECREF(fut); return NULL; }
        PyObject *ts;
        if (log_append_obj) { ts = log_append_obj; Py_INCREF(ts); }
        else ts = item(timestamps, j);
        PyObject *packed = ts ? item(sizes, j) : NULL;
        if (!packed) {
            Py_XDECREF(ts); Py_DECREF(offset); Py_DECREF(fut);
            return NULL;
        }
        PyObject *ksize, *vsize;
        unsigned long long pv = (unsigned long long)-1;
        int fits = 0;
        if (PyLong_CheckExact(packed)) {
            pv = PyLong_AsUnsignedLongLong(packed);
            fits = !(pv == (unsigned long long)-1 && PyErr_Occurred());
            if (!fits) PyErr_Clear(); /* negative or past 64 bits: as Python does it */
        }
        if (fits) {
            ksize = PyLong_FromLongLong((long long)(pv >> 32) - 1);
            vsize = PyLong_FromLongLong((long long)(pv & 0xFFFFFFFFull) - 1);
        } else {
            /* Anything but a packed pair of 32-bit sizes: the pure twin's
             * ``(packed >> 32) - 1, (packed & 0xFFFFFFFF) - 1``, as Python does it. */
            ksize = unpack_size(packed, 1);
            vsize = ksize ? unpack_size(packed, 0) : NULL;
        }
        Py_DECREF(packed);
        PyObject *meta = NULL;
        if (ksize && vsize) {
            if (direct) {
                meta = meta_type->tp_alloc(meta_type, 6);
            } else {
                PyObject *fields = PyTuple_Pack(6, topic, partition, offset, ts, ksize, vsize);
                PyObject *call[2] = {(PyObject *)meta_type, fields};
                meta = fields ? PyObject_Vectorcall(st->tuple_new, call, 2, NULL) : NULL;
                Py_XDECREF(fields);
            }
        }
        if (!meta) {
            Py_XDECREF(ksize); Py_XDECREF(vsize);
            Py_DECREF(ts); Py_DECREF(offset); Py_DECREF(fut);
            return NULL;
        }
        if (direct) {
            Py_INCREF(topic);
            Py_INCREF(partition);
            PyTuple_SET_ITEM(meta, 0, topic);
            PyTuple_SET_ITEM(meta, 1, partition);
            PyTuple_SET_ITEM(meta, 2, offset);
            PyTuple_SET_ITEM(meta, 3, ts);
            PyTuple_SET_ITEM(meta, 4, ksize);
            PyTuple_SET_ITEM(meta, 5, vsize);
            /* Of a str and ints, it can be in no reference cycle: untracked, the
             * cyclic collector never walks it (as it untracks such tuples itself,
             * but only once it has walked them), nor the held records' metadata
             * in every full collection. */
            if (atoms && PyLong_CheckExact(ts) && PyLong_CheckExact(offset)) PyObject_GC_UnTrack(meta);
        } else {
            Py_DECREF(offset); Py_DECREF(ts); Py_DECREF(ksize); Py_DECREF(vsize);
        }
        PyObject *r;
        if (Py_IS_TYPE(fut, (PyTypeObject *)st->future_type)) {
            /* The type's own method, called without looking it up per record. */
            PyObject *call[2] = {fut, meta};
            r = PyObject_Vectorcall(st->future_set_result, call, 2, NULL);
        } else {
            r = PyObject_CallMethodOneArg(fut, st->str_set_result, meta);
        }
        Py_DECREF(meta);
        /* Not the future, though: it keeps its loop, and a done future can
         * still be given attributes or a done callback, so it can close a
         * cycle the collector must see. */
        Py_DECREF(fut);
        if (r) {
            Py_DECREF(r);
        } else if (PyErr_ExceptionMatches(invalid_state)) {
            PyErr_Clear(); /* done all the same; the record is written */
        } else {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* ---- future_factory ----------------------------------------------------- */

/* A callable making ``asyncio.Future(loop=loop)``, as
 * ``functools.partial(asyncio.Future, loop=loop)`` does (the pure reference):
 * the partial copies its keyword dict on every call (so the callee cannot
 * change it); the future's __init__ only reads it, so one dict serves every
 * future. Used for every record's future. It holds the class it makes, so it
 * needs nothing of the module once made. */
typedef struct {
    PyObject_HEAD
    PyObject *future_type; /* asyncio.Future */
    PyObject *kwargs;      /* {"loop": loop} */
    PyObject *empty_args;  /* () */
    vectorcallfunc vectorcall;
} FutureFactory;

static PyObject *factory_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames) {
    FutureFactory *self = (FutureFactory *)op;
    if (PyVectorcall_NARGS(nargsf) || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "future_factory() takes no arguments");
        return NULL;
    }
    return PyObject_Call(self->future_type, self->empty_args, self->kwargs);
}

static int factory_traverse(PyObject *op, visitproc visit, void *arg) {
    FutureFactory *self = (FutureFactory *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->future_type);
    Py_VISIT(self->kwargs);
    return 0;
}

static int factory_clear(PyObject *op) {
    FutureFactory *self = (FutureFactory *)op;
    Py_CLEAR(self->future_type);
    Py_CLEAR(self->kwargs);
    Py_CLEAR(self->empty_args);
    return 0;
}

static void factory_dealloc(PyObject *op) {
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    factory_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMemberDef factory_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FutureFactory, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot factory_slots[] = {
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_traverse, factory_traverse},
    {Py_tp_clear, factory_clear},
    {Py_tp_dealloc, factory_dealloc},
    {Py_tp_members, factory_members},
    {Py_tp_doc, "Makes asyncio.Future(loop=loop) per call (see future_factory)."},
    {0, NULL},
};

static PyType_Spec factory_spec = {
    .name = "aioproducer._speedups._kernels.FutureFactory",
    .basicsize = sizeof(FutureFactory),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = factory_slots,
};

static PyObject *k_future_factory(PyObject *module, PyObject *loop) {
    kernels_state *st = get_kernels_state(module);
    FutureFactory *self = PyObject_GC_New(FutureFactory, st->future_factory_type);
    if (!self) return NULL;
    self->vectorcall = factory_vectorcall;
    self->future_type = Py_NewRef(st->future_type);
    self->empty_args = Py_NewRef(st->empty_args);
    self->kwargs = Py_BuildValue("{sO}", "loop", loop);
    if (!self->kwargs) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyMethodDef methods[] = {
    {"murmur2", k_murmur2, METH_O, "Kafka's murmur2 (seed 0x9747b28c) as a signed 32-bit int."},
    {"headers_bytes", k_headers_bytes, METH_O, "A record's header count and headers, encoded."},
    {"encode_record", (PyCFunction)(void (*)(void))k_encode_record, METH_FASTCALL,
     "encode_record(buf, batch_size, count, timestamp_delta, key, value, headers) -> size or -1"},
    {"encode_run", (PyCFunction)(void (*)(void))k_encode_run, METH_FASTCALL,
     "encode_run(buf, room, count, fixed, hdr, values, keys, order, start, stop) -> new record count"},
    {"future_factory", k_future_factory, METH_O,
     "future_factory(loop) -> a callable making asyncio.Future(loop=loop)."},
    {"resolve_futures", (PyCFunction)(void (*)(void))k_resolve_futures, METH_FASTCALL,
     "resolve_futures(futures, start, stop, metadata_type, topic, partition, base_offset, "
     "deltas, log_append_time_ms, timestamps, sizes, invalid_state) -> None"},
    {NULL, NULL, 0, NULL},
};

/* ---- the module: multi-phase initialisation (PEP 489), its state per module (PEP 573) ---- */

static int kernels_traverse(PyObject *module, visitproc visit, void *arg) {
    kernels_state *st = get_kernels_state(module);
    Py_VISIT(st->str_set_result);
    Py_VISIT(st->future_type);
    Py_VISIT(st->future_set_result);
    Py_VISIT(st->empty_args);
    Py_VISIT(st->future_factory_type);
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
    Py_CLEAR(st->str_set_result);
    Py_CLEAR(st->future_type);
    Py_CLEAR(st->future_set_result);
    Py_CLEAR(st->empty_args);
    Py_CLEAR(st->future_factory_type);
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
    kernels_state *st = get_kernels_state(module);
    st->str_set_result = PyUnicode_InternFromString("set_result");
    if (!st->str_set_result) return -1;
    /* asyncio.Future by its public name: the C class where asyncio has it,
     * the Python class otherwise; either way what loop.create_future makes. */
    PyObject *aio = PyImport_ImportModule("asyncio");
    if (!aio) return -1;
    st->future_type = PyObject_GetAttrString(aio, "Future");
    Py_DECREF(aio);
    if (!st->future_type) return -1;
    if (!PyType_Check(st->future_type)) {
        PyErr_SetString(PyExc_TypeError, "asyncio.Future is not a class");
        return -1;
    }
    st->future_set_result = PyObject_GetAttr(st->future_type, st->str_set_result);
    if (!st->future_set_result) return -1;
    st->empty_args = PyTuple_New(0);
    if (!st->empty_args) return -1;
    st->future_factory_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &factory_spec, NULL);
    if (!st->future_factory_type) return -1;
    if (!python_class_dealloc && find_python_class_dealloc() < 0) return -1;
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
