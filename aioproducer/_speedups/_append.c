/* The unkeyed shortcut's append, compiled: ProducerBatch.append_unkeyed.
 *
 * The reference is ProducerBatch._append_unkeyed_pure (aioproducer/engine/batch.py):
 * one record without key or headers appended to an open batch with its future
 * (RecordBatchBuilder.append's encoding and room check, ProducerBatch.try_append's
 * bookkeeping), then counted for the sticky partitioner (engine/partitioner.py's
 * time_to_switch rule); the answer says whether it left the batch full
 * (ProducerBatch.is_full), for the lane to wake the sender.
 * tests/unit/test_kernels_equal.py checks that both leave the same bytes,
 * lists, counters and answers on random input.
 *
 * The batch and its builder stay Python classes with __slots__ (weak references,
 * subclassing and the pure path keep working). bind_batch_layout(), called once
 * when aioproducer.engine.batch is imported, reads where each slot this kernel
 * uses sits in an instance (a slot is a PyObject * at a fixed offset, the same in
 * every subclass: CPython's member descriptors), so that the kernel reaches the
 * fields as a C struct's, without an attribute lookup each. It returns the
 * kernel as a method descriptor of the batch class, as a builtin type's methods
 * are: a call costs no bound method and checks the instance's type.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include <time.h>

#include "_outcome.h"
#include "_partitioning.h"
#include "_varint.h"

/* The slots read or written, in the order of slot_names. */
enum {
    B_STATE, B_BUILDER, B_OUTCOME, B_RESERVED, B_MAX_RECORD_SIZE, B_BATCH_SIZE,
    R_SEALED, R_RECORD_COUNT, R_BASE_TIMESTAMP, R_MAX_TIMESTAMP, R_BUF, R_BATCH_SIZE,
    N_SLOTS
};
#define FIRST_BUILDER_SLOT R_SEALED

static const char *slot_names[N_SLOTS] = {
    "state", "builder", "outcome", "reserved", "max_record_size", "batch_size",
    "_sealed", "record_count", "base_timestamp", "max_timestamp", "_buf", "batch_size",
};

static struct {
    PyTypeObject *batch_type;   /* ProducerBatch (a strong reference once bound) */
    PyTypeObject *builder_type; /* RecordBatchBuilder */
    PyObject *open_state;       /* BatchState.OPEN */
    PyTypeObject *outcome_type; /* BatchOutcome: the batch's outcome makes the handles */
    Py_ssize_t offset[N_SLOTS];
} layout;

static inline PyObject **slot(PyObject *obj, int which) {
    return (PyObject **)((char *)obj + layout.offset[which]);
}

/* A slot's value (borrowed), or NULL with AttributeError when it was never set. */
static inline PyObject *get_slot(PyObject *obj, int which) {
    PyObject *value = *slot(obj, which);
    if (!value) PyErr_Format(PyExc_AttributeError, "slot '%s' of %R is not set",
                             slot_names[which], (PyObject *)Py_TYPE(obj));
    return value;
}

/* Stores ``value`` (a new reference, stolen) in a slot. */
static inline void set_slot(PyObject *obj, int which, PyObject *value) {
    PyObject *old = *slot(obj, which);
    *slot(obj, which) = value;
    Py_XDECREF(old);
}

static inline int get_ssize(PyObject *obj, int which, Py_ssize_t *out) {
    PyObject *value = get_slot(obj, which);
    if (!value) return -1;
    *out = PyLong_AsSsize_t(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static inline int get_int64(PyObject *obj, int which, long long *out) {
    PyObject *value = get_slot(obj, which);
    if (!value) return -1;
    /* Not PyLong_AsLongLong: for an int of more than one digit (a timestamp
     * in ms has two) it goes through _PyLong_AsByteArray. */
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "slot '%s' does not fit in 64 bits", slot_names[which]);
        return -1;
    }
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Milliseconds since the epoch now: time.time_ns() // 1_000_000 without the
 * Python int of nanoseconds and its division (CPython reads the same clock). */
int now_ms(long long *out) {
#if defined(CLOCK_REALTIME)
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) == 0) {
        *out = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
        return 0;
    }
