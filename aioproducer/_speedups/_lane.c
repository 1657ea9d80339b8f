/* The shortcuts of Producer.enqueue, compiled: UnkeyedLane.append, KeyedLane.append,
 * and EnqueueShortcut.take (step 1 of enqueue, which hands a record to one of them).
 *
 * The reference is UnkeyedLane._append_pure (aioproducer/engine/unkeyed_lane.py):
 * find the topic's filling batch (a weak reference) and the metadata it was
 * chosen under, check the batch is alive, that metadata still current, the
 * record small enough and buffer memory free, then append (the record's handle
 * made with it) through the batch's append_unkeyed (the compiled kernel of
 * _append.c, called directly); charge the buffer pool, wake the sender when the
 * append says the record left the batch full (as enqueue's full path does: Java's
 * batchIsFull), and tell the sticky partitioner to move on when the append says
 * its turn is over.
 * tests/unit/test_unkeyed_lane.py checks both leave the same state and answers.
 *
 * UnkeyedLane stays a Python class with __slots__; bind_lane_layout(), called
 * once when the module is imported, reads where its slots and the buffer pool's
 * sit (as bind_batch_layout does for the batch) and returns this kernel as a
 * method descriptor of the class. The client is an ordinary object: its
 * snapshot is read by name (interned once), as is any pool not a BufferPool.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include "_batch_core.h"
#include "_counter.h"
#include "_partitioning.h"
#include "_state.h"
#include "_varint.h"

/* The offset of slot ``name`` of ``type`` (a PyObject * at a fixed place in every
 * instance, subclasses too: CPython's member descriptors), or -1 with an error.
 * With ``writable``, a read-only member does not count.  */
static Py_ssize_t slot_offset(PyTypeObject *type, const char *name, int writable) {
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (!descr) return -1;
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX && !(writable && (member->flags & READONLY)))
            offset = member->offset;
    }
    Py_DECREF(descr);
    if (offset < 0)
        PyErr_Format(PyExc_TypeError, "%s.%s is not a%s slot", type->tp_name, name,
                     writable ? " writable" : "");
    return offset;
}

/* The offsets of ``n`` slots of ``type`` into ``out``: 0, or -1 with an error. */
static int slot_offsets(PyTypeObject *type, const char *const *names, int n, Py_ssize_t *out) {
    for (int i = 0; i < n; i++) {
        out[i] = slot_offset(type, names[i], 0);
        if (out[i] < 0) return -1;
    }
    return 0;
}

enum {
    L_BATCH_SIZE, L_CLIENT, L_FILLING, L_MAX_SIZE, L_MOVE_ON, L_POOL, L_PRODUCED, L_WAKE, N_LANE
};

static const char *const lane_slot_names[N_LANE] = {
    "batch_size", "client", "filling", "max_size", "move_on", "pool", "produced", "wake",
};


static struct {
    PyTypeObject *lane_type;
    PyTypeObject *counter_type; /* BufferCounter: reserved from without a method call */
    PyObject *module;           /* the kernels module bound with */
    Py_ssize_t offset[N_LANE];
    Py_ssize_t record_bound;    /* UNKEYED_RECORD_BOUND */
    Py_ssize_t handle_overhead; /* RECORD_HANDLE_OVERHEAD */
    /* For a batch subclass's answer, read as the pure lane reads it: SWITCH (given by
     * the binder), and APPENDED and FULL (the values the batch kernel answers) */
    PyObject *switch_code, *appended_code, *full_code;
    PyObject *str_snapshot, *str_topics, *str_try_reserve, *str_release;
} lane;

static inline PyObject *lane_slot(PyObject *obj, int which) {
    PyObject *value = *(PyObject **)((char *)obj + lane.offset[which]);
    if (!value) PyErr_Format(PyExc_AttributeError, "slot '%s' of the lane is not set",
                             lane_slot_names[which]);
    return value;
}

