/* The lanes of Producer.enqueue's shortcut, compiled: UnkeyedLane and KeyedLane.
 *
 * The references are UnkeyedLanePy (aioproducer/engine/unkeyed_lane.py) and
 * KeyedLanePy (keyed_lane.py). The unkeyed lane finds the topic's filling batch
 * (a weak reference) and the metadata it was chosen under, checks the batch is
 * alive, that metadata still current and the record small enough, reserves
 * its buffer memory (BufferCounter.try_reserve), then appends the record (its
 * handle made with it) through the batch's append_unkeyed: a C call on a
 * BatchCore (_batch_core.c). A refused append gives the memory back through
 * the pool (which grants it to a waiter it is enough for). It wakes the
 * sender when the record left the batch full (Java's batchIsFull) and tells
 * the sticky partitioner to move on when its turn is over. The keyed lane
 * finds the partition the key hashes to (Java's BuiltInPartitioner) and the
 * open batch at the back of its queue, then does likewise.
 * tests/unit/test_unkeyed_lane.py and test_keyed_lane.py run both twins.
 *
 * The fields are the types' own (members of their structs); the module's
 * state (interned names, types) is reached through the defining class.
 * Everything read before a call that can run Python code is held (owned)
 * across it, and the pool and batch are asked again rather than remembered.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_batch_core.h"
#include "_counter.h"
#include "_lanes.h"
#include "_partitioning.h"

/* The current metadata entry of ``topic`` (a new reference, Py_None when absent), or NULL. */
static PyObject *current_topic_info(kernels_state *st, PyObject *client, PyObject *topic) {
    PyObject *snapshot = PyObject_GetAttr(client, st->str_snapshot);
    if (!snapshot) return NULL;
    PyObject *topics = PyObject_GetAttr(snapshot, st->str_topics);
    Py_DECREF(snapshot);
    if (!topics) return NULL;
    PyObject *info;
    if (PyDict_CheckExact(topics)) {
        info = Py_XNewRef(PyDict_GetItemWithError(topics, topic));
        if (!info && !PyErr_Occurred()) info = Py_NewRef(Py_None);
    } else {
        info = PyObject_CallMethod(topics, "get", "O", topic);
    }
    Py_DECREF(topics);
    return info;
}

/* ``size <= max_size`` as the pure lanes compare (an int past 64 bits is still an int). */
static int fits(PyObject *max_size_obj, Py_ssize_t size) {
    int overflow;
    long long max_size = PyLong_AsLongLongAndOverflow(max_size_obj, &overflow);
    if (max_size == -1 && PyErr_Occurred()) return -1;
    return !(overflow < 0 || (!overflow && size > max_size));
}

/* pool.try_reserve(reserve): 1, 0, or -1. A BufferCounter (a BufferPool) by a C call. */
static int pool_reserve(kernels_state *st, PyObject *pool, Py_ssize_t reserve) {
    if (PyObject_TypeCheck(pool, st->counter_type)) return counter_try_reserve(pool, (long long)reserve);
    PyObject *n = PyLong_FromSsize_t(reserve);
    if (!n) return -1;
    PyObject *call[2] = {pool, n};
    PyObject *got = PyObject_VectorcallMethod(st->str_try_reserve, call, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                              NULL);
    Py_DECREF(n);
    if (!got) return -1;
    int truth = PyObject_IsTrue(got);
    Py_DECREF(got);
    return truth;
}

/* pool.release(reserve) for a record not appended: 0 or -1. With ``keep_error`` the
 * error being raised stays (unless release raises its own, as in the pure lanes). */
