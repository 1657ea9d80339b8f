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

/* Resize a batch's buffer ``buf`` to ``size`` bytes, as PyByteArray_Resize.
 * Where that needs more memory than it holds, twice the current length (at
 * most ``cap``, the batch size) is reserved first: a bytearray grows by an
 * eighth only, so a batch filled one record at a time would be copied some 40
 * times on its way to 16 KiB, 9 times this way. (Growing within its memory,
 * and the shrink back to ``size`` here, are quick: no copy.) */
static inline int resize_growing(PyObject *buf, Py_ssize_t size, Py_ssize_t cap) {
    Py_ssize_t now = PyByteArray_GET_SIZE(buf);
    if (size >= ((PyByteArrayObject *)buf)->ob_alloc && now * 2 > size && size < cap) {
        /* Only a reservation: if it fails, the exact size below decides. */
        if (PyByteArray_Resize(buf, now * 2 < cap ? now * 2 : cap) < 0) PyErr_Clear();
    }
    return PyByteArray_Resize(buf, size);
}

/* Defined in _append.c: slot offsets of a class with __slots__, for the binders. */
Py_ssize_t slot_offset(PyTypeObject *type, const char *name, int writable);
int slot_offsets(PyTypeObject *type, const char *const *names, int n, Py_ssize_t *out);
/* Defined in _append.c: adds a module-level function (a binder) to the module. */
int add_module_function(PyObject *module, PyMethodDef *def);
/* Defined in _append.c: adds bind_batch_layout (append_unkeyed, append_keyed) to the module. */
int add_append_kernel(PyObject *module);
/* Defined in _append.c: batch.append_unkeyed(now, value, reserve, bound, produced, topic,
 * limit) as a code: 0 refused, 1 appended, 2 appended and the sticky turn is over, -1
 * an error; the record's handle in *handle when appended. For a batch not of exactly
 * the bound class, the method's answer (a new reference) is left in *answer for the
 * caller to compare with SWITCH once it has charged the pool, as the pure lane does;
 * the code is then 1. */
int call_append_unkeyed(PyObject *batch, PyObject *value, Py_ssize_t reserve, Py_ssize_t bound,
                        PyObject *produced, PyObject *topic, PyObject *limit_obj,
                        PyObject **answer, PyObject **handle);
/* Defined in _append.c: batch.append_keyed(now, key, value, reserve, bound) as 1
 * (appended), 5 (and full), 0 (refused) or -1 (an error), -2 when the answer could not
 * be read (the record may be appended); the handle as above. */
int call_append_keyed(PyObject *batch, PyObject *key, PyObject *value, Py_ssize_t reserve,
                      Py_ssize_t bound, PyObject **handle);
/* Defined in _append.c: milliseconds since the epoch now (time.time_ns() // 1_000_000). */
int now_ms(long long *out);
/* _lane.c: adds bind_lane_layout (the unkeyed shortcut of enqueue). */
int add_lane_kernel(PyObject *module);
/* _columns.c: the bulk column kernels (byte_lengths, reservations, fill_counting). */
int add_column_kernels(PyObject *module);

#endif
