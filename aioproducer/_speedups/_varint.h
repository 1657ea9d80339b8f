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

/* _layout.c: adds a module-level function to the module. */
int add_module_function(PyObject *module, PyMethodDef *def);
/* _layout.c: milliseconds since the epoch now (time.time_ns() // 1_000_000). */
int now_ms(long long *out);
/* _columns.c: the bulk column kernels (byte_lengths, reservations, fill_counting). */
int add_column_kernels(PyObject *module);

#endif