static int pool_give_back(kernels_state *st, PyObject *pool, Py_ssize_t reserve, int keep_error) {
    PyObject *exc_type = NULL, *exc_value = NULL, *exc_tb = NULL;
    if (keep_error) PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *n = PyLong_FromSsize_t(reserve);
    PyObject *got = NULL;
    if (n) {
        PyObject *call[2] = {pool, n};
        got = PyObject_VectorcallMethod(st->str_release, call, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(n);
    }
    if (!got) {
        Py_XDECREF(exc_type);
        Py_XDECREF(exc_value);
        Py_XDECREF(exc_tb);
        return -1;
    }
    Py_DECREF(got);
    if (keep_error) PyErr_Restore(exc_type, exc_value, exc_tb);
    return 0;
}

/* After an append answered ``code`` (<= 0): the bytes go back, except when the
 * answer could not be read (-2: the record may hold them, as in the pure lanes).
 * 0 to refuse, -1 to raise. */
static int after_refusal(kernels_state *st, PyObject *pool, Py_ssize_t reserve, int code) {
    if (code == -2) return -1;
    if (pool_give_back(st, pool, reserve, code < 0) < 0) return -1;
    return code < 0 ? -1 : 0;
}

/* Whether an append's answer holds ``flag``: from ``code`` for a BatchCore's answer,
 * or ``answer & flag_obj`` for another batch's (``answer`` not NULL). 1, 0, or -1. */
static int answer_has(PyObject *answer, int code, int flag, PyObject *flag_obj) {
    if (!answer) return (code & flag) != 0;
    PyObject *masked = PyNumber_And(answer, flag_obj);
    if (!masked) return -1;
    int truth = PyObject_IsTrue(masked);
    Py_DECREF(masked);
    return truth;
}

/* Calls ``callable()`` or ``callable(a, b)`` and drops its result: 0 or -1. */
static int call_dropped(PyObject *callable, PyObject *a, PyObject *b) {
    PyObject *got = a ? PyObject_CallFunctionObjArgs(callable, a, b, NULL) : PyObject_CallNoArgs(callable);
    if (!got) return -1;
    Py_DECREF(got);
    return 0;
}

/* A field never set (a lane made by __new__ alone): AttributeError, as a slot's. */
static PyObject *held_field(PyObject *lane, PyObject *value, const char *name) {
    if (!value)
        PyErr_Format(PyExc_AttributeError, "'%.200s' object has no attribute '%s'", Py_TYPE(lane)->tp_name,
                     name);
    return Py_XNewRef(value);
}

/* ---- the unkeyed lane ---------------------------------------------------------- */

PyObject *unkeyed_lane_append(kernels_state *st, PyObject *self, PyObject *topic, PyObject *value) {
    UnkeyedLaneObject *lane = (UnkeyedLaneObject *)self;
    /* Held: the calls below may run Python code that changes the lane. */
    PyObject *filling = held_field(self, lane->filling, "filling");
    PyObject *produced = NULL, *batch_size = NULL, *client = NULL, *max_size = NULL;
    PyObject *move_on = NULL, *pool = NULL, *wake = NULL;
    PyObject *entry = NULL, *known = NULL, *batch = NULL, *info = NULL, *fut = NULL, *answer = NULL;
    PyObject *result = NULL;
    if (!filling) return NULL;
    if (!PyDict_CheckExact(filling)) {
        PyErr_SetString(PyExc_TypeError, "the lane's filling is not a dict");
        goto done;
    }
    /* Owned at once: a topic's __eq__ run by the lookup may change the dict. */
    entry = Py_XNewRef(PyDict_GetItemWithError(filling, topic));
    if (!entry) {
        if (!PyErr_Occurred()) result = Py_NewRef(Py_None);
        goto done;
    }
    if (entry == Py_None) goto refuse; /* as the pure lane: nothing is filling */
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "a filling entry is not a (weak reference, topic info) pair");
        goto done;
    }
    known = Py_NewRef(PyTuple_GET_ITEM(entry, 1));
    batch = PyObject_CallNoArgs(PyTuple_GET_ITEM(entry, 0)); /* the weak reference */
    if (!batch) goto done;
    if (!(produced = held_field(self, lane->produced, "produced")) ||
        !(batch_size = held_field(self, lane->batch_size, "batch_size")) ||
        !(client = held_field(self, lane->client, "client")) ||
        !(max_size = held_field(self, lane->max_size, "max_size")) ||
        !(move_on = held_field(self, lane->move_on, "move_on")) ||
        !(pool = held_field(self, lane->pool, "pool")) || !(wake = held_field(self, lane->wake, "wake")))
        goto done;
    Py_ssize_t vlen = PyBytes_CheckExact(value) ? PyBytes_GET_SIZE(value) : PyObject_Size(value);
    if (vlen < 0) goto done;
    Py_ssize_t size = vlen + UNKEYED_RECORD_BOUND;
    Py_ssize_t reserve = size + RECORD_HANDLE_OVERHEAD;
    if (batch == Py_None) goto refuse;
    info = current_topic_info(st, client, topic);
    if (!info) goto done;
    if (info != known) goto refuse;
    int small = fits(max_size, size);
    if (small <= 0) {
        if (small < 0) goto done;
        goto refuse;
    }
    int reserved = pool_reserve(st, pool, reserve);
    if (reserved <= 0) {
        if (reserved < 0) goto done;
        goto refuse;
    }
    int code = call_append_unkeyed(st, batch, value, reserve, size, produced, topic, batch_size, &answer,
                                   &fut);
    if (code <= 0) { /* an error, or the batch is full or sealed: the bytes go back */
        if (after_refusal(st, pool, reserve, code) < 0) goto done;
        goto refuse;
    }
    /* Another batch's answer is read as the pure lane reads it (RichCompareBool's
     * identity shortcut answers as != would: only 1 is itself). */
    int other = answer ? PyObject_RichCompareBool(answer, st->code_appended, Py_NE) : code != CODE_APPENDED;
    if (other < 0) goto done;
    if (other) { /* SWITCH, FULL or both */
        int full = answer_has(answer, code, CODE_FULL, st->code_full);
        if (full < 0 || (full && call_dropped(wake, NULL, NULL) < 0)) goto done;
        int moving = answer_has(answer, code, CODE_SWITCH, st->code_switch);
        if (moving < 0 || (moving && call_dropped(move_on, topic, known) < 0)) goto done;
    }
    result = Py_NewRef(fut);
    goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(filling);
    Py_XDECREF(produced);
    Py_XDECREF(batch_size);
    Py_XDECREF(client);
    Py_XDECREF(max_size);
    Py_XDECREF(move_on);
    Py_XDECREF(pool);
    Py_XDECREF(wake);
    Py_XDECREF(entry);
    Py_XDECREF(known);
    Py_XDECREF(batch);
    Py_XDECREF(info);
    Py_XDECREF(fut);
    Py_XDECREF(answer);
    return result;
}