/* The current metadata entry of ``topic`` (a new reference, Py_None when absent), or NULL. */
static PyObject *current_topic_info(PyObject *client, PyObject *topic) {
    PyObject *snapshot = PyObject_GetAttr(client, lane.str_snapshot);
    if (!snapshot) return NULL;
    PyObject *topics = PyObject_GetAttr(snapshot, lane.str_topics);
    Py_DECREF(snapshot);
    if (!topics) return NULL;
    PyObject *info;
    if (PyDict_CheckExact(topics)) {
        info = PyDict_GetItemWithError(topics, topic);
        if (!info && PyErr_Occurred()) {
            Py_DECREF(topics);
            return NULL;
        }
        info = info ? Py_NewRef(info) : Py_NewRef(Py_None);
    } else {
        info = PyObject_CallMethod(topics, "get", "O", topic);
    }
    Py_DECREF(topics);
    return info;
}

/* Whether a record of bound ``size`` is no larger than ``max_size_obj``, compared
 * as the pure lanes compare (an int past 64 bits is still an int): 1, 0, or -1. */
static int fits(PyObject *max_size_obj, Py_ssize_t size) {
    int overflow;
    long long max_size = PyLong_AsLongLongAndOverflow(max_size_obj, &overflow);
    if (max_size == -1 && PyErr_Occurred()) return -1;
    return !(overflow < 0 || (!overflow && size > max_size));
}

/* pool.try_reserve(reserve): 1 reserved, 0 not, -1 an error. A compiled
 * BufferCounter (a BufferPool) is reserved from without a method call; any
 * other pool gets the call, as the pure lanes make it. */
