/* RecordBatchBuilder, compiled: one v2 record batch (KIP-98) filled record by record.
 *
 * The readable reference is RecordBatchBuilderPy (aioproducer/protocol/records.py):
 * the same bytes, answers, attributes and errors (tests/unit/test_builder_differential.py
 * compares them on random and hostile input). aioproducer.protocol.records exports
 * this class as RecordBatchBuilder when the kernels are built.
 *
 * The builder owns its buffer (the 61 bytes of the batch header, then the records):
 * no Python object refers to it, so the caller's objects cannot resize or read it
 * while a record is written. Every input is read first (a key's or value's buffer,
 * headers, a run's sequences: any of which may run the caller's code, even
 * re-entering this builder); the builder's own state is read after, and between
 * that read and the write nothing runs Python code. A run (append_run, in
 * _builder_run.c) checks after each record's inputs that the builder did not
 * change meanwhile, and refuses the whole run if it did.
 *
 * build() returns a new bytes object: the uncompressed batch is copied out once
 * (and the buffer freed: an in-flight batch is held once, not twice); a compressed
 * one is compressed once by aioproducer.protocol.compression.compress. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <string.h>

#include "_builder_internal.h"
#include "_crc32c.h"
#include "_state.h"

#define INITIAL_CAPACITY 256
#define TRANSACTIONAL_BIT 0x10

/* ---- the C-level surface (_builder.h) ------------------------------------ */

int builder_reserve(Builder *self, Py_ssize_t need, Py_ssize_t hint, Py_ssize_t limit) {
    if (need <= self->cap) return 0;
    /* Twice the room (a bytearray grows by an eighth: 40 copies on the way to
     * 16 KiB, 7 this way), never past the batch's end unless the record is. */
    Py_ssize_t want = self->cap < limit / 2 ? self->cap * 2 : limit;
    if (hint > want) want = hint;
    if (need > want) want = need;
    char *p = PyMem_Realloc(self->buf, want);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    self->buf = p;
    self->cap = want;
    return 0;
}

static int sealed_error(void) {
    PyErr_SetString(PyExc_RuntimeError, BUILDER_SEALED);
    return -1;
}

/* Checks a record against the builder and reserves its room: see builder_plan(). */
static int plan_record(Builder *self, PyObject *ts_obj, long long ts, int overflow, Py_ssize_t klen,
                       Py_ssize_t vlen, Py_ssize_t hlen, record_plan *plan) {
    if (self->sealed) return sealed_error();
    if (overflow) {
        builder_timestamp_range_error(ts_obj);
        return -1;
    }
    Py_ssize_t count = self->count;
    uint64_t ts_zz = 0;
    if (count) {
        long long delta;
        if (__builtin_sub_overflow(ts, self->base_ts, &delta)) {
            builder_delta_range_error(ts, self->base_ts);
            return -1;
        }
        ts_zz = zigzag64(delta);
    }
    if (klen > MAX_PART || vlen > MAX_PART || hlen > MAX_PART) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t body = record_body_size(ts_zz, zigzag64(count), klen, vlen, hlen);
    Py_ssize_t total = uvarint_size(zigzag64(body)) + body;
    /* The first record always fits (Java's hasRoomFor); the others within batch_size. */
    if (count && total > self->batch_size - self->len) return 0;
    if (builder_reserve(self, self->len + total, 0, self->batch_size) < 0) return -1;
    plan->gen = self->gen;
    plan->offset = self->len;
    plan->total = total;
    plan->body = body;
    plan->count = count;
    plan->ts_zz = ts_zz;
    plan->ts = ts;
    return 1;
}

static void write_planned(Builder *self, const record_plan *plan, const builder_span *key,
                          const builder_span *value, const char *hdr, Py_ssize_t hlen) {
    write_record(self->buf + plan->offset, plan->body, plan->ts_zz, zigzag64(plan->count), key->buf,
                 key->len, value->buf, value->len, hdr, hlen);
    self->len = plan->offset + plan->total;
    if (!plan->count) self->base_ts = self->max_ts = plan->ts;
    else if (plan->ts > self->max_ts) self->max_ts = plan->ts;
    self->count = plan->count + 1;
    self->gen++;
}

int builder_check_open(PyObject *builder) {
    return ((Builder *)builder)->sealed ? sealed_error() : 0;
}