static PyObject *unkeyed_append_method(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                                       Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs != 2 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "append(topic, value)");
        return NULL;
    }
    return unkeyed_lane_append((kernels_state *)PyType_GetModuleState(cls), self, args[0], args[1]);
}

/* UnkeyedLane(sticky, pool, client, max_size, wake), as UnkeyedLanePy.__init__. */
static int unkeyed_init(PyObject *op, PyObject *args, PyObject *kwds) {
    static char *names[] = {"sticky", "pool", "client", "max_size", "wake", NULL};
    PyObject *sticky, *pool, *client, *max_size, *wake;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO:UnkeyedLane", names, &sticky, &pool, &client,
                                     &max_size, &wake))
        return -1;
    PyObject *filling = PyObject_GetAttrString(sticky, "filling");
    PyObject *produced = filling ? PyObject_GetAttrString(sticky, "produced") : NULL;
    PyObject *batch_size = produced ? PyObject_GetAttrString(sticky, "batch_size") : NULL;
    PyObject *move_on = batch_size ? PyObject_GetAttrString(sticky, "move_on") : NULL;
    if (!move_on) {
        Py_XDECREF(filling);
        Py_XDECREF(produced);
        Py_XDECREF(batch_size);
        return -1;
    }
    UnkeyedLaneObject *lane = (UnkeyedLaneObject *)op;
    Py_XSETREF(lane->filling, filling);
    Py_XSETREF(lane->produced, produced);
    Py_XSETREF(lane->batch_size, batch_size);
    Py_XSETREF(lane->move_on, move_on);
    Py_XSETREF(lane->pool, Py_NewRef(pool));
    Py_XSETREF(lane->client, Py_NewRef(client));
    Py_XSETREF(lane->max_size, Py_NewRef(max_size));
    Py_XSETREF(lane->wake, Py_NewRef(wake));
    return 0;
}

#define UNKEYED_FIELDS(X) X(batch_size) X(client) X(filling) X(max_size) X(move_on) X(pool) X(produced) X(wake)
#define KEYED_FIELDS(X) X(client) X(deques) X(max_size) X(pool) X(wake)

static int unkeyed_traverse(PyObject *op, visitproc visit, void *arg) {
    UnkeyedLaneObject *lane = (UnkeyedLaneObject *)op;
    Py_VISIT(Py_TYPE(op));
#define VISIT(f) Py_VISIT(lane->f);
    UNKEYED_FIELDS(VISIT)
    return 0;
}

static int unkeyed_clear(PyObject *op) {
    UnkeyedLaneObject *lane = (UnkeyedLaneObject *)op;
#define CLEAR(f) Py_CLEAR(lane->f);
    UNKEYED_FIELDS(CLEAR)
    return 0;
}

static void unkeyed_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    unkeyed_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

#define UNKEYED_MEMBER(f) {#f, T_OBJECT_EX, offsetof(UnkeyedLaneObject, f), 0, NULL},
static PyMemberDef unkeyed_members[] = {UNKEYED_FIELDS(UNKEYED_MEMBER){NULL, 0, 0, 0, NULL}};