#endif
    PyObject *time = PyImport_ImportModule("time");
    if (!time) return -1;
    PyObject *ns = PyObject_CallMethod(time, "time_ns", NULL);
    Py_DECREF(time);
    if (!ns) return -1;
    long long value = PyLong_AsLongLong(ns);
    Py_DECREF(ns);
    if (value == -1 && PyErr_Occurred()) return -1;
    *out = value / 1000000; /* after the epoch: truncation is the floor */
    return 0;
}

/* What the appends answer: engine/batch.py's REFUSED, APPENDED and SWITCH, to which
 * FULL is added when the record left its batch full (is_full(): the sender may send
 * it now, Java's batchIsFull). */
enum { CODE_REFUSED = 0, CODE_APPENDED = 1, CODE_SWITCH = 2, CODE_FULL = 4 };

/* The int of the last "now" stamped: the records of one millisecond (hundreds
 * in a tight loop) share it instead of allocating one each. */
static struct {
    long long ms;
    PyObject *obj;
} last_now;

/* batch.append_unkeyed(timestamp_ms, value, reserve, bound, produced, topic, limit) -> int
 *
 * 0: refused (the batch is not open, or the record would take it past its
 * batch_size; the first record always fits), nothing changed. 1: appended. 2:
 * appended, and the sticky partitioner should move on. Either plus 4 (FULL)
 * when the batch's buffer reached the batch's own batch_size (is_full()). On
 * an error nothing is changed either.
 *
 * append_record() below takes the numbers as C integers and answers the code
 * (-1 on an error): the lanes (_lane.c) call it without making ints of them,
 * with ``ts_arg`` None for "now" (as time.time_ns() // 1_000_000, the same
 * clock) and ``handle`` not NULL: the record's handle is made there, before
 * anything changes (its delta is the record count before the append), and
 * left in *handle when the record is appended.
 * ``bound_obj`` is ``bound`` as an int, or NULL (made if it is kept). It also
 * appends a keyed record (``key`` bytes-like; NULL or None is a null key) and,
 * with ``produced`` NULL, counts nothing for the sticky partitioner (a keyed
 * record: ProducerBatch.append_keyed, whose reference is _append_keyed_pure). */