int builder_plan(PyObject *builder, PyObject *ts_obj, long long ts, int overflow, Py_ssize_t klen,
                 Py_ssize_t vlen, record_plan *plan) {
    return plan_record((Builder *)builder, ts_obj, ts, overflow, klen, vlen, 1, plan);
}

int builder_commit(PyObject *builder, const record_plan *plan, const builder_span *key,
                   const builder_span *value) {
    Builder *self = (Builder *)builder;
    if (self->gen != plan->gen || self->sealed || self->len != plan->offset) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the record batch changed while a record was appended to it");
        return -1;
    }
    write_planned(self, plan, key, value, NULL, 1);
    return 0;
}

Py_ssize_t builder_size(PyObject *builder) { return ((Builder *)builder)->len; }

/* ---- append ---------------------------------------------------------------- */

static const char *const append_names[] = {"timestamp_ms", "key", "value", "headers"};

static PyObject *builder_append(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    Builder *self = (Builder *)op;
    PyObject *a[4];
    if (!kwnames && (nargs == 3 || nargs == 4)) {
        a[0] = args[0];
        a[1] = args[1];
        a[2] = args[2];
        a[3] = nargs == 4 ? args[3] : NULL;
    } else if (builder_parse_args("append", append_names, 4, 4, 3, args, nargs, kwnames, a) < 0) {
        return NULL;
    }
    if (self->sealed) return sealed_error(), NULL;
    long long ts;
    int overflow;
    if (builder_timestamp(a[0], &ts, &overflow) < 0) return NULL;
    builder_span key, value;
    if (!span_quick(a[1], &key) && builder_span_get(a[1], &key, "key") < 0) return NULL;
    if (!span_quick(a[2], &value) && builder_span_get(a[2], &value, "value") < 0) {
        builder_span_release(&key);
        return NULL;
    }
    PyObject *result = NULL;
    scratch hdr;
    scratch_init(&hdr);
    int has_headers = a[3] && a[3] != Py_None;
    if (has_headers && builder_encode_headers(a[3], &hdr) < 0) goto done;
    /* Whatever ran above (buffers' and headers' code) is done: the state is read now. */
    record_plan plan;
    int rc = plan_record(self, a[0], ts, overflow, key.len, value.len, has_headers ? hdr.len : 1,
                         &plan);
    if (rc < 0) goto done;
    if (rc == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    write_planned(self, &plan, &key, &value, has_headers ? hdr.p : NULL, hdr.len);
    result = PyLong_FromSsize_t(plan.count);
done:
    scratch_free(&hdr);
    builder_span_release(&value);
    builder_span_release(&key);
    return result;
}

/* ---- build ------------------------------------------------------------------ */

static inline char *put_be(char *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--) p[i] = (char)(v >> (8 * (n - 1 - i)));
    return p + n;
}

/* The 61-byte header at ``p`` of a batch of ``size`` bytes, its CRC computed last. */
static void finish_batch(Builder *self, char *p, Py_ssize_t size, int attributes,
                         const long long state[3]) {
    char *q = put_be(p, 0, 8);                              /* baseOffset: the broker's */
    q = put_be(q, (uint64_t)(size - 12), 4);                /* batchLength */
    q = put_be(q, (uint64_t)-1, 4);                         /* partitionLeaderEpoch */
    *q++ = 2;                                               /* magic */
    q += 4;                                                 /* crc, below */
    q = put_be(q, (uint64_t)attributes, 2);
    q = put_be(q, (uint64_t)(self->count - 1), 4);          /* lastOffsetDelta */
    q = put_be(q, (uint64_t)self->base_ts, 8);
    q = put_be(q, (uint64_t)self->max_ts, 8);
    q = put_be(q, (uint64_t)state[0], 8);                   /* producerId */
    q = put_be(q, (uint64_t)state[1], 2);                   /* producerEpoch */
    q = put_be(q, (uint64_t)state[2], 4);                   /* baseSequence */
    put_be(q, (uint64_t)self->count, 4);                    /* recordsCount */
    put_be(p + 17, crc32c(p + 21, (size_t)(size - 21)), 4); /* of attributes onwards */
}

static int check_batch_length(Py_ssize_t size);