static int pool_reserve(PyObject *pool, Py_ssize_t reserve) {
    if (lane.counter_type && PyObject_TypeCheck(pool, lane.counter_type))
        return counter_try_reserve(pool, (long long)reserve);
    PyObject *n = PyLong_FromSsize_t(reserve);
    if (!n) return -1;
    PyObject *call[2] = {pool, n};
    PyObject *got = PyObject_VectorcallMethod(lane.str_try_reserve, call,
                                              2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(n);
    if (!got) return -1;
    int truth = PyObject_IsTrue(got);
    Py_DECREF(got);
    return truth;
}

/* pool.release(reserve): the bytes reserved for a record not appended go back
 * through the pool, which grants them to a waiter they are enough for. With
 * ``keep_error`` the error being raised stays (unless release raises its own). */
static int pool_give_back(PyObject *pool, Py_ssize_t reserve, int keep_error) {
    PyObject *exc_type = NULL, *exc_value = NULL, *exc_tb = NULL;
    if (keep_error) PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *n = PyLong_FromSsize_t(reserve);
    PyObject *got = NULL;
    if (n) {
        PyObject *call[2] = {pool, n};
        got = PyObject_VectorcallMethod(lane.str_release, call, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
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

/* Whether an append's answer holds ``flag`` (SWITCH or FULL): from ``code`` for the
 * compiled batch's answer, or ``answer & flag_obj`` for a batch subclass's answer
 * (``answer`` not NULL), as the pure lane's ``appended & FLAG``. 1, 0, or -1. */
static int answer_has(PyObject *answer, int code, int flag, PyObject *flag_obj) {
    if (!answer) return (code & flag) != 0;
    PyObject *masked = PyNumber_And(answer, flag_obj);
    if (!masked) return -1;
    int truth = PyObject_IsTrue(masked);
    Py_DECREF(masked);
    return truth;
}

/* Calls ``callable()`` and drops its result: 0, or -1 on an error. */
static int call_dropped(PyObject *callable, PyObject *arg1, PyObject *arg2) {
    PyObject *got = arg1 ? PyObject_CallFunctionObjArgs(callable, arg1, arg2, NULL)
                         : PyObject_CallNoArgs(callable);
    if (!got) return -1;
    Py_DECREF(got);
    return 0;
}

/* lane.append(topic, value) -> the record's handle, or None (nothing appended). */
static PyObject *k_lane_append(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "append(topic, value)");
        return NULL;
    }
    if (!lane.lane_type || !PyObject_TypeCheck(self, lane.lane_type)) {
        PyErr_SetString(PyExc_TypeError, "append is a method of the lane class bound last");
        return NULL;
    }
    PyObject *topic = args[0], *value = args[1];
    PyObject *filling = lane_slot(self, L_FILLING);
    if (!filling) return NULL;
    if (!PyDict_CheckExact(filling)) {
        PyErr_SetString(PyExc_TypeError, "the lane's filling is not a dict");
        return NULL;
    }
    PyObject *entry = PyDict_GetItemWithError(filling, topic); /* borrowed */
    if (!entry) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if (entry == Py_None) Py_RETURN_NONE; /* as the pure lane: nothing is filling */
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "a filling entry is not a (weak reference, topic info) pair");
        return NULL;
    }
    /* Everything used across a call that may run Python code is held here,
     * so that a change of the dicts or the lane meanwhile frees nothing in use. */
    Py_INCREF(entry);
    PyObject *known = Py_NewRef(PyTuple_GET_ITEM(entry, 1));
    PyObject *batch = PyObject_CallNoArgs(PyTuple_GET_ITEM(entry, 0)); /* the weak reference */
    Py_DECREF(entry);
    PyObject *info = NULL, *fut = NULL, *answer = NULL, *result = NULL;
    PyObject *held[N_LANE] = {NULL};
    if (!batch) goto done;
    for (int i = 0; i < N_LANE; i++) {
        held[i] = lane_slot(self, i);
        if (!held[i]) goto done;
        Py_INCREF(held[i]);
    }
    Py_ssize_t vlen = PyBytes_CheckExact(value) ? PyBytes_GET_SIZE(value) : PyObject_Size(value);
    if (vlen < 0) goto done;
    Py_ssize_t size = vlen + lane.record_bound;
    Py_ssize_t reserve = size + lane.handle_overhead;
    if (batch == Py_None) goto refuse;
    info = current_topic_info(held[L_CLIENT], topic);
    if (!info) goto done;
    if (info != known) goto refuse;
    int small = fits(held[L_MAX_SIZE], size);
    if (small < 0) goto done;
    if (!small) goto refuse;
    int reserved = pool_reserve(held[L_POOL], reserve);
    if (reserved < 0) goto done;
    if (!reserved) goto refuse;
    int code = call_append_unkeyed(get_kernels_state(lane.module), batch, value, reserve, size, held[L_PRODUCED], topic,
                                   held[L_BATCH_SIZE], &answer, &fut);
    if (code <= 0) { /* an error, or the batch is full or sealed: the bytes go back */
        /* -2: the batch's answer could not be read (its record may be in
         * the batch, holding the bytes): the pure lanes keep them so. */
        if (code == -2 || pool_give_back(held[L_POOL], reserve, code < 0) < 0 || code < 0) goto done;
        goto refuse;
    }
    /* A batch subclass's answer is read once charged, as the pure lane reads it
     * (RichCompareBool's identity shortcut answers as != would: only 1 is itself). */
    int other = answer ? PyObject_RichCompareBool(answer, lane.appended_code, Py_NE)
                       : code != CODE_APPENDED;
    if (other < 0) goto done;
    if (other) { /* SWITCH, FULL or both */
        int full = answer_has(answer, code, CODE_FULL, lane.full_code);
        if (full < 0 || (full && call_dropped(held[L_WAKE], NULL, NULL) < 0)) goto done;
        int moving = answer_has(answer, code, CODE_SWITCH, lane.switch_code);
        if (moving < 0 || (moving && call_dropped(held[L_MOVE_ON], topic, known) < 0)) goto done;
    }
    result = Py_NewRef(fut);
    goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < N_LANE; i++) Py_XDECREF(held[i]);
    Py_DECREF(known);
    Py_XDECREF(batch);
    Py_XDECREF(info);
    Py_XDECREF(fut);
    Py_XDECREF(answer);
    return result;
}