static PyMethodDef unkeyed_methods[] = {
    {"append", (PyCFunction)(void (*)(void))unkeyed_append_method, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "append(topic, value) -> the record's handle, or None when the full path must decide"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot unkeyed_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, unkeyed_init},
    {Py_tp_traverse, unkeyed_traverse},
    {Py_tp_clear, unkeyed_clear},
    {Py_tp_dealloc, unkeyed_dealloc},
    {Py_tp_members, unkeyed_members},
    {Py_tp_methods, unkeyed_methods},
    {Py_tp_doc, "The unkeyed shortcut's view of one started producer (see unkeyed_lane.py)."},
    {0, NULL},
};

static PyType_Spec unkeyed_spec = {
    .name = "aioproducer._speedups._kernels.UnkeyedLane",
    .basicsize = sizeof(UnkeyedLaneObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = unkeyed_slots,
};

/* ---- the keyed lane ------------------------------------------------------------ */

PyObject *keyed_lane_append(kernels_state *st, PyObject *self, PyObject *topic, PyObject *key,
                            PyObject *value) {
    KeyedLaneObject *lane = (KeyedLaneObject *)self;
    PyObject *client = NULL, *deques = NULL, *max_size = NULL, *pool = NULL, *wake = NULL;
    PyObject *info = NULL, *partitions = NULL, *tps = NULL, *tp = NULL, *dq = NULL, *batch = NULL;
    PyObject *fut = NULL, *result = NULL;
    /* Held: the calls below may run Python code that changes the lane. */
    if (!(client = held_field(self, lane->client, "client")) ||
        !(deques = held_field(self, lane->deques, "deques")) ||
        !(max_size = held_field(self, lane->max_size, "max_size")) ||
        !(pool = held_field(self, lane->pool, "pool")) || !(wake = held_field(self, lane->wake, "wake")))
        goto done;
    info = current_topic_info(st, client, topic);
    if (!info) goto done;
    if (info == Py_None) goto refuse;
    partitions = PyObject_GetAttr(info, st->str_partitions);
    if (!partitions) goto done;
    Py_ssize_t count = PyObject_Size(partitions);
    if (count < 0) goto done;
    if (count == 0 || count > INT32_MAX) goto refuse; /* Java's int partition count */
    /* The key's bytes hashed while its buffer is held (its __buffer__ may run code,
     * which changes nothing read so far: all of it is owned). */
    Py_buffer kview;
    if (PyObject_GetBuffer(key, &kview, PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t klen = kview.len;
    /* Java's BuiltInPartitioner.partitionForKey (partitioner.partition_for_key) */
    int32_t partition = partition_for_key_buffer((const unsigned char *)kview.buf, klen, (int32_t)count);
    PyBuffer_Release(&kview);
    tps = PyObject_GetAttr(info, st->str_tps);
    if (!tps) goto done;
    tp = PySequence_GetItem(tps, (Py_ssize_t)partition);
    if (!tp) goto done;
    dq = PyDict_CheckExact(deques) ? Py_XNewRef(PyDict_GetItemWithError(deques, tp))
                                   : PyObject_CallMethod(deques, "get", "O", tp);
    if (!dq) {
        if (PyErr_Occurred()) goto done;
        goto refuse;
    }
    int nonempty = PyObject_IsTrue(dq);
    if (nonempty < 0) goto done;
    if (!nonempty) goto refuse;
    batch = PySequence_GetItem(dq, -1);
    if (!batch) goto done;
    Py_ssize_t vlen = PyBytes_CheckExact(value) ? PyBytes_GET_SIZE(value) : PyObject_Size(value);
    if (vlen < 0) goto done;
    Py_ssize_t size = klen + vlen + KEYED_RECORD_BOUND;
    Py_ssize_t reserve = size + RECORD_HANDLE_OVERHEAD;
    int small = fits(max_size, size);
    if (small <= 0) {
        if (small < 0) goto done;
        goto refuse;
    }
    int reserved = pool_reserve(st, pool, reserve);
    if (reserved <= 0) {
        if (reserved < 0) goto done;
        goto refuse;
    }
    int code = call_append_keyed(st, batch, key, value, reserve, size, &fut);
    if (code <= 0) { /* an error, or the batch is full, sealed or no longer open */
        if (after_refusal(st, pool, reserve, code) < 0) goto done;
        goto refuse;
    }
    if ((code & CODE_FULL) && call_dropped(wake, NULL, NULL) < 0) goto done;
    result = Py_NewRef(fut);
    goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(client);
    Py_XDECREF(deques);
    Py_XDECREF(max_size);
    Py_XDECREF(pool);
    Py_XDECREF(wake);
    Py_XDECREF(info);
    Py_XDECREF(partitions);
    Py_XDECREF(tps);
    Py_XDECREF(tp);
    Py_XDECREF(dq);
    Py_XDECREF(batch);
    Py_XDECREF(fut);
    return result;
}

static PyObject *keyed_append_method(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                                     Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs != 3 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "append(topic, key, value)");
        return NULL;
    }
    return keyed_lane_append((kernels_state *)PyType_GetModuleState(cls), self, args[0], args[1], args[2]);
}

/* KeyedLane(deques, pool, client, max_size, wake), as KeyedLanePy.__init__. */
static int keyed_init(PyObject *op, PyObject *args, PyObject *kwds) {
    static char *names[] = {"deques", "pool", "client", "max_size", "wake", NULL};
    PyObject *deques, *pool, *client, *max_size, *wake;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO:KeyedLane", names, &deques, &pool, &client,
                                     &max_size, &wake))
        return -1;
    KeyedLaneObject *lane = (KeyedLaneObject *)op;
    Py_XSETREF(lane->deques, Py_NewRef(deques));
    Py_XSETREF(lane->pool, Py_NewRef(pool));
    Py_XSETREF(lane->client, Py_NewRef(client));
    Py_XSETREF(lane->max_size, Py_NewRef(max_size));
    Py_XSETREF(lane->wake, Py_NewRef(wake));
    return 0;
}