static int append_exported(PyObject *self, PyObject *ts_arg, Py_buffer *kview, Py_buffer *vview,
                           Py_ssize_t reserve, Py_ssize_t bound, PyObject *bound_obj,
                           PyObject *produced, PyObject *topic, Py_ssize_t limit,
                           PyObject **handle) {
    PyObject *state = get_slot(self, B_STATE);
    if (!state) return -1;
    if (state != layout.open_state) return CODE_REFUSED;
    PyObject *builder = get_slot(self, B_BUILDER);
    if (!builder) return -1;
    if (!PyObject_TypeCheck(builder, layout.builder_type)) {
        PyErr_SetString(PyExc_TypeError, "the batch's builder is not a RecordBatchBuilder");
        return -1;
    }
    PyObject *sealed = get_slot(builder, R_SEALED);
    if (!sealed) return -1;
    int is_sealed = PyObject_IsTrue(sealed);
    if (is_sealed < 0) return -1;
    if (is_sealed) {
        PyErr_SetString(PyExc_RuntimeError, "cannot append to a record batch after build()");
        return -1;
    }
    Py_ssize_t count, batch_size, full_at, reserved, max_record_size;
    long long base_ts = 0, max_ts = 0;
    if (get_ssize(builder, R_RECORD_COUNT, &count) < 0) return -1;
    if (count && (get_int64(builder, R_BASE_TIMESTAMP, &base_ts) < 0 ||
                  get_int64(builder, R_MAX_TIMESTAMP, &max_ts) < 0)) return -1;
    long long ts;
    if (ts_arg == Py_None) {
        if (now_ms(&ts) < 0) return -1;
    } else {
        ts = PyLong_AsLongLong(ts_arg);
        if (ts == -1 && PyErr_Occurred()) return -1;
    }
    if (produced && !PyDict_Check(produced)) {
        PyErr_SetString(PyExc_TypeError, "produced must be a dict");
        return -1;
    }
    PyObject *buf = get_slot(builder, R_BUF);
    if (!buf) return -1;
    if (!PyByteArray_Check(buf)) {
        PyErr_SetString(PyExc_TypeError, "the builder's buffer is not a bytearray");
        return -1;
    }
    PyObject *outcome = NULL;
    if (handle) {
        outcome = get_slot(self, B_OUTCOME);
        if (!outcome) return -1;
        if (!layout.outcome_type || !Py_IS_TYPE(outcome, layout.outcome_type)) {
            PyErr_SetString(PyExc_TypeError, "the batch's outcome is not a BatchOutcome");
            return -1;
        }
    }
    /* The builder's batch_size bounds the buffer; the batch's says when it is full. */
    if (get_ssize(builder, R_BATCH_SIZE, &batch_size) < 0 ||
        get_ssize(self, B_BATCH_SIZE, &full_at) < 0 ||
        get_ssize(self, B_RESERVED, &reserved) < 0 ||
        get_ssize(self, B_MAX_RECORD_SIZE, &max_record_size) < 0) return -1;
    int has_value = vview != NULL, has_key = kview != NULL;
    Py_ssize_t vlen = has_value ? vview->len : 0;
    Py_ssize_t klen = has_key ? kview->len : 0;
    PyObject *seen = NULL;
    Py_ssize_t before = 0;
    if (produced) {
        seen = PyDict_GetItemWithError(produced, topic); /* borrowed */
        if (seen && PyLong_CheckExact(seen)) before = PyLong_AsSsize_t(seen);
        else if (seen) before = -1, PyErr_SetString(PyExc_TypeError, "produced counts must be ints");
    }
    if ((produced && !seen && PyErr_Occurred()) || (before == -1 && PyErr_Occurred())) {
        return -1;
    }
    /* attributes, timestamp delta, offset delta, key, value, no headers */
    uint64_t ts_zz = count ? zigzag64((int64_t)((uint64_t)ts - (uint64_t)base_ts)) : 0;
    uint64_t off = zigzag64(count);
    Py_ssize_t size = 1 + uvarint_size(ts_zz) + uvarint_size(off) +
                      (has_key ? uvarint_size(zigzag64(klen)) + klen : 1) +
                      (has_value ? uvarint_size(zigzag64(vlen)) + vlen : 1) + 1;
    Py_ssize_t total = uvarint_size(zigzag64(size)) + size;
    Py_ssize_t old = PyByteArray_GET_SIZE(buf);
    if (count && old + total > batch_size) {
        return CODE_REFUSED;
    }
    Py_ssize_t after = before + bound;
    int switch_due = produced && time_to_switch(after, limit, old + total, bound);
    /* Every new object first: past the buffer's resize nothing can fail. The
     * handle is made from C integers and runs no Python code. */
    PyObject *record_handle = NULL;
    if (handle) {
        /* pack_sizes(key size or -1, value size or -1) */
        unsigned long long sizes = ((unsigned long long)(has_key ? klen + 1 : 0) << 32) |
                                   (unsigned long long)(has_value ? vlen + 1 : 0);
        record_handle = make_record_handle(outcome, count, ts, sizes);
        if (!record_handle) return -1;
    }
    PyObject *count_obj = PyLong_FromSsize_t(count + 1);
    PyObject *reserved_obj = PyLong_FromSsize_t(reserved + reserve);
    PyObject *after_obj = produced ? PyLong_FromSsize_t(after) : Py_NewRef(Py_None);
    /* The batch's largest record bound, when this one is larger. */
    PyObject *largest_obj = NULL;
    int largest_failed = 0;
    if (bound > max_record_size) {
        largest_obj = bound_obj ? Py_NewRef(bound_obj) : PyLong_FromSsize_t(bound);
        largest_failed = !largest_obj;
    }
    PyObject *ts_obj;
    if (ts_arg != Py_None) {
        ts_obj = Py_NewRef(ts_arg);
    } else if (last_now.obj && last_now.ms == ts) {
        ts_obj = Py_NewRef(last_now.obj); /* records of one millisecond share one int */
    } else {
        ts_obj = PyLong_FromLongLong(ts);
        if (ts_obj) {
            Py_XSETREF(last_now.obj, Py_NewRef(ts_obj));
            last_now.ms = ts;
        }
    }
    int result = -1;
    if (!count_obj || !reserved_obj || !after_obj || !ts_obj || largest_failed) goto done;
    /* The dict drops its reference to ``seen`` when it takes the new count:
     * hold one, to put it back if the resize below fails. */
    Py_XINCREF(seen);
    if (produced && PyDict_SetItem(produced, topic, after_obj) < 0) {
        Py_XDECREF(seen);
        goto done;
    }
    if (resize_growing(buf, old + total, batch_size) < 0) {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        if (produced) {
            if (seen) PyDict_SetItem(produced, topic, seen); /* an existing key: cannot fail */
            else PyDict_DelItem(produced, topic);
        }
        Py_XDECREF(seen);
        PyErr_Restore(exc_type, exc_value, exc_tb);
        goto done;
    }
    Py_XDECREF(seen);
    char *p = PyByteArray_AS_STRING(buf) + old;
    p = put_uvarint(p, zigzag64(size));
    *p++ = 0; /* attributes: always 0 in a producer's record */
    p = put_uvarint(p, ts_zz);
    p = put_uvarint(p, off);
    if (has_key) {
        p = put_uvarint(p, zigzag64(klen));
        memcpy(p, kview->buf, klen);
        p += klen;
    } else {
        *p++ = 1; /* null key */
    }
    if (has_value) {
        p = put_uvarint(p, zigzag64(vlen));
        memcpy(p, vview->buf, vlen);
        p += vlen;
    } else {
        *p++ = 1;
    }
    *p = 0; /* no headers */
    set_slot(builder, R_RECORD_COUNT, count_obj);
    count_obj = NULL;
    if (!count) {
        Py_INCREF(ts_obj);
        set_slot(builder, R_BASE_TIMESTAMP, ts_obj);
    }
    if (!count || ts > max_ts) {
        Py_INCREF(ts_obj);
        set_slot(builder, R_MAX_TIMESTAMP, ts_obj);
    }
    set_slot(self, B_RESERVED, reserved_obj);
    reserved_obj = NULL;
    if (largest_obj) {
        set_slot(self, B_MAX_RECORD_SIZE, largest_obj);
        largest_obj = NULL;
    }
    result = (switch_due ? CODE_SWITCH : CODE_APPENDED) +
             (old + total >= full_at ? CODE_FULL : 0); /* is_full(): the batch is open */
    if (handle) {
        *handle = record_handle;
        record_handle = NULL;
    }
done:
    Py_XDECREF(record_handle);
    Py_XDECREF(count_obj);
    Py_XDECREF(reserved_obj);
    Py_XDECREF(after_obj);
    Py_XDECREF(largest_obj);
    Py_XDECREF(ts_obj);
    return result;
}