static PyObject *build_plain(Builder *self, int attributes, const long long state[3]) {
    if (check_batch_length(self->len) < 0) return NULL;
    if (self->built && !memcmp(self->built_state, state, sizeof self->built_state))
        return Py_NewRef(self->built);
    /* The records from the buffer, or (a rebuild with other producer state) from the last build. */
    const char *records = self->buf ? self->buf : PyBytes_AS_STRING(self->built);
    PyObject *out = PyBytes_FromStringAndSize(NULL, self->len);
    if (!out) return NULL;
    memcpy(PyBytes_AS_STRING(out), records, self->len);
    finish_batch(self, PyBytes_AS_STRING(out), self->len, attributes, state);
    Py_XSETREF(self->built, Py_NewRef(out));
    memcpy(self->built_state, state, sizeof self->built_state);
    PyMem_Free(self->buf); /* sealed: nothing reads it again */
    self->buf = NULL;
    self->cap = 0;
    return out;
}

static PyObject *build_compressed(Builder *self, int attributes, const long long state[3]) {
    if (!self->payload) {
        kernels_state *st = PyType_GetModuleState(Py_TYPE(self));
        if (!st) return NULL;
        /* A copy of the records: compress() may run in a worker thread, without the GIL. */
        PyObject *records = PyBytes_FromStringAndSize(self->buf + BATCH_HEADER_SIZE,
                                                      self->len - BATCH_HEADER_SIZE);
        if (!records) return NULL;
        PyObject *codec = Py_NewRef(self->codec), *level = Py_NewRef(self->level);
        PyObject *call[3] = {codec, records, level};
        PyObject *payload = PyObject_Vectorcall(st->compress, call, 3, NULL);
        Py_DECREF(codec);
        Py_DECREF(level);
        Py_DECREF(records);
        if (!payload) return NULL;
        if (self->payload) { /* another thread's build finished first: the same bytes */
            Py_DECREF(payload);
        } else {
            self->payload = payload;
            PyMem_Free(self->buf);
            self->buf = NULL;
            self->cap = 0;
        }
    }
    PyObject *payload = Py_NewRef(self->payload);
    builder_span span;
    PyObject *out = NULL;
    if (builder_span_get(payload, &span, "the compressed records") == 0 && span.len >= 0) {
        Py_ssize_t size = BATCH_HEADER_SIZE + span.len;
        out = check_batch_length(size) < 0 ? NULL : PyBytes_FromStringAndSize(NULL, size);
        if (out) {
            memcpy(PyBytes_AS_STRING(out) + BATCH_HEADER_SIZE, span.buf, span.len);
            finish_batch(self, PyBytes_AS_STRING(out), size, attributes, state);
        }
        builder_span_release(&span);
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_TypeError, "compress() returned None");
    }
    Py_DECREF(payload);
    return out;
}

static const char *const build_names[] = {"producer_id", "producer_epoch", "base_sequence"};

static PyObject *builder_build(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    Builder *self = (Builder *)op;
    PyObject *a[3];
    if (builder_parse_args("build", build_names, 3, 0, 0, args, nargs, kwnames, a) < 0) return NULL;
    long long state[3] = {-1, -1, -1};
    if ((a[0] && builder_int_arg(a[0], "producer_id", LLONG_MIN, LLONG_MAX, "int64", &state[0]) < 0) ||
        (a[1] && builder_int_arg(a[1], "producer_epoch", -32768, 32767, "int16", &state[1]) < 0) ||
        (a[2] && builder_int_arg(a[2], "base_sequence", INT32_MIN, INT32_MAX, "int32", &state[2]) < 0))
        return NULL;
    if (!self->count) {
        PyErr_SetString(PyExc_ValueError, "cannot build an empty record batch");
        return NULL;
    }
    if (!self->sealed) {
        self->sealed = 1;
        self->gen++;
    }
    int attributes = self->codec_id | (self->transactional ? TRANSACTIONAL_BIT : 0);
    return self->codec_id ? build_compressed(self, attributes, state)
                          : build_plain(self, attributes, state);
}

/* batchLength is an int32: a batch past it (a first record of gigabytes) cannot be sent. */
static int check_batch_length(Py_ssize_t size) {
    if (size - 12 <= INT32_MAX) return 0;
    PyErr_Format(PyExc_OverflowError, "a record batch of %zd bytes is more than its length field holds",
                 size);
    return -1;
}

