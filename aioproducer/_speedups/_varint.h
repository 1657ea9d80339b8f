/* Zigzag varints of message format v2 (KIP-98), shared by the kernels' sources. */
#ifndef AIOPRODUCER_VARINT_H
#define AIOPRODUCER_VARINT_H

#include <Python.h>
#include <stdint.h>

/* A builder's buffer starts with the 61 bytes of the batch header (written in
 * place by RecordBatchBuilder.build), so its length is the batch's size. */

static inline Py_ssize_t uvarint_size(uint64_t v) {
    Py_ssize_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

static inline char *put_uvarint(char *p, uint64_t v) {
    while (v >= 0x80) { *p++ = (char)((v & 0x7F) | 0x80); v >>= 7; }
    *p++ = (char)v;
    return p;
}

static inline uint64_t zigzag64(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* Defined in _append.c: adds append_unkeyed and bind_batch_layout to the module. */
int add_append_kernel(PyObject *module);
/* Defined in _append.c: batch.append_unkeyed(*args), 8 arguments (see there). */
int call_append_unkeyed(PyObject *batch, PyObject *value, PyObject *future, Py_ssize_t reserve,
                        Py_ssize_t bound, PyObject *produced, PyObject *topic, PyObject *limit_obj,
                        PyObject *switch_code);
/* _lane.c: adds bind_lane_layout (the unkeyed shortcut of enqueue). */
int add_lane_kernel(PyObject *module);
int add_sensor_kernel(PyObject *module);
/* _columns.c: the bulk column kernels (byte_lengths, reservations, fill_counting). */
int add_column_kernels(PyObject *module);

#endif