/* The record's key and value buffers are exported before anything of the batch
 * is read: exporting may run Python code (a __buffer__ of Python 3.12+), which
 * must not run while borrowed slots and counters read from the batch are in use. */
static int append_record(PyObject *self, PyObject *ts_arg, PyObject *key, PyObject *value,
                         Py_ssize_t reserve, Py_ssize_t bound, PyObject *bound_obj,
                         PyObject *produced, PyObject *topic, Py_ssize_t limit,
                         PyObject **handle) {
    if (!layout.batch_type || !PyObject_TypeCheck(self, layout.batch_type)) {
        PyErr_SetString(PyExc_TypeError, "append_unkeyed is a method of the batch class bound last");
        return -1;
    }
    Py_buffer vview, kview;
    int has_value = value != Py_None;
    int has_key = key != NULL && key != Py_None;
    if (has_value && PyObject_GetBuffer(value, &vview, PyBUF_SIMPLE) < 0) return -1;
    if (has_key && PyObject_GetBuffer(key, &kview, PyBUF_SIMPLE) < 0) {
        if (has_value) PyBuffer_Release(&vview);
        return -1;
    }
    int rc = append_exported(self, ts_arg, has_key ? &kview : NULL, has_value ? &vview : NULL,
                             reserve, bound, bound_obj, produced, topic, limit, handle);
    if (has_key) PyBuffer_Release(&kview);
    if (has_value) PyBuffer_Release(&vview);
    return rc;
}

/* For the method wrappers: 1 when ``self`` is a bound batch no longer open (the
 * append refuses whatever its arguments, as the pure methods do), 0 when open,
 * -1 with an error. */
