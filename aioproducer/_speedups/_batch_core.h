/* BatchCore (_batch_core.c): the fields of a ProducerBatch that the per-record
 * appends read and write, in a C struct, and the appends the lanes call. */
#ifndef AIOPRODUCER_BATCH_CORE_H
#define AIOPRODUCER_BATCH_CORE_H

#include <Python.h>

#include "_state.h"

typedef struct {
    PyObject_HEAD
    PyObject *state;   /* a BatchState; NULL until set */
    PyObject *builder; /* the compiled RecordBatchBuilder; NULL until set */
    PyObject *outcome; /* the batch's BatchOutcome; NULL until set */
    long long reserved, max_record_size, batch_size;
} BatchCore;

/* What the appends answer: engine/batch.py's REFUSED, APPENDED and SWITCH, to which
 * FULL is added when the record left its batch full (is_full(): the sender may send
 * it now, Java's batchIsFull). */
enum { CODE_REFUSED = 0, CODE_APPENDED = 1, CODE_SWITCH = 2, CODE_FULL = 4 };

/* batch.append_unkeyed(now, value, reserve, bound, produced, topic, limit) for the
 * lanes, as a code: 0 refused, 1 appended, 2 appended and the sticky turn is over
 * (either plus 4: full), -1 an error; the record's handle in *handle when appended.
 * A BatchCore with a compiled outcome and builder is appended to by a C call; any
 * other batch gets a method call, whose answer (a new reference) is left in *answer
 * for the lane to read as the pure lane does (the code is then 1); -2 when that
 * answer's truth raised (the record may be appended). */
int call_append_unkeyed(kernels_state *st, PyObject *batch, PyObject *value, Py_ssize_t reserve,
                        Py_ssize_t bound, PyObject *produced, PyObject *topic, PyObject *limit_obj,
                        PyObject **answer, PyObject **handle);
/* batch.append_keyed(now, key, value, reserve, bound) for the lanes: 1 (appended), 5
 * (and full), 0 (refused), -1 (an error), -2 (the answer could not be read, the record
 * may be appended); the handle as above. */
int call_append_keyed(kernels_state *st, PyObject *batch, PyObject *key, PyObject *value,
                      Py_ssize_t reserve, Py_ssize_t bound, PyObject **handle);
/* Adds BatchCore and register_open_state to the module: 0 or -1. */
int add_batch_core_type(PyObject *module);

#endif