static int keyed_traverse(PyObject *op, visitproc visit, void *arg) {
    KeyedLaneObject *lane = (KeyedLaneObject *)op;
    Py_VISIT(Py_TYPE(op));
    KEYED_FIELDS(VISIT)
    return 0;
}

static int keyed_clear(PyObject *op) {
    KeyedLaneObject *lane = (KeyedLaneObject *)op;
    KEYED_FIELDS(CLEAR)
    return 0;
}

static void keyed_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    keyed_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

#define KEYED_MEMBER(f) {#f, T_OBJECT_EX, offsetof(KeyedLaneObject, f), 0, NULL},
static PyMemberDef keyed_members[] = {KEYED_FIELDS(KEYED_MEMBER){NULL, 0, 0, 0, NULL}};

static PyMethodDef keyed_methods[] = {
    {"append", (PyCFunction)(void (*)(void))keyed_append_method, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "append(topic, key, value) -> the record's handle, or None when the full path must decide"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot keyed_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, keyed_init},
    {Py_tp_traverse, keyed_traverse},
    {Py_tp_clear, keyed_clear},
    {Py_tp_dealloc, keyed_dealloc},
    {Py_tp_members, keyed_members},
    {Py_tp_methods, keyed_methods},
    {Py_tp_doc, "The keyed shortcut's view of one started producer (see keyed_lane.py)."},
    {0, NULL},
};

static PyType_Spec keyed_spec = {
    .name = "aioproducer._speedups._kernels.KeyedLane",
    .basicsize = sizeof(KeyedLaneObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = keyed_slots,
};

/* ---- the module's part ------------------------------------------------------------ */

static int intern(PyObject **slot, const char *name) {
    *slot = PyUnicode_InternFromString(name);
    return *slot ? 0 : -1;
}

int add_lane_types(PyObject *module) {
    kernels_state *st = get_kernels_state(module);
    if (intern(&st->str_snapshot, "snapshot") < 0 || intern(&st->str_topics, "topics") < 0 ||
        intern(&st->str_try_reserve, "try_reserve") < 0 || intern(&st->str_release, "release") < 0 ||
        intern(&st->str_partitions, "partitions") < 0 || intern(&st->str_tps, "tps") < 0)
        return -1;
    if (!(st->code_appended = PyLong_FromLong(CODE_APPENDED)) || !(st->code_full = PyLong_FromLong(CODE_FULL)) ||
        !(st->code_switch = PyLong_FromLong(CODE_SWITCH)))
        return -1;
    st->unkeyed_lane_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &unkeyed_spec, NULL);
    if (!st->unkeyed_lane_type || PyModule_AddType(module, st->unkeyed_lane_type) < 0) return -1;
    st->keyed_lane_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &keyed_spec, NULL);
    if (!st->keyed_lane_type || PyModule_AddType(module, st->keyed_lane_type) < 0) return -1;
    if (PyModule_AddIntConstant(module, "UNKEYED_RECORD_BOUND", UNKEYED_RECORD_BOUND) < 0 ||
        PyModule_AddIntConstant(module, "KEYED_RECORD_BOUND", KEYED_RECORD_BOUND) < 0 ||
        PyModule_AddIntConstant(module, "RECORD_HANDLE_OVERHEAD", RECORD_HANDLE_OVERHEAD) < 0)
        return -1;
    return 0;
}