static int not_open(PyObject *self) {
    if (!layout.batch_type || !PyObject_TypeCheck(self, layout.batch_type)) {
        PyErr_SetString(PyExc_TypeError, "append_unkeyed is a method of the batch class bound last");
        return -1;
    }
    PyObject *state = get_slot(self, B_STATE);
    if (!state) return -1;
    return state != layout.open_state;
}

/* The Python-level methods take a timestamp (an int), as their pure twins do. */
static int check_timestamp(PyObject *ts) {
    if (PyLong_Check(ts)) return 0;
    PyErr_Format(PyExc_TypeError, "timestamp_ms must be an int, not %.100s", Py_TYPE(ts)->tp_name);
    return -1;
}

static PyObject *k_append_unkeyed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "append_unkeyed takes 7 arguments");
        return NULL;
    }
    int closed = not_open(self);
    if (closed) return closed < 0 ? NULL : PyLong_FromLong(CODE_REFUSED);
    if (check_timestamp(args[0]) < 0) return NULL;
    Py_ssize_t reserve = PyLong_AsSsize_t(args[2]);
    if (reserve == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t bound = PyLong_AsSsize_t(args[3]);
    if (bound == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(args[6]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    int code = append_record(self, args[0], NULL, args[1], reserve, bound, args[3], args[4],
                             args[5], limit, NULL);
    return code < 0 ? NULL : PyLong_FromLong(code);
}

/* For a batch not of exactly the bound class (its methods may be overridden): the
 * handle made through Python, as the pure lanes make it, before the append:
 * batch.outcome.handle(batch.record_count, ts, sizes). */
static PyObject *handle_by_method(PyObject *batch, PyObject *ts_obj, unsigned long long sizes) {
    PyObject *outcome = PyObject_GetAttrString(batch, "outcome");
    if (!outcome) return NULL;
    PyObject *count = PyObject_GetAttrString(batch, "record_count");
    PyObject *sizes_obj = count ? PyLong_FromUnsignedLongLong(sizes) : NULL;
    PyObject *handle = NULL;
    if (sizes_obj) handle = PyObject_CallMethod(outcome, "handle", "OOO", count, ts_obj, sizes_obj);
    Py_DECREF(outcome);
    Py_XDECREF(count);
    Py_XDECREF(sizes_obj);
    return handle;
}

/* Whether the lanes may call the kernel directly on ``batch``: exactly the bound
 * class, whose outcome is exactly the compiled BatchOutcome (a batch of the pure
 * path, where the kernels were bound all the same, makes pure handles). */
static int direct(PyObject *batch) {
    if (!layout.batch_type || !Py_IS_TYPE(batch, layout.batch_type)) return 0;
    PyObject *outcome = *slot(batch, B_OUTCOME);
    return outcome && layout.outcome_type && Py_IS_TYPE(outcome, layout.outcome_type);
}

/* "now" as an int, for a method call (0 or -1 with an error). */
static PyObject *now_obj(void) {
    long long ts;
    if (now_ms(&ts) < 0) return NULL;
    return PyLong_FromLongLong(ts);
}

/* For _lane.c: batch.append_unkeyed(now, value, reserve, bound, produced, topic, limit)
 * (see _varint.h for the answer), the record's handle left in *handle when appended.
 * The kernel is called directly on an instance of exactly the bound batch class; any
 * other object (a subclass may override the method) gets a method call. */
int call_append_unkeyed(PyObject *batch, PyObject *value, Py_ssize_t reserve, Py_ssize_t bound,
                        PyObject *produced, PyObject *topic, PyObject *limit_obj,
                        PyObject **answer, PyObject **handle) {
    *answer = NULL;
    *handle = NULL;
    if (direct(batch)) {
        Py_ssize_t limit = PyLong_AsSsize_t(limit_obj);
        if (limit == -1 && PyErr_Occurred()) return -1;
        return append_record(batch, Py_None, NULL, value, reserve, bound, NULL, produced, topic,
                             limit, handle);
    }
    Py_ssize_t vlen = value == Py_None ? -1 : PyObject_Size(value);
    if (vlen < 0 && PyErr_Occurred()) return -1;
    PyObject *ts_obj = now_obj();
    if (!ts_obj) return -1;
    PyObject *made = handle_by_method(batch, ts_obj, (unsigned long long)(vlen + 1));
    PyObject *reserve_obj = made ? PyLong_FromSsize_t(reserve) : NULL;
    PyObject *bound_obj = reserve_obj ? PyLong_FromSsize_t(bound) : NULL;
    PyObject *got = NULL;
    if (bound_obj) {
        PyObject *name = PyUnicode_InternFromString("append_unkeyed");
        if (name) {
            PyObject *stack[8] = {batch, ts_obj, value, reserve_obj, bound_obj, produced, topic,
                                  limit_obj};
            got = PyObject_VectorcallMethod(name, stack, 8, NULL);
            Py_DECREF(name);
        }
    }
    Py_DECREF(ts_obj);
    Py_XDECREF(reserve_obj);
    Py_XDECREF(bound_obj);
    if (!got) {
        Py_XDECREF(made);
        return -1;
    }
    int truth = PyObject_IsTrue(got);
    if (truth <= 0) {
        Py_DECREF(got);
        Py_DECREF(made);
        return truth;
    }
    *answer = got;
    *handle = made;
    return 1;
}

/* batch.append_keyed(timestamp_ms, key, value, reserve, bound) -> int
 *
 * ProducerBatch.try_append for a record without headers (``key`` may be None),
 * without its handle. 0: refused,
 * nothing changed; 1: appended; 5: appended, and the batch is full now. The
 * reference is ProducerBatch._append_keyed_pure. */
static PyObject *k_append_keyed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "append_keyed takes 5 arguments");
        return NULL;
    }
    int closed = not_open(self);
    if (closed) return closed < 0 ? NULL : PyLong_FromLong(CODE_REFUSED);
    if (check_timestamp(args[0]) < 0) return NULL;
    Py_ssize_t reserve = PyLong_AsSsize_t(args[3]);
    if (reserve == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t bound = PyLong_AsSsize_t(args[4]);
    if (bound == -1 && PyErr_Occurred()) return NULL;
    int code = append_record(self, args[0], args[1], args[2], reserve, bound, args[4], NULL, NULL,
                             0, NULL);
    return code < 0 ? NULL : PyLong_FromLong(code);
}

