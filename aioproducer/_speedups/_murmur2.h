/* Kafka's murmur2 (seed 0x9747b28c), shared by the murmur2 kernel (_kernels.c)
 * and the keyed lane (_lane.c); the reference is partitioner._murmur2_pure. */
#ifndef AIOPRODUCER_MURMUR2_H
#define AIOPRODUCER_MURMUR2_H

#include <Python.h>
#include <stdint.h>

/* Kafka's murmur2 of ``len`` bytes, as a signed 32-bit int. */
static inline int murmur2_buffer(const unsigned char *data, Py_ssize_t len) {
    const uint32_t m = 0x5BD1E995u;
    uint32_t length = (uint32_t)len;
    uint32_t h = 0x9747B28Cu ^ length;
    Py_ssize_t tail = len & ~(Py_ssize_t)3;
    for (Py_ssize_t i = 0; i < tail; i += 4) {
        uint32_t k = (uint32_t)data[i] | ((uint32_t)data[i + 1] << 8) |
                     ((uint32_t)data[i + 2] << 16) | ((uint32_t)data[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
    }
    switch (len & 3) {
    case 3: h ^= (uint32_t)data[tail + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)data[tail + 1] << 8;  /* fall through */
    case 1: h ^= (uint32_t)data[tail]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}


#endif