/* ---- the keyed lane (engine/keyed_lane.py) ------------------------------ */

enum { K_CLIENT, K_DEQUES, K_MAX_SIZE, K_POOL, K_WAKE, N_KEYED };

static const char *const keyed_slot_names[N_KEYED] = {
    "client", "deques", "max_size", "pool", "wake",
};

static struct {
    PyTypeObject *lane_type;
    Py_ssize_t offset[N_KEYED];
    Py_ssize_t record_bound;    /* KEYED_RECORD_BOUND */
    Py_ssize_t handle_overhead; /* RECORD_HANDLE_OVERHEAD */
    PyObject *str_partitions, *str_tps;
} keyed;

/* keyed_lane.append(topic, key, value) -> the record's handle, or None (nothing appended). */
static PyObject *k_keyed_append(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "append(topic, key, value)");
        return NULL;
    }
    if (!keyed.lane_type || !PyObject_TypeCheck(self, keyed.lane_type)) {
        PyErr_SetString(PyExc_TypeError, "append is a method of the keyed lane class bound last");
        return NULL;
    }
    PyObject *topic = args[0], *key = args[1], *value = args[2];
    PyObject *held[N_KEYED] = {NULL};
    PyObject *info = NULL, *partitions = NULL, *tps = NULL, *batch = NULL, *fut = NULL;
    PyObject *result = NULL;
    Py_buffer kview;
    int has_kview = 0;
    /* Held: the calls below may run Python code that changes the lane. */
    for (int i = 0; i < N_KEYED; i++) {
        held[i] = *(PyObject **)((char *)self + keyed.offset[i]);
        if (!held[i]) {
            PyErr_Format(PyExc_AttributeError, "slot '%s' of the keyed lane is not set",
                         keyed_slot_names[i]);
            goto done;
        }
        Py_INCREF(held[i]);
    }
    info = current_topic_info(held[K_CLIENT], topic);
    if (!info) goto done;
    if (info == Py_None) goto refuse;
    partitions = PyObject_GetAttr(info, keyed.str_partitions);
    if (!partitions) goto done;
    Py_ssize_t count = PyObject_Size(partitions);
    if (count < 0) goto done;
    if (count == 0 || count > INT32_MAX) goto refuse; /* Java's int partition count */
    if (PyObject_GetBuffer(key, &kview, PyBUF_SIMPLE) < 0) goto done;
    has_kview = 1;
    Py_ssize_t klen = kview.len;
    /* Java's BuiltInPartitioner.partitionForKey (partitioner.partition_for_key) */
    int32_t partition = partition_for_key_buffer((const unsigned char *)kview.buf, klen, (int32_t)count);
    PyBuffer_Release(&kview);
    has_kview = 0;
    tps = PyObject_GetAttr(info, keyed.str_tps);
    if (!tps) goto done;
    PyObject *tp = PySequence_GetItem(tps, (Py_ssize_t)partition);
    if (!tp) goto done;
    PyObject *deques = held[K_DEQUES];
    PyObject *dq = PyDict_CheckExact(deques) ? Py_XNewRef(PyDict_GetItemWithError(deques, tp))
                                             : PyObject_CallMethod(deques, "get", "O", tp);
    Py_DECREF(tp);
    if (!dq) {
        if (PyErr_Occurred()) goto done;
        goto refuse;
    }
    int nonempty = PyObject_IsTrue(dq);
    if (nonempty > 0) batch = PySequence_GetItem(dq, -1);
    Py_DECREF(dq);
    if (nonempty < 0 || (nonempty && !batch)) goto done;
    if (!nonempty) goto refuse;
    Py_ssize_t vlen = PyBytes_CheckExact(value) ? PyBytes_GET_SIZE(value) : PyObject_Size(value);
    if (vlen < 0) goto done;
    Py_ssize_t size = klen + vlen + keyed.record_bound;
    Py_ssize_t reserve = size + keyed.handle_overhead;
    int small = fits(held[K_MAX_SIZE], size);
    if (small < 0) goto done;
    if (!small) goto refuse;
    int reserved = pool_reserve(held[K_POOL], reserve);
    if (reserved < 0) goto done;
    if (!reserved) goto refuse;
    int code = call_append_keyed(get_kernels_state(lane.module), batch, key, value, reserve, size, &fut);
    if (code <= 0) { /* an error, or the batch is full, sealed or no longer open */
        /* -2: the batch's answer could not be read (its record may be in
         * the batch, holding the bytes): the pure lanes keep them so. */
        if (code == -2 || pool_give_back(held[K_POOL], reserve, code < 0) < 0 || code < 0) goto done;
        goto refuse;
    }
    if ((code & CODE_FULL) && call_dropped(held[K_WAKE], NULL, NULL) < 0) goto done;
    result = Py_NewRef(fut);
    goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    if (has_kview) PyBuffer_Release(&kview);
    for (int i = 0; i < N_KEYED; i++) Py_XDECREF(held[i]);
    Py_XDECREF(info);
    Py_XDECREF(partitions);
    Py_XDECREF(tps);
    Py_XDECREF(batch);
    Py_XDECREF(fut);
    return result;
}