/* For _lane.c: batch.append_keyed(now, key, value, reserve, bound), as 1 (appended),
 * 5 (appended, and the batch is full now), 0 (refused) or -1 (an error), the
 * record's handle left in *handle when appended. A batch not of exactly the bound
 * class gets a method call: its answer's truth decides whether it appended, and an
 * answer other than APPENDED (``!=``, as the pure keyed lane reads it) says the
 * batch is full. */
int call_append_keyed(PyObject *batch, PyObject *key, PyObject *value, Py_ssize_t reserve,
                      Py_ssize_t bound, PyObject **handle) {
    *handle = NULL;
    if (direct(batch))
        return append_record(batch, Py_None, key, value, reserve, bound, NULL, NULL, NULL, 0, handle);
    Py_ssize_t klen = PyObject_Size(key);
    if (klen < 0) return -1;
    Py_ssize_t vlen = PyObject_Size(value);
    if (vlen < 0) return -1;
    PyObject *ts_obj = now_obj();
    if (!ts_obj) return -1;
    PyObject *made = handle_by_method(
        batch, ts_obj, ((unsigned long long)(klen + 1) << 32) | (unsigned long long)(vlen + 1));
    PyObject *reserve_obj = made ? PyLong_FromSsize_t(reserve) : NULL;
    PyObject *bound_obj = reserve_obj ? PyLong_FromSsize_t(bound) : NULL;
    PyObject *answer = NULL;
    if (bound_obj) {
        PyObject *name = PyUnicode_InternFromString("append_keyed");
        if (name) {
            PyObject *stack[6] = {batch, ts_obj, key, value, reserve_obj, bound_obj};
            answer = PyObject_VectorcallMethod(name, stack, 6, NULL);
            Py_DECREF(name);
        }
    }
    Py_DECREF(ts_obj);
    Py_XDECREF(reserve_obj);
    Py_XDECREF(bound_obj);
    if (!answer) {
        Py_XDECREF(made);
        return -1;
    }
    int code = PyObject_IsTrue(answer);
    if (code > 0) {
        /* RichCompareBool's identity shortcut answers as != would: only the int 1 is itself. */
        PyObject *appended = PyLong_FromLong(CODE_APPENDED);
        int other = appended ? PyObject_RichCompareBool(answer, appended, Py_NE) : -1;
        Py_XDECREF(appended);
        code = other < 0 ? -1 : other ? CODE_APPENDED + CODE_FULL : CODE_APPENDED;
    }
    Py_DECREF(answer);
    if (code > 0) *handle = made;
    else Py_DECREF(made);
    return code;
}

