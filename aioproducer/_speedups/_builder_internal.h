/* What the compiled RecordBatchBuilder's sources share (_builder.c, _builder_run.c,
 * _builder_io.c): the object's layout and the helpers that read its inputs.
 * Nothing here is for the other kernels: they use _builder.h. */
#ifndef AIOPRODUCER_BUILDER_INTERNAL_H
#define AIOPRODUCER_BUILDER_INTERNAL_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_builder.h"

#define BATCH_HEADER_SIZE 61 /* records.RECORD_BATCH_OVERHEAD */
/* Past any length a buffer can have: keeps every size sum below Py_ssize_t's range. */
#define MAX_PART (PY_SSIZE_T_MAX / 8)

/* The builder owns its bytes: a buffer nothing else can reach, so no code but
 * its own resizes or reads it, whatever a caller's objects do meanwhile. */
typedef struct {
    PyObject_HEAD
    char *buf;                /* room for the batch header, then the records; NULL once built */
    Py_ssize_t len;           /* bytes in the batch: size_in_bytes */
    Py_ssize_t cap;           /* bytes allocated */
    Py_ssize_t batch_size;    /* batch_size, clamped to [0, PY_SSIZE_T_MAX / 4] */
    Py_ssize_t count;         /* record_count */
    long long base_ts;        /* base_timestamp (-1 before the first record) */
    long long max_ts;         /* max_timestamp (likewise) */
    uint64_t gen;             /* counts changes: every record appended, and the seal */
    int sealed;
    int running;              /* an append_run is under way (its records past len) */
    int transactional;
    int codec_id;
    PyObject *codec;          /* a Codec member */
    PyObject *batch_size_obj; /* batch_size as given, an int */
    PyObject *level;          /* compression_level: None or an int */
    PyObject *payload;        /* the compressed records section, once built */
    PyObject *built;          /* the last uncompressed batch built */
    long long built_state[3]; /* its producer id, epoch and base sequence */
} Builder;

/* A growing byte string on the C heap, with room for a few headers inline. */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
    char local[128];
} scratch;

static inline void scratch_init(scratch *s) {
    s->p = s->local;
    s->len = 0;
    s->cap = (Py_ssize_t)sizeof s->local;
}

static inline void scratch_free(scratch *s) {
    if (s->p != s->local) PyMem_Free(s->p);
    scratch_init(s);
}

int scratch_reserve(scratch *s, Py_ssize_t more);

/* Fills ``out`` (``n`` slots, NULL when not given) from a vectorcall's arguments:
 * at most ``npos`` positionally, the first ``required`` required. 0, or -1 with TypeError. */
int builder_parse_args(const char *fname, const char *const *names, int n, int npos, int required,
                       PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out);

/* builder_span_get()'s answer for None and exact bytes, inline: 1 when read so. */
static inline int span_quick(PyObject *obj, builder_span *span) {
    if (obj == Py_None) {
        span->buf = NULL;
        span->len = -1;
    } else if (PyBytes_CheckExact(obj)) {
        span->buf = PyBytes_AS_STRING(obj);
        span->len = PyBytes_GET_SIZE(obj);
    } else {
        return 0;
    }
    span->held = 0;
    span->copy = NULL;
    return 1;
}

/* The span of one element: TypeError "<what>[<index>] must be bytes-like or None, got <type>",
 * the index as ``index_obj`` (str() of it) or, when that is NULL, ``index``. */
int builder_span_at(PyObject *obj, builder_span *span, const char *what, Py_ssize_t index,
                    PyObject *index_obj);

/* An int argument within [lo, hi]: TypeError "<what> must be an int, got <type>",
 * ValueError "<what> <v> is outside the <range> range". 0 or -1. */
int builder_int_arg(PyObject *obj, const char *what, long long lo, long long hi,
                    const char *range, long long *out);

/* A length of has_room_for: None -> -1 (a null key or value); TypeError unless
 * an int; values past ``cap`` are answered as ``cap``. */
int builder_length_arg(PyObject *obj, const char *what, Py_ssize_t cap, Py_ssize_t *out);

/* The encoded header section (count and pairs) of ``headers``, an iterable of
 * (name, value) pairs, appended to ``out``: 0 or -1. Reads a snapshot (a tuple
 * of the pairs, each pair a tuple) that the caller's code cannot change. */
int builder_encode_headers(PyObject *headers, scratch *out);

/* ValueError for a timestamp outside int64 (``ts_obj`` printed as an int). */
void builder_timestamp_range_error(PyObject *ts_obj);
/* ValueError for a timestamp whose delta from the base does not fit in int64. */
void builder_delta_range_error(long long ts, long long base);

/* The methods defined in _builder_run.c. */
PyObject *builder_append_run(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);
PyObject *builder_has_room_for(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);
/* Makes room for ``need`` bytes (growing by doubling toward ``limit``, or to
 * ``hint`` at once when that is more): 0, or -1 with MemoryError. */
int builder_reserve(Builder *self, Py_ssize_t need, Py_ssize_t hint, Py_ssize_t limit);

static const char BUILDER_SEALED[] = "cannot append to a record batch after build()";

#include "_varint.h"

/* A record's size after its length prefix: attributes, deltas, key, value, headers. */
static inline Py_ssize_t record_body_size(uint64_t ts_zz, uint64_t off_zz, Py_ssize_t klen,
                                          Py_ssize_t vlen, Py_ssize_t hlen) {
    return 1 + uvarint_size(ts_zz) + uvarint_size(off_zz) +
           (klen < 0 ? 1 : uvarint_size(zigzag64(klen)) + klen) +
           (vlen < 0 ? 1 : uvarint_size(zigzag64(vlen)) + vlen) + hlen;
}

/* Writes a record of ``body`` bytes at ``p`` (a length prefix first); returns its end. */
static inline char *write_record(char *p, Py_ssize_t body, uint64_t ts_zz, uint64_t off_zz,
                                 const char *kbuf, Py_ssize_t klen, const char *vbuf,
                                 Py_ssize_t vlen, const char *hdr, Py_ssize_t hlen) {
    p = put_uvarint(p, zigzag64(body));
    *p++ = 0; /* attributes: always 0 in a producer's record */
    p = put_uvarint(p, ts_zz);
    p = put_uvarint(p, off_zz);
    if (klen < 0) {
        *p++ = 1; /* zigzag(-1): null */
    } else {
        p = put_uvarint(p, zigzag64(klen));
        if (klen) memcpy(p, kbuf, klen); /* an empty buffer may be NULL */
        p += klen;
    }
    if (vlen < 0) {
        *p++ = 1;
    } else {
        p = put_uvarint(p, zigzag64(vlen));
        if (vlen) memcpy(p, vbuf, vlen);
        p += vlen;
    }
    if (hdr) {
        memcpy(p, hdr, hlen); /* never empty: it starts with the header count */
        p += hlen;
    } else {
        *p++ = 0; /* no headers */
    }
    return p;
}

#endif
