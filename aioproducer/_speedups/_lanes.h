/* The lanes of Producer.enqueue's shortcut (_lanes.c), for the shortcut's step 1
 * (_shortcut.c), which calls their appends without a method call. */
#ifndef AIOPRODUCER_LANES_H
#define AIOPRODUCER_LANES_H

#include <Python.h>

#include "_state.h"

/* engine/unkeyed_lane.py's UNKEYED_RECORD_BOUND and keyed_lane.py's KEYED_RECORD_BOUND
 * (records.MAX_RECORD_OVERHEAD, 21, plus a null key's or an empty header count's
 * bytes), and batch.py's RECORD_HANDLE_OVERHEAD; exported by the module, where a
 * test compares them with the Python constants. */
#define UNKEYED_RECORD_BOUND 33
#define KEYED_RECORD_BOUND 34
#define RECORD_HANDLE_OVERHEAD 256

typedef struct {
    PyObject_HEAD
    PyObject *batch_size, *client, *filling, *max_size, *move_on, *pool, *produced, *wake;
} UnkeyedLaneObject;

typedef struct {
    PyObject_HEAD
    PyObject *client, *deques, *max_size, *pool, *wake;
} KeyedLaneObject;

/* lane.append(topic, value) on an UnkeyedLane of this module: the handle, None, or NULL. */
PyObject *unkeyed_lane_append(kernels_state *st, PyObject *lane, PyObject *topic, PyObject *value);
/* lane.append(topic, key, value) on a KeyedLane of this module, likewise. */
PyObject *keyed_lane_append(kernels_state *st, PyObject *lane, PyObject *topic, PyObject *key,
                            PyObject *value);
/* Adds UnkeyedLane, KeyedLane and the bound constants to the module: 0 or -1. */
int add_lane_types(PyObject *module);
/* _shortcut.c: adds EnqueueShortcut to the module: 0 or -1. */
int add_shortcut_type(PyObject *module);

#endif