static PyMethodDef append_keyed_def = {
    "append_keyed", (PyCFunction)(void (*)(void))k_append_keyed, METH_FASTCALL,
    "append_keyed(timestamp_ms, key, value, reserve, bound) -> 0 refused, 1 appended, "
    "plus 4 when the batch is full now",
};

static PyMethodDef append_def = {
    "append_unkeyed", (PyCFunction)(void (*)(void))k_append_unkeyed, METH_FASTCALL,
    "append_unkeyed(timestamp_ms, value, reserve, bound, produced, topic, limit) -> "
    "0 refused, 1 appended, 2 appended and the sticky partition's turn is over, either plus 4 "
    "when the batch is full now",
};

/* The offset of slot ``name`` of ``type`` (a PyObject * at a fixed place in every
 * instance, subclasses too: CPython's member descriptors), or -1 with an error.
 * With ``writable``, a read-only member does not count. Shared by the kernels
 * that bind a class's layout (_lane.c). */
Py_ssize_t slot_offset(PyTypeObject *type, const char *name, int writable) {
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
int slot_offsets(PyTypeObject *type, const char *const *names, int n, Py_ssize_t *out) {
    for (int i = 0; i < n; i++) {
        out[i] = slot_offset(type, names[i], 0);
        if (out[i] < 0) return -1;
    }
    return 0;
}

/* Adds the module-level function ``def`` (a binder) to ``module``: 0, or -1. */
int add_module_function(PyObject *module, PyMethodDef *def) {
    PyObject *name = PyModule_GetNameObject(module);
    if (!name) return -1;
    PyObject *function = PyCFunction_NewEx(def, module, name);
    Py_DECREF(name);
    if (!function) return -1;
    int rc = PyModule_AddObjectRef(module, def->ml_name, function);
    Py_DECREF(function);
    return rc;
}

/* bind_batch_layout(batch_type, builder_type, open_state) -> the (append_unkeyed, append_keyed) methods. */
static PyObject *k_bind_batch_layout(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "bind_batch_layout(batch_type, builder_type, open_state)");
        return NULL;
    }
    PyTypeObject *batch_type = (PyTypeObject *)args[0], *builder_type = (PyTypeObject *)args[1];
    Py_ssize_t offset[N_SLOTS];
    for (int i = 0; i < N_SLOTS; i++) {
        offset[i] = slot_offset(i < FIRST_BUILDER_SLOT ? batch_type : builder_type, slot_names[i], 1);
        if (offset[i] < 0) return NULL;
    }
    PyObject *unkeyed = PyDescr_NewMethod(batch_type, &append_def);
    PyObject *keyed = unkeyed ? PyDescr_NewMethod(batch_type, &append_keyed_def) : NULL;
    PyObject *method = keyed ? PyTuple_Pack(2, unkeyed, keyed) : NULL;
    Py_XDECREF(unkeyed);
    Py_XDECREF(keyed);
    if (!method) return NULL;
    memcpy(layout.offset, offset, sizeof offset);
    Py_XSETREF(layout.outcome_type,
               (PyTypeObject *)Py_NewRef(get_kernels_state(module)->batch_outcome_type));
    Py_INCREF(batch_type);
    Py_INCREF(builder_type);
    Py_INCREF(args[2]);
    Py_XSETREF(layout.batch_type, batch_type);
    Py_XSETREF(layout.builder_type, builder_type);
    Py_XSETREF(layout.open_state, args[2]);
    return method;
}

static PyMethodDef bind_def = {
    "bind_batch_layout", (PyCFunction)(void (*)(void))k_bind_batch_layout, METH_FASTCALL,
    "bind_batch_layout(batch_type, builder_type, open_state) -> the batch's (append_unkeyed, "
    "append_keyed) methods",
};

int add_append_kernel(PyObject *module) { return add_module_function(module, &bind_def); }
