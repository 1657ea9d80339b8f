/* The compiled RecordBatchBuilder's append_run and has_room_for (see _builder.c).
 *
 * append_run encodes ``values[i]`` (and ``keys[i]``) for i in range(start, stop),
 * or for i in ``order[start:stop]``, while they fit: the bulk path's encoder.
 * Reference: RecordBatchBuilderPy.append_run. Each record's objects are fetched
 * and read (the caller's __getitem__, __index__ and __buffer__ may run, and may
 * even append to this builder) before its bytes are written past the builder's
 * length, in room the builder reserved; the length moves once, at the end, if
 * the builder did not change meanwhile. So a run is all or nothing: on an error,
 * or when the caller's code changed the builder, it appends no record. A run
 * started by the caller's code while another one runs writes its records aside
 * and copies them in when it ends: failing, it leaves the other run's records,
 * written past the length, as they were. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_builder_internal.h"

/* ``seq[index_obj]``, or ``seq[i]`` when index_obj is NULL, as Python indexes it. */
static PyObject *item_at(PyObject *seq, Py_ssize_t i, PyObject *index_obj) {
    int plain = PyList_CheckExact(seq) || PyTuple_CheckExact(seq);
    if (index_obj) {
        if (!plain || !PyLong_CheckExact(index_obj)) return PyObject_GetItem(seq, index_obj);
        i = PyLong_AsSsize_t(index_obj);
        if (i == -1 && PyErr_Occurred()) { /* past Py_ssize_t: the list's own IndexError */
            PyErr_Clear();
            return PyObject_GetItem(seq, index_obj);
        }
    }
    if (plain) {
        int list = PyList_CheckExact(seq);
        Py_ssize_t n = list ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
        if (i < 0) i += n;
        if (i < 0 || i >= n) {
            PyErr_SetString(PyExc_IndexError, list ? "list index out of range" : "tuple index out of range");
            return NULL;
        }
        return Py_NewRef(list ? PyList_GET_ITEM(seq, i) : PyTuple_GET_ITEM(seq, i));
    }
    PyObject *key = PyLong_FromSsize_t(i);
    if (!key) return NULL;
    PyObject *item = PyObject_GetItem(seq, key);
    Py_DECREF(key);
    return item;
}

static const char *const run_names[] = {"timestamp_ms", "values", "start", "stop",
                                        "keys",         "headers", "order", "lengths"};

PyObject *builder_append_run(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
    Builder *self = (Builder *)op;
    PyObject *a[8];
    if (builder_parse_args("append_run", run_names, 8, 8, 4, args, nargs, kwnames, a) < 0) return NULL;
    if (self->sealed) {
        PyErr_SetString(PyExc_RuntimeError, BUILDER_SEALED);
        return NULL;
    }
    long long ts;
    int overflow;
    if (builder_timestamp(a[0], &ts, &overflow) < 0) return NULL;
    Py_ssize_t start = PyNumber_AsSsize_t(a[2], PyExc_OverflowError);
    if (start == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t stop = PyNumber_AsSsize_t(a[3], PyExc_OverflowError);
    if (stop == -1 && PyErr_Occurred()) return NULL;
    /* ``lengths`` (a hint for the pure twin's uniform runs) is not read. */
    PyObject *values = a[1], *keys = a[4] == Py_None ? NULL : a[4];
    PyObject *headers = a[5] == Py_None ? NULL : a[5], *order = a[6] == Py_None ? NULL : a[6];
    PyObject *snap = NULL, *result = NULL;
    int entered = 0, nested = 0;
    scratch hdr, aside;
    scratch_init(&hdr);
    scratch_init(&aside);
    if (headers && builder_encode_headers(headers, &hdr) < 0) goto done;
    Py_ssize_t hlen = headers ? hdr.len : 1;
    Py_ssize_t n = 0; /* len(range(start, stop)), which past Py_ssize_t no run reaches */
    if (stop > start && __builtin_sub_overflow(stop, start, &n)) n = PY_SSIZE_T_MAX;
    if (order) {
        /* ``order[start:stop]`` as Python evaluates it (a slice object, whatever
         * the type), then a tuple only this run holds: nothing the caller's code
         * does changes it. */
        PyObject *lo = PyLong_FromSsize_t(start), *hi = lo ? PyLong_FromSsize_t(stop) : NULL;
        PyObject *slice = hi ? PySlice_New(lo, hi, NULL) : NULL;
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        PyObject *part = slice ? PyObject_GetItem(order, slice) : NULL;
        Py_XDECREF(slice);
        if (!part) goto done;
        snap = PySequence_Tuple(part);
        Py_DECREF(part);
        if (!snap) goto done;
        n = PyTuple_GET_SIZE(snap);
    }
    /* The caller's code (headers, order) has run: the builder's state from here. */
    if (self->sealed) {
        PyErr_SetString(PyExc_RuntimeError, BUILDER_SEALED);
        goto done;
    }
    if (overflow) {
        builder_timestamp_range_error(a[0]);
        goto done;
    }
    Py_ssize_t first = self->count, count = first;
    uint64_t ts_zz = 0;
    if (count) {
        long long delta;
        if (__builtin_sub_overflow(ts, self->base_ts, &delta)) {
            builder_delta_range_error(ts, self->base_ts);
            goto done;
        }
        ts_zz = zigzag64(delta);
    }
    const uint64_t gen = self->gen;
    const Py_ssize_t base_len = self->len;
    /* Inside another run of this builder (its records are past the length): aside. */
    nested = self->running;
    self->running = entered = 1;
    Py_ssize_t used = base_len, room = self->batch_size - base_len;
    const Py_ssize_t end = room > 0 ? base_len + room : base_len; /* the batch's end */
    int stale = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t i = start + j;
        PyObject *index_obj = snap ? Py_NewRef(PyTuple_GET_ITEM(snap, j)) : NULL;
        PyObject *value = item_at(values, i, index_obj);
        PyObject *key = value && keys ? item_at(keys, i, index_obj) : NULL;
        /* Only what a release reads is set: zeroing two Py_buffers per record costs. */
        builder_span kspan, vspan;
        kspan.len = vspan.len = -1;
        kspan.held = vspan.held = 0;
        kspan.copy = vspan.copy = NULL;
        int failed = !value || (keys && !key) ||
                     (keys && !span_quick(key, &kspan) &&
                      builder_span_at(key, &kspan, "keys", i, index_obj) < 0) ||
                     (!span_quick(value, &vspan) &&
                      builder_span_at(value, &vspan, "values", i, index_obj) < 0);
        if (!failed && (kspan.len > MAX_PART || vspan.len > MAX_PART)) {
            PyErr_NoMemory(); /* no batch holds it; the sizes below stay far from overflowing */
            failed = 1;
        }
        int full = 0;
        if (!failed) {
            if (self->gen != gen) stale = 1; /* written past a length that moved: refused below */
            Py_ssize_t body = record_body_size(ts_zz, zigzag64(count), kspan.len, vspan.len, hlen);
            Py_ssize_t size = uvarint_size(zigzag64(body)) + body;
            full = size > room && count; /* the first record of a batch always fits */
            if (!full && !stale) {
                /* The rest of the run, were its records like this one (and a byte
                 * longer: offset deltas grow), within the room: reserved at once. */
                Py_ssize_t left = n - j, hint = room;
                if (left <= room / (size + 1)) hint = (size + 1) * left;
                char *at = NULL;
                if (nested) {
                    if (scratch_reserve(&aside, size) == 0) at = aside.p + aside.len;
                } else if (builder_reserve(self, used + size, used + hint, end) == 0) {
                    at = self->buf + used;
                }
                if (at) {
                    write_record(at, body, ts_zz, zigzag64(count), kspan.buf, kspan.len,
                                 vspan.buf, vspan.len, headers ? hdr.p : NULL, hdr.len);
                    aside.len += nested ? size : 0;
                } else {
                    failed = 1;
                }
            }
            if (!full && !failed) {
                room -= size;
                used += size;
                count++;
            }
        }
        builder_span_release(&vspan);
        builder_span_release(&kspan);
        Py_XDECREF(key);
        Py_XDECREF(value);
        Py_XDECREF(index_obj);
        if (failed) goto done;
        if (full) break;
    }
    /* Released objects (their __del__, a buffer's release) may have run code too. */
    if (stale || self->gen != gen || self->sealed) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the record batch changed while a run was appended to it");
        goto done;
    }
    if (count > first) {
        if (nested) {
            if (builder_reserve(self, used, 0, end) < 0) goto done;
            memcpy(self->buf + base_len, aside.p, aside.len);
        }
        self->len = used;
        if (!first) self->base_ts = self->max_ts = ts;
        else if (ts > self->max_ts) self->max_ts = ts;
        self->count = count;
        self->gen++;
    }
    result = PyLong_FromSsize_t(count - first);
