/* Compiled twins of the producer's per-record kernels.
 *
 * Each function here computes exactly what its pure-Python reference computes
 * (tests/unit/test_kernels_equal.py checks byte equality on random input):
 *
 *   murmur2            aioproducer.engine.partitioner._murmur2_pure
 *   RecordBatchBuilder aioproducer.protocol.records.RecordBatchBuilderPy (in _builder.c)
 *   _partition_for_key, _time_to_switch   partitioner.partition_for_key, .time_to_switch
 *                      (test hooks of _partitioning.h, the partitioner's compiled twin)
 *   BufferCounter      engine.buffer_pool.BufferCounterPy (in _counter.c)
 *   BatchCore          engine.batch.BatchCorePy: append_unkeyed, append_keyed (in _batch_core.c)
 *   UnkeyedLane, KeyedLane  engine.unkeyed_lane.UnkeyedLanePy, keyed_lane.KeyedLanePy (in _lanes.c)
 *   EnqueueShortcut    engine.shortcut.EnqueueShortcutPy (in _shortcut.c)
 *   byte_lengths, reservations, fill_counting   the bulk column passes (in _columns.c)
 *
 * Record layout: message format v2 (KIP-98); every varint is zigzag encoded.
 * Every type here owns its fields (a C struct); the Python modules choose each
 * twin once. BufferPool and ProducerBatch subclass BufferCounter and BatchCore
 * (their other fields stay Python slots). No code reads a Python class's
 * layout, and nothing is process-wide: what the kernels look up once is in the
 * module's state, reached from a method through its defining class.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_batch_core.h"
#include "_builder.h"
#include "_counter.h"
#include "_lanes.h"
#include "_outcome_layout.h"
#include "_partitioning.h"
#include "_state.h"
#include "_varint.h"

/* ---- murmur2 ------------------------------------------------------------ */

/* Hashes the bytes a buffer holds, in C order, as the pure reference does
 * (``memoryview(data).tobytes()`` for anything but exactly bytes): so a
 * memoryview of any format or stride, an array('b') or a bytes subclass hashes
 * as the bytes it holds, never as its items; no buffer: memoryview's TypeError. */
static PyObject *k_murmur2(PyObject *self, PyObject *arg) {
    if (PyBytes_CheckExact(arg)) {
        return PyLong_FromLong((long)murmur2_buffer((const unsigned char *)PyBytes_AS_STRING(arg),
                                                    PyBytes_GET_SIZE(arg)));
    }
    /* memoryview() runs the object's __buffer__ (3.12+) once; the copy then
     * owns the bytes, whatever that code does to the object afterwards. */
    PyObject *view = PyMemoryView_FromObject(arg);
    if (!view) return NULL;
    PyObject *data = PyBytes_FromObject(view);
    Py_DECREF(view);
    if (!data) return NULL;
    int h = murmur2_buffer((const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
    Py_DECREF(data);
    return PyLong_FromLong((long)h);
}

/* ---- the partitioning twin's hooks (tests compare them with partitioner.py) ---- */

/* _partition_for_key(key, num_partitions): _partitioning.h's partition_for_key_buffer,
 * as the keyed lane runs it; num_partitions in [1, 2**31 - 1] (Java's int). */
static PyObject *k_partition_for_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_partition_for_key(key, num_partitions) takes 2 arguments");
        return NULL;
    }
    long long n = PyLong_AsLongLong(args[1]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || n > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be in [1, %d], got %lld", INT32_MAX, n);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    int32_t p = partition_for_key_buffer((const unsigned char *)view.buf, view.len, (int32_t)n);
    PyBuffer_Release(&view);
    return PyLong_FromLong((long)p);
}

/* _time_to_switch(produced, limit, filled, size): _partitioning.h's rule over int64s. */
static PyObject *k_time_to_switch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "_time_to_switch(produced, limit, filled, size) takes 4 arguments");
        return NULL;
    }
    int64_t v[4];
    for (int i = 0; i < 4; i++) {
        long long x = PyLong_AsLongLong(args[i]);
        if (x == -1 && PyErr_Occurred()) return NULL;
        v[i] = (int64_t)x;
    }
    return PyBool_FromLong(time_to_switch(v[0], v[1], v[2], v[3]));
}