static PyObject *builder_sizeof(PyObject *op, PyObject *unused) {
    return PyLong_FromSsize_t(Py_TYPE(op)->tp_basicsize + ((Builder *)op)->cap);
}

/* ---- attributes, construction ------------------------------------------------ */

static PyObject *get_size_in_bytes(PyObject *op, void *c) { return PyLong_FromSsize_t(((Builder *)op)->len); }
static PyObject *get_is_sealed(PyObject *op, void *c) { return PyBool_FromLong(((Builder *)op)->sealed); }
static PyObject *get_record_count(PyObject *op, void *c) { return PyLong_FromSsize_t(((Builder *)op)->count); }
static PyObject *get_base_timestamp(PyObject *op, void *c) { return PyLong_FromLongLong(((Builder *)op)->base_ts); }
static PyObject *get_max_timestamp(PyObject *op, void *c) { return PyLong_FromLongLong(((Builder *)op)->max_ts); }
static PyObject *get_codec(PyObject *op, void *c) { return Py_NewRef(((Builder *)op)->codec); }
static PyObject *get_batch_size(PyObject *op, void *c) { return Py_NewRef(((Builder *)op)->batch_size_obj); }
static PyObject *get_transactional(PyObject *op, void *c) { return PyBool_FromLong(((Builder *)op)->transactional); }
static PyObject *get_level(PyObject *op, void *c) { return Py_NewRef(((Builder *)op)->level); }

static PyGetSetDef builder_getset[] = {
    {"size_in_bytes", get_size_in_bytes, NULL, "Uncompressed encoded size so far, the 61-byte header included.", NULL},
    {"is_sealed", get_is_sealed, NULL, "True once build() has been called; appends are then refused.", NULL},
    {"record_count", get_record_count, NULL, NULL, NULL},
    {"base_timestamp", get_base_timestamp, NULL, "The first record's timestamp (-1 before it).", NULL},
    {"max_timestamp", get_max_timestamp, NULL, "The largest timestamp appended (-1 before any).", NULL},
    {"codec", get_codec, NULL, NULL, NULL},
    {"batch_size", get_batch_size, NULL, NULL, NULL},
    {"is_transactional", get_transactional, NULL, NULL, NULL},
    {"compression_level", get_level, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef builder_methods[] = {
    {"append", (PyCFunction)(void (*)(void))builder_append, METH_FASTCALL | METH_KEYWORDS,
     "append(timestamp_ms, key, value, headers=None) -> offset delta, or None when full"},
    {"append_run", (PyCFunction)(void (*)(void))builder_append_run, METH_FASTCALL | METH_KEYWORDS,
     "append_run(timestamp_ms, values, start, stop, keys=None, headers=None, order=None, "
     "lengths=None) -> records appended"},
    {"has_room_for", (PyCFunction)(void (*)(void))builder_has_room_for, METH_FASTCALL | METH_KEYWORDS,
     "has_room_for(key_len, value_len, headers=None, timestamp_ms=None) -> bool"},
    {"build", (PyCFunction)(void (*)(void))builder_build, METH_FASTCALL | METH_KEYWORDS,
     "build(*, producer_id=-1, producer_epoch=-1, base_sequence=-1) -> the batch's bytes"},
    {"__sizeof__", builder_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

/* aioproducer.protocol.compression's Codec and compress, looked up on first use
 * (that module imports nothing of the kernels, so this runs once per module). */
static int load_compression(kernels_state *st) {
    PyObject *mod = PyImport_ImportModule("aioproducer.protocol.compression");
    if (!mod) return -1;
    PyObject *codec_type = PyObject_GetAttrString(mod, "Codec");
    PyObject *compress = codec_type ? PyObject_GetAttrString(mod, "compress") : NULL;
    PyObject *none = compress ? PyObject_GetAttrString(codec_type, "NONE") : NULL;
    Py_DECREF(mod);
    if (!none) {
        Py_XDECREF(codec_type);
        Py_XDECREF(compress);
        return -1;
    }
    Py_XSETREF(st->codec_type, codec_type);
    Py_XSETREF(st->compress, compress);
    Py_XSETREF(st->codec_none, none);
    return 0;
}

static PyObject *builder_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"codec", "batch_size", "is_transactional", "compression_level", NULL};
    PyObject *codec = NULL, *batch_size = NULL, *transactional = NULL, *level = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOOO:RecordBatchBuilder", kwlist, &codec,
                                     &batch_size, &transactional, &level))
        return NULL;
    kernels_state *st = PyType_GetModuleState(type);
    if (!st || (!st->codec_type && load_compression(st) < 0)) return NULL;
    /* As the pure twin: a Codec as it is, anything else through Codec(). */
    if (!codec) codec = Py_NewRef(st->codec_none);
    else if (Py_IS_TYPE(codec, (PyTypeObject *)st->codec_type)) Py_INCREF(codec);
    else codec = PyObject_CallOneArg(st->codec_type, codec);
    if (!codec) return NULL;
    long codec_id = PyLong_AsLong(codec); /* an IntEnum member: read, no method runs */
    PyObject *size = NULL;
    int is_transactional = 0;
    if (codec_id == -1 && PyErr_Occurred()) goto fail;
    size = batch_size ? PyNumber_Index(batch_size) : PyLong_FromLong(16384);
    if (!size) goto fail;
    if (transactional && (is_transactional = PyObject_IsTrue(transactional)) < 0) goto fail;
    level = level && level != Py_None ? PyNumber_Index(level) : Py_NewRef(Py_None);
    if (!level) goto fail;
    int overflow;
    long long limit = PyLong_AsLongLongAndOverflow(size, &overflow);
    if (limit == -1 && PyErr_Occurred()) goto fail_level;
    /* A batch of 0 bytes or fewer takes its first record only, as any below 62 does. */
    if (overflow < 0 || limit < 0) limit = 0;
    if (overflow > 0 || limit > PY_SSIZE_T_MAX / 4) limit = PY_SSIZE_T_MAX / 4;
    Builder *self = (Builder *)type->tp_alloc(type, 0);
    if (!self) goto fail_level;
    Py_ssize_t cap = limit < INITIAL_CAPACITY ? INITIAL_CAPACITY / 4 : INITIAL_CAPACITY;
    self->buf = PyMem_Malloc(cap);
    if (!self->buf) {
        Py_DECREF(self);
        PyErr_NoMemory();
        goto fail_level;
    }
    memset(self->buf, 0, BATCH_HEADER_SIZE);
    self->cap = cap;
    self->len = BATCH_HEADER_SIZE;
    self->batch_size = (Py_ssize_t)limit;
    self->base_ts = self->max_ts = -1;
    self->transactional = is_transactional;
    self->codec_id = (int)codec_id;
    self->codec = codec;
    self->batch_size_obj = size;
    self->level = level;
    return (PyObject *)self;
fail_level:
    Py_DECREF(level);
fail:
    Py_XDECREF(size);
    Py_DECREF(codec);
    return NULL;
}

