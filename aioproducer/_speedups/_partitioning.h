/* The compiled twin of aioproducer/engine/partitioner.py: every rule of where a
 * record goes, as the compiled lanes (_lanes.c, _batch_core.c) and the murmur2
 * kernel (_kernels.c) use it. Change a rule there and here together:
 * tests/unit/test_partitioning_twins.py compares both sides (through the
 * kernels' _partition_for_key and _time_to_switch) and with the Java client's
 * values, so a change of one side alone fails. */
#ifndef AIOPRODUCER_PARTITIONING_H
#define AIOPRODUCER_PARTITIONING_H

#include <Python.h>
#include <stdint.h>

/* Kafka's murmur2 (seed 0x9747b28c) of ``len`` bytes, as a signed 32-bit int
 * (Java's Utils.murmur2; partitioner.murmur2 and its murmur2_* steps). */
static inline int32_t murmur2_buffer(const unsigned char *data, Py_ssize_t len) {
    const uint32_t m = 0x5BD1E995u;
    uint32_t length = (uint32_t)len;
    uint32_t h = 0x9747B28Cu ^ length;                       /* murmur2_start */
    Py_ssize_t tail = len & ~(Py_ssize_t)3;
    for (Py_ssize_t i = 0; i < tail; i += 4) {               /* murmur2_word */
        uint32_t k = (uint32_t)data[i] | ((uint32_t)data[i + 1] << 8) |
                     ((uint32_t)data[i + 2] << 16) | ((uint32_t)data[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
    }
    switch (len & 3) {                                       /* murmur2_tail */
    case 3: h ^= (uint32_t)data[tail + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)data[tail + 1] << 8;  /* fall through */
    case 1: h ^= (uint32_t)data[tail]; h *= m;
    }
    h ^= h >> 13;                                            /* murmur2_finish */
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

/* Java's Utils.toPositive(hash) % numPartitions (partitioner.partition_for_hash);
 * num_partitions is in [1, INT32_MAX]. */
static inline int32_t partition_for_hash(int32_t hash, int32_t num_partitions) {
    return (int32_t)(((uint32_t)hash & 0x7FFFFFFFu) % (uint32_t)num_partitions);
}

/* BuiltInPartitioner.partitionForKey (partitioner.partition_for_key). */
static inline int32_t partition_for_key_buffer(const unsigned char *key, Py_ssize_t len,
                                               int32_t num_partitions) {
    return partition_for_hash(murmur2_buffer(key, len), num_partitions);
}

/* a + b > c, exactly (no int64 overflow). */
static inline int sum_exceeds(int64_t a, int64_t b, int64_t c) {
    if (b > 0) return c < INT64_MIN + b || a > c - b;
    return c <= INT64_MAX + b && a > c - b;
}

/* a >= 2 * b, exactly (no int64 overflow). */
static inline int at_least_twice(int64_t a, int64_t b) {
    if (b >= 0) return a >= INT64_MIN + b && a - b >= b;
    return a > INT64_MAX + b || a - b >= b;
}

/* Java's BuiltInPartitioner.updatePartitionInfo rule (partitioner.time_to_switch):
 * move on from the sticky partition once ``limit`` bytes went to it and its
 * batch (``filled`` bytes) has no room for another record of ``size``, or at
 * twice ``limit`` regardless. Exact for every int64, as Python's ints are. */
static inline int time_to_switch(int64_t produced, int64_t limit, int64_t filled, int64_t size) {
    return produced >= limit && (at_least_twice(produced, limit) || sum_exceeds(filled, size, limit));
}

#endif