static PyMethodDef methods[] = {
    {"murmur2", k_murmur2, METH_O, "Kafka's murmur2 (seed 0x9747b28c) as a signed 32-bit int."},
    {"_partition_for_key", (PyCFunction)(void (*)(void))k_partition_for_key, METH_FASTCALL,
     "_partition_for_key(key, num_partitions) -> Java's toPositive(murmur2(key)) % num_partitions"},
    {"_time_to_switch", (PyCFunction)(void (*)(void))k_time_to_switch, METH_FASTCALL,
     "_time_to_switch(produced, limit, filled, size) -> the sticky partitioner's switch rule"},
    {NULL, NULL, 0, NULL},
};

/* ---- the module: multi-phase initialisation (PEP 489), its state per module (PEP 573) ---- */

static int kernels_traverse(PyObject *module, visitproc visit, void *arg) {
    kernels_state *st = get_kernels_state(module);
    Py_VISIT(st->str_call_soon);
    Py_VISIT(st->context_kwnames);
    Py_VISIT(st->tuple_new);
    Py_VISIT(st->invalid_state_error);
    Py_VISIT(st->cancelled_error);
    Py_VISIT(st->record_metadata_type);
    Py_VISIT(st->batch_outcome_type);
    Py_VISIT(st->record_handle_type);
    Py_VISIT(st->handle_iter_type);
    Py_VISIT(st->builder_type);
    Py_VISIT(st->codec_type);
    Py_VISIT(st->codec_none);
    Py_VISIT(st->compress);
    Py_VISIT(st->counter_type);
    Py_VISIT(st->batch_core_type);
    Py_VISIT(st->open_state);
    Py_VISIT(st->unkeyed_lane_type);
    Py_VISIT(st->keyed_lane_type);
    Py_VISIT(st->shortcut_type);
    Py_VISIT(st->str_snapshot);
    Py_VISIT(st->str_topics);
    Py_VISIT(st->str_try_reserve);
    Py_VISIT(st->str_release);
    Py_VISIT(st->str_partitions);
    Py_VISIT(st->str_tps);
    Py_VISIT(st->str_thread_id);
    Py_VISIT(st->str_append);
    Py_VISIT(st->code_appended);
    Py_VISIT(st->code_full);
    Py_VISIT(st->code_switch);
    Py_VISIT(st->ident_obj);
    return 0;
}

static int kernels_clear(PyObject *module) {
    kernels_state *st = get_kernels_state(module);
    Py_CLEAR(st->str_call_soon);
    Py_CLEAR(st->context_kwnames);
    Py_CLEAR(st->tuple_new);
    Py_CLEAR(st->invalid_state_error);
    Py_CLEAR(st->cancelled_error);
    Py_CLEAR(st->record_metadata_type);
    Py_CLEAR(st->batch_outcome_type);
    Py_CLEAR(st->record_handle_type);
    Py_CLEAR(st->handle_iter_type);
    Py_CLEAR(st->builder_type);
    Py_CLEAR(st->codec_type);
    Py_CLEAR(st->codec_none);
    Py_CLEAR(st->compress);
    Py_CLEAR(st->counter_type);
    Py_CLEAR(st->batch_core_type);
    Py_CLEAR(st->open_state);
    Py_CLEAR(st->unkeyed_lane_type);
    Py_CLEAR(st->keyed_lane_type);
    Py_CLEAR(st->shortcut_type);
    Py_CLEAR(st->str_snapshot);
    Py_CLEAR(st->str_topics);
    Py_CLEAR(st->str_try_reserve);
    Py_CLEAR(st->str_release);
    Py_CLEAR(st->str_partitions);
    Py_CLEAR(st->str_tps);
    Py_CLEAR(st->str_thread_id);
    Py_CLEAR(st->str_append);
    Py_CLEAR(st->code_appended);
    Py_CLEAR(st->code_full);
    Py_CLEAR(st->code_switch);
    Py_CLEAR(st->ident_obj);
    return 0;
}

static void kernels_free(void *module) { kernels_clear((PyObject *)module); }

static int kernels_exec(PyObject *module) {
    if (add_handle_types(module) < 0 || add_counter_type(module) < 0 || add_builder_type(module) < 0 || add_batch_core_type(module) < 0 ||
        add_column_kernels(module) < 0 || add_lane_types(module) < 0 ||
        add_shortcut_type(module) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot kernels_slots[] = {
    {Py_mod_exec, kernels_exec},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aioproducer._speedups._kernels",
    .m_doc = "Compiled twins of the producer's per-record kernels.",
    .m_size = sizeof(kernels_state),
    .m_methods = methods,
    .m_slots = kernels_slots,
    .m_traverse = kernels_traverse,
    .m_clear = kernels_clear,
    .m_free = kernels_free,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModuleDef_Init(&module); }