static PyMethodDef keyed_append_def = {
    "append", (PyCFunction)(void (*)(void))k_keyed_append, METH_FASTCALL,
    "append(topic, key, value) -> the record's handle, or None when the full path must decide",
};

static PyMethodDef lane_append_def = {
    "append", (PyCFunction)(void (*)(void))k_lane_append, METH_FASTCALL,
    "append(topic, value) -> the record's handle, or None when the full path must decide",
};

/* The attribute names both lanes read, interned once. */
static int intern_lane_names(void) {
    if (lane.str_snapshot) return 0;
    lane.str_snapshot = PyUnicode_InternFromString("snapshot");
    lane.str_topics = PyUnicode_InternFromString("topics");
    lane.str_try_reserve = PyUnicode_InternFromString("try_reserve");
    lane.str_release = PyUnicode_InternFromString("release");
    return lane.str_snapshot && lane.str_topics && lane.str_try_reserve && lane.str_release ? 0 : -1;
}

/* bind_lane_layout(lane_type, record_bound, handle_overhead, switch_code) -> the append method. */
static PyObject *k_bind_lane_layout(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind_lane_layout(lane_type, record_bound, handle_overhead, switch_code)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    Py_ssize_t offset[N_LANE];
    if (slot_offsets(type, lane_slot_names, N_LANE, offset) < 0) return NULL;
    Py_ssize_t bound = PyLong_AsSsize_t(args[1]);
    if (bound == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t overhead = PyLong_AsSsize_t(args[2]);
    if (overhead == -1 && PyErr_Occurred()) return NULL;
    if (intern_lane_names() < 0) return NULL;
    if (!lane.appended_code) {
        lane.appended_code = PyLong_FromLong(CODE_APPENDED);
        if (!lane.appended_code) return NULL;
    }
    if (!lane.full_code) {
        lane.full_code = PyLong_FromLong(CODE_FULL);
        if (!lane.full_code) return NULL;
    }
    PyObject *method = PyDescr_NewMethod(type, &lane_append_def);
    if (!method) return NULL;
    memcpy(lane.offset, offset, sizeof offset);
    Py_XSETREF(lane.counter_type, (PyTypeObject *)Py_NewRef(get_kernels_state(module)->counter_type));
    Py_XSETREF(lane.module, Py_NewRef(module));
    lane.record_bound = bound;
    lane.handle_overhead = overhead;
    Py_INCREF(args[3]);
    Py_XSETREF(lane.switch_code, args[3]);
    Py_INCREF(type);
    Py_XSETREF(lane.lane_type, type);
    return method;
}

static PyMethodDef bind_lane_def = {
    "bind_lane_layout", (PyCFunction)(void (*)(void))k_bind_lane_layout, METH_FASTCALL,
    "bind_lane_layout(lane_type, record_bound, handle_overhead, switch_code) -> the lane's append",
};

/* bind_keyed_lane_layout(lane_type, record_bound, handle_overhead) -> the append method. */
static PyObject *k_bind_keyed_lane_layout(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind_keyed_lane_layout(lane_type, record_bound, handle_overhead)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    Py_ssize_t offset[N_KEYED];
    if (slot_offsets(type, keyed_slot_names, N_KEYED, offset) < 0) return NULL;
    Py_ssize_t bound = PyLong_AsSsize_t(args[1]);
    if (bound == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t overhead = PyLong_AsSsize_t(args[2]);
    if (overhead == -1 && PyErr_Occurred()) return NULL;
    if (intern_lane_names() < 0) return NULL;
    if (!keyed.str_partitions) {
        keyed.str_partitions = PyUnicode_InternFromString("partitions");
        keyed.str_tps = PyUnicode_InternFromString("tps");
        if (!keyed.str_partitions || !keyed.str_tps) return NULL;
    }
    PyObject *method = PyDescr_NewMethod(type, &keyed_append_def);
    if (!method) return NULL;
    memcpy(keyed.offset, offset, sizeof offset);
    keyed.record_bound = bound;
    keyed.handle_overhead = overhead;
    Py_INCREF(type);
    Py_XSETREF(keyed.lane_type, type);
    Py_XSETREF(lane.counter_type, (PyTypeObject *)Py_NewRef(get_kernels_state(module)->counter_type));
    Py_XSETREF(lane.module, Py_NewRef(module));
    return method;
}

static PyMethodDef bind_keyed_lane_def = {
    "bind_keyed_lane_layout", (PyCFunction)(void (*)(void))k_bind_keyed_lane_layout, METH_FASTCALL,
    "bind_keyed_lane_layout(lane_type, record_bound, handle_overhead) -> the keyed lane's append",
};

/* ---- step 1 of enqueue (engine/shortcut.py) ------------------------------ */

enum { S_COUNTDOWN, S_KEYED_LANE, S_LANE, S_LOOP_MARK, S_PLAIN, S_TOPICS_SEEN, N_SHORTCUT };

static const char *const shortcut_slot_names[N_SHORTCUT] = {
    "countdown", "keyed_lane", "lane", "loop_mark", "plain", "topics_seen",
};

static struct {
    PyTypeObject *type;
    Py_ssize_t offset[N_SHORTCUT];
    PyObject *str_thread_id, *str_append;
    unsigned long ident;   /* the thread whose id ident_obj holds */
    PyObject *ident_obj;   /* threading.get_ident() of that thread */
} shortcut;

/* threading.get_ident() as an int (a new reference), made once per thread in turn. */
static PyObject *current_ident(void) {
    unsigned long ident = PyThread_get_thread_ident();
    if (!shortcut.ident_obj || shortcut.ident != ident) {
        PyObject *obj = PyLong_FromUnsignedLong(ident);
        if (!obj) return NULL;
        Py_XSETREF(shortcut.ident_obj, obj);
        shortcut.ident = ident;
    }
    return Py_NewRef(shortcut.ident_obj);
}

/* ``countdown <= 0`` (1, 0, or -1 on an error), as Python compares. */
static int counted_down(PyObject *countdown) {
    if (PyLong_CheckExact(countdown)) {
        int overflow;
        long long left = PyLong_AsLongLongAndOverflow(countdown, &overflow);
        if (left == -1 && PyErr_Occurred()) return -1;
        return overflow ? overflow < 0 : left <= 0;
    }
    PyObject *zero = PyLong_FromLong(0);
    if (!zero) return -1;
    int done = PyObject_RichCompareBool(countdown, zero, Py_LE);
    Py_DECREF(zero);
    return done;
}

/* The shortcut's slot ``which`` (a new reference), or NULL with Python's own error for an
 * unset slot. Read when the pure step reads it, not before: code run in between (a mark's
 * property, a comparison) may change the shortcut. */
static PyObject *shortcut_slot(PyObject *self, int which) {
    PyObject *value = *(PyObject **)((char *)self + shortcut.offset[which]);
    if (!value) {
        PyErr_Format(PyExc_AttributeError, "'%.200s' object has no attribute '%s'",
                     Py_TYPE(self)->tp_name, shortcut_slot_names[which]);
        return NULL;
    }
    return Py_NewRef(value);
}

/* ``a op b`` as Python's operator evaluates it (no identity shortcut): 1, 0, or -1. */
static int compare(PyObject *a, PyObject *b, int op) {
    PyObject *answer = PyObject_RichCompare(a, b, op);
    if (!answer) return -1;
    int truth = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    return truth;
}

/* shortcut.take(topic, value, key, partition, timestamp_ms, headers) -> a handle or None.
 * Each step as _take_pure does it, in its order: the same answers, calls and errors. */
static PyObject *k_shortcut_take(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "take(topic, value, key, partition, timestamp_ms, headers)");
        return NULL;
    }
    if (!shortcut.type || !PyObject_TypeCheck(self, shortcut.type)) {
        PyErr_SetString(PyExc_TypeError, "take is a method of the shortcut class bound last");
        return NULL;
    }
    PyObject *topic = args[0], *value = args[1], *key = args[2];
    PyObject *obj = NULL, *less = NULL, *fut = NULL, *result = NULL;
    int rc; /* 1 go on, 0 refuse, -1 an error was raised */
    /* self.loop_mark._thread_id != threading.get_ident() */
    obj = shortcut_slot(self, S_LOOP_MARK);
    if (!obj) goto done;
    PyObject *thread_id = PyObject_GetAttr(obj, shortcut.str_thread_id);
    Py_CLEAR(obj);
    if (!thread_id) goto done;
    PyObject *ident = current_ident();
    rc = ident ? compare(thread_id, ident, Py_NE) : -1;
    Py_DECREF(thread_id);
    Py_XDECREF(ident);
    if (rc != 0) goto stop_inverted;
    /* self.countdown <= 0 */
    obj = shortcut_slot(self, S_COUNTDOWN);
    if (!obj) goto done;
    rc = counted_down(obj);
    Py_CLEAR(obj);
    if (rc != 0) goto stop_inverted;
    /* not self.plain */
    obj = shortcut_slot(self, S_PLAIN);
    if (!obj) goto done;
    rc = PyObject_IsTrue(obj);
    Py_CLEAR(obj);
    if (rc <= 0) goto stop;
    if (args[3] != Py_None || args[5] != Py_None || args[4] != Py_None || !PyBytes_CheckExact(value))
        goto refuse;
    /* left = self.countdown - 1, made before anything is appended: once a lane has
     * appended the record, nothing may fail before its handle is returned. */
    obj = shortcut_slot(self, S_COUNTDOWN);
    if (!obj) goto done;
    PyObject *one = PyLong_FromLong(1);
    less = one ? PyNumber_Subtract(obj, one) : NULL;
    Py_XDECREF(one);
    Py_CLEAR(obj);
    if (!less) goto done;
    if (key == Py_None) {
        obj = shortcut_slot(self, S_LANE);
        if (!obj) goto done;
        if (lane.lane_type && Py_IS_TYPE(obj, lane.lane_type)) {
            fut = k_lane_append(obj, args, 2);
        } else {
            PyObject *call[3] = {obj, topic, value};
            fut = PyObject_VectorcallMethod(shortcut.str_append, call,
                                            3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
        Py_CLEAR(obj);
    } else if (PyBytes_CheckExact(key)) {
        obj = shortcut_slot(self, S_KEYED_LANE);
        if (!obj) goto done;
        int none = obj == Py_None;
        Py_CLEAR(obj);
        if (none) goto refuse;
        obj = shortcut_slot(self, S_TOPICS_SEEN);
        if (!obj) goto done;
        rc = PySequence_Contains(obj, topic); /* as ``in``: a set topic is looked up as a frozenset */
        Py_CLEAR(obj);
        if (rc <= 0) goto stop;
        obj = shortcut_slot(self, S_KEYED_LANE);
        if (!obj) goto done;
        PyObject *call[3] = {topic, key, value};
        if (keyed.lane_type && Py_IS_TYPE(obj, keyed.lane_type)) {
            fut = k_keyed_append(obj, call, 3);
        } else {
            PyObject *with_self[4] = {obj, topic, key, value};
            fut = PyObject_VectorcallMethod(shortcut.str_append, with_self,
                                            4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
        Py_CLEAR(obj);
    } else {
        goto refuse;
    }
    if (!fut) goto done;
    if (fut != Py_None) {
        PyObject **slot = (PyObject **)((char *)self + shortcut.offset[S_COUNTDOWN]);
        Py_XSETREF(*slot, less); /* self.countdown = left: a slot's store cannot fail */
        less = NULL;
    }
    result = fut;
    fut = NULL;
    goto done;
stop_inverted: /* rc was "refuse" (1) or an error (-1) */
    rc = rc > 0 ? 0 : -1;
stop:
    if (rc < 0) goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(fut);
    Py_XDECREF(less);
    return result;
}

static PyMethodDef shortcut_take_def = {
    "take", (PyCFunction)(void (*)(void))k_shortcut_take, METH_FASTCALL,
    "take(topic, value, key, partition, timestamp_ms, headers) -> the record's handle, or None "
    "when the full path of enqueue must decide",
};

/* bind_shortcut_layout(shortcut_type, unkeyed_lane_type, keyed_lane_type) -> the take method.
 * The lane types must be the ones bound last: their appends are called directly. */
static PyObject *k_bind_shortcut_layout(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind_shortcut_layout(shortcut_type, unkeyed_lane_type, keyed_lane_type)");
        return NULL;
    }
    if ((PyObject *)lane.lane_type != args[1] || (PyObject *)keyed.lane_type != args[2]) {
        PyErr_SetString(PyExc_TypeError, "bind the lanes' layouts first, with these lane types");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    Py_ssize_t offset[N_SHORTCUT];
    for (int i = 0; i < N_SHORTCUT; i++) {
        offset[i] = slot_offset(type, shortcut_slot_names[i], i == S_COUNTDOWN);
        if (offset[i] < 0) return NULL;
    }
    if (!shortcut.str_thread_id) shortcut.str_thread_id = PyUnicode_InternFromString("_thread_id");
    if (!shortcut.str_append) shortcut.str_append = PyUnicode_InternFromString("append");
    if (!shortcut.str_thread_id || !shortcut.str_append) return NULL;
    PyObject *method = PyDescr_NewMethod(type, &shortcut_take_def);
    if (!method) return NULL;
    memcpy(shortcut.offset, offset, sizeof offset);
    Py_INCREF(type);
    Py_XSETREF(shortcut.type, type);
    return method;
}

static PyMethodDef bind_shortcut_def = {
    "bind_shortcut_layout", (PyCFunction)(void (*)(void))k_bind_shortcut_layout, METH_FASTCALL,
    "bind_shortcut_layout(shortcut_type, unkeyed_lane_type, keyed_lane_type) -> the shortcut's take",
};

int add_lane_kernel(PyObject *module) {
    if (add_module_function(module, &bind_lane_def) < 0 ||
        add_module_function(module, &bind_keyed_lane_def) < 0) return -1;
    return add_module_function(module, &bind_shortcut_def);
}
