/* BufferCounter's C-level surface (_counter.c), for the lanes that reserve
 * buffer memory per record without a method call. */
#ifndef AIOPRODUCER_COUNTER_H
#define AIOPRODUCER_COUNTER_H

#include <Python.h>

/* The bytes of buffer memory free, and whether someone waits for some. */
typedef struct {
    PyObject_HEAD
    long long available;
    char exhausted;
} Counter;

/* try_reserve on a counter (an instance of the compiled BufferCounter or a
 * subclass): takes ``n`` bytes (n >= 0) and answers 1 when not exhausted and
 * at least ``n`` are free, else 0. Runs no Python code. */
static inline int counter_try_reserve(PyObject *counter, long long n) {
    Counter *c = (Counter *)counter;
    if (c->exhausted || c->available < n) return 0;
    c->available -= n;
    return 1;
}

/* Adds the BufferCounter type to the module and its state: 0 or -1. */
int add_counter_type(PyObject *module);

#endif
