/* The compiled RecordBatchBuilder's C-level surface, for the kernels that append
 * to a batch without a method call (_batch_core.c). Defined in _builder.c.
 *
 * A record goes in in two steps, so that a caller can make everything else it
 * changes first and still leave nothing half done: builder_plan() checks the
 * builder and the timestamp, sizes the record and reserves its room (after it,
 * writing the record cannot fail); builder_commit() writes it. Anything that
 * runs Python code in between (an allocation can start the cyclic collector,
 * whose finalizers may append to the same builder) is caught: the commit then
 * refuses with RuntimeError and the caller undoes its own changes. */
#ifndef AIOPRODUCER_BUILDER_H
#define AIOPRODUCER_BUILDER_H

#include <Python.h>
#include <stdint.h>

/* A key's or value's bytes (C order), read once: ``len`` -1 is None. Holds the
 * object's buffer export (or a contiguous copy of a strided buffer) until
 * builder_span_release(); the object itself must outlive the span. */
typedef struct {
    const char *buf;
    Py_ssize_t len;
    Py_buffer view;
    PyObject *copy;
    int held;
} builder_span;

/* What builder_plan() decided: where the record goes and how it is encoded. */
typedef struct {
    uint64_t gen;       /* the builder's change counter when planned */
    Py_ssize_t offset;  /* its buffer's length then: where the record starts */
    Py_ssize_t total;   /* the record's size, its length prefix included */
    Py_ssize_t body;    /* the record's size after the length prefix */
    Py_ssize_t count;   /* its offset delta */
    uint64_t ts_zz;     /* its timestamp delta, zigzag encoded */
    long long ts;
} record_plan;

/* Reads ``obj`` (None or bytes-like) into ``span``: 0, or -1 with TypeError
 * "<what> must be bytes-like or None, got <type>" (or the buffer's own error).
 * May run Python code (a __buffer__ of 3.12+). */
int builder_span_get(PyObject *obj, builder_span *span, const char *what);
void builder_span_release(builder_span *span);

/* RuntimeError unless ``builder`` (a compiled builder) takes records: 0 or -1. */
int builder_check_open(PyObject *builder);

/* timestamp_ms as RecordBatchBuilder.append reads it: TypeError unless an int
 * (no Python code runs: an int subclass is read as its value). ``*overflow``
 * says it is outside int64 (builder_plan() then raises ValueError). */
int builder_timestamp(PyObject *obj, long long *ts, int *overflow);

/* Plans a record without headers: -1 with an error (sealed, timestamp out of
 * range, no memory), 0 refused (no room: the builder is unchanged), 1 planned.
 * ``ts_obj`` is the timestamp as given (for the error message). Runs no Python code. */
int builder_plan(PyObject *builder, PyObject *ts_obj, long long ts, int overflow,
                 Py_ssize_t klen, Py_ssize_t vlen, record_plan *plan);

/* Writes the planned record: 0, or -1 with RuntimeError when the builder changed
 * since the plan (nothing written). Runs no Python code. */
int builder_commit(PyObject *builder, const record_plan *plan, const builder_span *key,
                   const builder_span *value);

/* The builder's size in bytes (the 61-byte header included). */
Py_ssize_t builder_size(PyObject *builder);

/* Adds the RecordBatchBuilder type to the module and its state: 0 or -1. */
int add_builder_type(PyObject *module);

#endif