static void builder_dealloc(PyObject *op) {
    Builder *self = (Builder *)op;
    PyTypeObject *type = Py_TYPE(op);
    PyMem_Free(self->buf);
    Py_XDECREF(self->codec);
    Py_XDECREF(self->batch_size_obj);
    Py_XDECREF(self->level);
    Py_XDECREF(self->payload);
    Py_XDECREF(self->built);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyType_Slot builder_slots[] = {
    {Py_tp_new, builder_new},
    {Py_tp_dealloc, builder_dealloc},
    {Py_tp_methods, builder_methods},
    {Py_tp_getset, builder_getset},
    {Py_tp_doc, "RecordBatchBuilder(*, codec=Codec.NONE, batch_size=16384, is_transactional=False, "
                "compression_level=None)\n--\n\nAccumulates records into one v2 record batch "
                "(the compiled twin of records.RecordBatchBuilderPy)."},
    {0, NULL},
};

/* Not subclassable: a builder is exactly this type, which the appends of
 * _batch_core.c call without a method lookup. It holds no object that could refer
 * back to it (ints, bytes, a Codec member): no part in reference cycles. */
static PyType_Spec builder_spec = {
    .name = "aioproducer._speedups._kernels.RecordBatchBuilder",
    .basicsize = sizeof(Builder),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = builder_slots,
};

int add_builder_type(PyObject *module) {
    kernels_state *st = get_kernels_state(module);
    st->builder_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &builder_spec, NULL);
    if (!st->builder_type) return -1;
    return PyModule_AddType(module, st->builder_type);
}