done:
    if (entered) self->running = nested;
    Py_XDECREF(snap);
    scratch_free(&aside);
    scratch_free(&hdr);
    return result;
}

/* ---- has_room_for ------------------------------------------------------------ */

static const char *const room_names[] = {"key_len", "value_len", "headers", "timestamp_ms"};

/* Whether append() would take such a record. Without a timestamp its delta is
 * taken at its widest (10 bytes): the answer errs toward a new batch.
 * Reference: RecordBatchBuilderPy.has_room_for. */
PyObject *builder_has_room_for(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    Builder *self = (Builder *)op;
    PyObject *a[4];
    if (builder_parse_args("has_room_for", room_names, 4, 4, 2, args, nargs, kwnames, a) < 0)
        return NULL;
    /* A length past the batch size answers no as any such length does; capped,
     * the sums below stay far from overflowing. */
    Py_ssize_t klen, vlen, cap = self->batch_size + 1;
    if (builder_length_arg(a[0], "key_len", cap, &klen) < 0 ||
        builder_length_arg(a[1], "value_len", cap, &vlen) < 0)
        return NULL;
    PyObject *headers = a[2] == Py_None ? NULL : a[2], *ts_obj = a[3] == Py_None ? NULL : a[3];
    PyObject *result = NULL;
    scratch hdr;
    scratch_init(&hdr);
    long long ts = 0;
    int overflow = 0;
    if (headers && builder_encode_headers(headers, &hdr) < 0) goto done;
    if (ts_obj && builder_timestamp(ts_obj, &ts, &overflow) < 0) goto done;
    if (self->sealed) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    if (overflow) {
        builder_timestamp_range_error(ts_obj);
        goto done;
    }
    if (!self->count) {
        result = Py_NewRef(Py_True);
        goto done;
    }
    Py_ssize_t ts_size = 10;
    if (ts_obj) {
        long long delta;
        if (__builtin_sub_overflow(ts, self->base_ts, &delta)) {
            builder_delta_range_error(ts, self->base_ts);
            goto done;
        }
        ts_size = uvarint_size(zigzag64(delta));
    }
    Py_ssize_t size = 1 + ts_size + uvarint_size(zigzag64(self->count)) + (headers ? hdr.len : 1) +
                      (klen < 0 ? 1 : uvarint_size(zigzag64(klen)) + klen) +
                      (vlen < 0 ? 1 : uvarint_size(zigzag64(vlen)) + vlen);
    size += uvarint_size(zigzag64(size));
    result = PyBool_FromLong(size <= self->batch_size - self->len);
done:
    scratch_free(&hdr);
    return result;
}
