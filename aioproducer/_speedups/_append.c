/* The unkeyed shortcut's append, compiled: ProducerBatch.append_unkeyed.
 *
 * The reference is ProducerBatch._append_unkeyed_pure (aioproducer/engine/batch.py):
 * one record without key or headers appended to an open batch
 * (RecordBatchBuilder.append's encoding and room check, ProducerBatch.try_append's
 * bookkeeping), then counted for the sticky partitioner (engine/partitioner.py's
 * time_to_switch rule); the answer says whether it left the batch full
 * (ProducerBatch.is_full), for the lane to wake the sender.
 * tests/unit/test_kernels_equal.py checks that both leave the same bytes,
 * lists, counters and answers on random input.
 *
 * The batch stays a Python class with __slots__ (weak references, subclassing
 * and the pure path keep working). bind_batch_layout(), called once when
 * aioproducer.engine.batch is imported, reads where each slot this kernel uses
 * sits in an instance (a slot is a PyObject * at a fixed offset, the same in
 * every subclass: CPython's member descriptors), so that the kernel reaches the
 * fields as a C struct's, without an attribute lookup each. It returns the
 * kernel as a method descriptor of the batch class, as a builtin type's methods
 * are: a call costs no bound method and checks the instance's type.
 *
 * The batch's builder is reached through its C-level surface (_builder.h) when
 * it is exactly the compiled RecordBatchBuilder; any other builder (the pure
 * RecordBatchBuilderPy) gets the batch's pure method, which calls its append.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#include "_builder.h"
#include "_outcome.h"
#include "_partitioning.h"
#include "_varint.h"

/* The batch's slots read or written, in the order of slot_names. */
enum { B_STATE, B_BUILDER, B_OUTCOME, B_RESERVED, B_MAX_RECORD_SIZE, B_BATCH_SIZE, N_SLOTS };

static const char *slot_names[N_SLOTS] = {
    "state", "builder", "outcome", "reserved", "max_record_size", "batch_size",
};

static struct {
    PyTypeObject *batch_type;   /* ProducerBatch (a strong reference once bound) */
    PyTypeObject *builder_type; /* the compiled RecordBatchBuilder */
    PyObject *open_state;       /* BatchState.OPEN */
    PyObject *unkeyed_pure;     /* ProducerBatch._append_unkeyed_pure */
    PyObject *keyed_pure;       /* ProducerBatch._append_keyed_pure */
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

/* What the appends answer: engine/batch.py's REFUSED, APPENDED and SWITCH, to which
 * FULL is added when the record left its batch full (is_full(): the sender may send
 * it now, Java's batchIsFull). */
enum { CODE_REFUSED = 0, CODE_APPENDED = 1, CODE_SWITCH = 2, CODE_FULL = 4 };

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
static int append_exported(PyObject *self, PyObject *builder, PyObject *ts_arg, long long ts,
                           int overflow, builder_span *kspan, builder_span *vspan,
                           Py_ssize_t reserve, Py_ssize_t bound, PyObject *bound_obj,
                           PyObject *produced, PyObject *topic, Py_ssize_t limit,
                           PyObject **handle) {
    PyObject *state = get_slot(self, B_STATE);
    if (!state) return -1;
    if (state != layout.open_state) return CODE_REFUSED;
    if (get_slot(self, B_BUILDER) != builder) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "the batch's builder changed while a record was appended");
        return -1;
    }
    if (produced && !PyDict_Check(produced)) {
        PyErr_SetString(PyExc_TypeError, "produced must be a dict");
        return -1;
    }
    /* The topic's hash may run code (a str subclass), and so may a collection
     * started by any allocation below (the handle's): what is read of the batch
     * and the dict before such a call is held, or read after it. */
    PyObject *seen = NULL;
    Py_ssize_t before = 0;
    if (produced) {
        seen = Py_XNewRef(PyDict_GetItemWithError(produced, topic));
        if (seen && PyLong_CheckExact(seen)) before = PyLong_AsSsize_t(seen);
        else if (seen) before = -1, PyErr_SetString(PyExc_TypeError, "produced counts must be ints");
        if ((!seen && PyErr_Occurred()) || (before == -1 && PyErr_Occurred())) {
            Py_XDECREF(seen);
            return -1;
        }
    }
    PyObject *outcome = NULL, *record_handle = NULL;
    PyObject *reserved_obj = NULL, *after_obj = NULL, *largest_obj = NULL;
    int result = -1;
    if (handle) {
        outcome = get_slot(self, B_OUTCOME);
        if (!outcome) goto done;
        if (!layout.outcome_type || !Py_IS_TYPE(outcome, layout.outcome_type)) {
            PyErr_SetString(PyExc_TypeError, "the batch's outcome is not a BatchOutcome");
            outcome = NULL;
            goto done;
        }
        Py_INCREF(outcome);
    }
    /* The builder's batch_size bounds the buffer; the batch's says when it is full. */
    Py_ssize_t full_at, reserved, max_record_size;
    if (get_ssize(self, B_BATCH_SIZE, &full_at) < 0 ||
        get_ssize(self, B_RESERVED, &reserved) < 0 ||
        get_ssize(self, B_MAX_RECORD_SIZE, &max_record_size) < 0) goto done;
    /* The builder checks its seal and the timestamp, sizes the record and
     * reserves its room: past this, only the commit below can refuse. */
    record_plan plan;
    int planned = builder_plan(builder, ts_arg, ts, overflow, kspan->len, vspan->len, &plan);
    if (planned <= 0) {
        result = planned; /* -1: an error; 0: no room (CODE_REFUSED) */
        goto done;
    }
    Py_ssize_t old = plan.offset, total = plan.total;
    Py_ssize_t after = before + bound;
    int switch_due = produced && time_to_switch(after, limit, old + total, bound);
    /* Every new object first: the handle (its delta is the record count before
     * the append), whose allocation may start a collection (caught by the commit). */
    if (handle) {
        /* pack_sizes(key size or -1, value size or -1): a span of None has len -1 */
        unsigned long long sizes = ((unsigned long long)(kspan->len + 1) << 32) |
                                   (unsigned long long)(vspan->len + 1);
        record_handle = make_record_handle(outcome, plan.count, plan.ts, sizes);
        if (!record_handle) goto done;
    }
    reserved_obj = PyLong_FromSsize_t(reserved + reserve);
    after_obj = produced ? PyLong_FromSsize_t(after) : Py_NewRef(Py_None);
    /* The batch's largest record bound, when this one is larger. */
    int largest_failed = 0;
    if (bound > max_record_size) {
        largest_obj = bound_obj ? Py_NewRef(bound_obj) : PyLong_FromSsize_t(bound);
        largest_failed = !largest_obj;
    }
    if (!reserved_obj || !after_obj || largest_failed) goto done;
    /* ``seen`` is held: put back if the commit below refuses. */
    if (produced && PyDict_SetItem(produced, topic, after_obj) < 0) goto done;
    /* Refused only if code run meanwhile (a topic's __hash__, a finalizer
     * started by an allocation) changed the builder. */
    if (builder_commit(builder, &plan, kspan, vspan) < 0) {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        if (produced) {
            if (seen) PyDict_SetItem(produced, topic, seen); /* an existing key: cannot fail */
            else PyDict_DelItem(produced, topic);
        }
        PyErr_Restore(exc_type, exc_value, exc_tb);
        goto done;
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
    Py_XDECREF(seen);
    Py_XDECREF(outcome);
    Py_XDECREF(record_handle);
    Py_XDECREF(reserved_obj);
    Py_XDECREF(after_obj);
    Py_XDECREF(largest_obj);
    return result;
}

/* A batch whose builder is not the compiled type (the pure one, in tests): the
 * batch's pure method does it all, as it would without the kernels. Only the
 * Python-level methods come here (no handle: the lanes call the kernel directly
 * only on a batch with a compiled builder, see direct()). */
static int append_by_pure(PyObject *self, PyObject *ts_arg, PyObject *key, PyObject *value,
                          Py_ssize_t reserve, Py_ssize_t bound, PyObject *bound_obj,
                          PyObject *produced, PyObject *topic, Py_ssize_t limit) {
    PyObject *reserve_obj = PyLong_FromSsize_t(reserve);
    PyObject *bound_ref = bound_obj ? Py_NewRef(bound_obj) : PyLong_FromSsize_t(bound);
    PyObject *limit_obj = produced ? PyLong_FromSsize_t(limit) : NULL;
    PyObject *answer = NULL;
    if (reserve_obj && bound_ref && (!produced || limit_obj)) {
        if (produced) {
            PyObject *call[8] = {self, ts_arg, value, reserve_obj, bound_ref, produced, topic,
                                 limit_obj};
            answer = PyObject_Vectorcall(layout.unkeyed_pure, call, 8, NULL);
        } else {
            PyObject *call[6] = {self, ts_arg, key ? key : Py_None, value, reserve_obj, bound_ref};
            answer = PyObject_Vectorcall(layout.keyed_pure, call, 6, NULL);
        }
    }
    Py_XDECREF(reserve_obj);
    Py_XDECREF(bound_ref);
    Py_XDECREF(limit_obj);
    if (!answer) return -1;
    long code = PyLong_AsLong(answer);
    Py_DECREF(answer);
    if (code == -1 && PyErr_Occurred()) return -1;
    return (int)code;
}

/* The batch's state is read first (a batch no longer open refuses, whatever the
 * record), then the builder reads the record: as the pure twin, whose builder's
 * append does. The record's key and value buffers are exported before the
 * batch's other slots are read: exporting may run Python code (a __buffer__ of
 * Python 3.12+), which must not run while borrowed slots and counters read from
 * the batch are in use. */
static int append_record(PyObject *self, PyObject *ts_arg, PyObject *key, PyObject *value,
                         Py_ssize_t reserve, Py_ssize_t bound, PyObject *bound_obj,
                         PyObject *produced, PyObject *topic, Py_ssize_t limit,
                         PyObject **handle) {
    if (!layout.batch_type || !PyObject_TypeCheck(self, layout.batch_type)) {
        PyErr_SetString(PyExc_TypeError, "append_unkeyed is a method of the batch class bound last");
        return -1;
    }
    PyObject *state = get_slot(self, B_STATE);
    if (!state) return -1;
    if (state != layout.open_state) return CODE_REFUSED;
    PyObject *builder = get_slot(self, B_BUILDER);
    if (!builder) return -1;
    if (!Py_IS_TYPE(builder, layout.builder_type)) {
        if (handle) {
            PyErr_SetString(PyExc_RuntimeError, "the batch's builder changed while a record was appended");
            return -1;
        }
        return append_by_pure(self, ts_arg, key, value, reserve, bound, bound_obj, produced, topic,
                              limit);
    }
    Py_INCREF(builder); /* held: the code run below may replace the batch's */
    long long ts = 0;
    int overflow = 0, rc = -1;
    builder_span kspan, vspan;
    if (builder_check_open(builder) < 0) goto done;
    if (ts_arg == Py_None) {
        if (now_ms(&ts) < 0) goto done;
    } else if (builder_timestamp(ts_arg, &ts, &overflow) < 0) {
        goto done;
    }
    if (builder_span_get(key ? key : Py_None, &kspan, "key") < 0) goto done;
    if (builder_span_get(value, &vspan, "value") < 0) {
        builder_span_release(&kspan);
        goto done;
    }
    rc = append_exported(self, builder, ts_arg, ts, overflow, &kspan, &vspan, reserve, bound,
                         bound_obj, produced, topic, limit, handle);
    builder_span_release(&vspan);
    builder_span_release(&kspan);
done:
    Py_DECREF(builder);
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
 * class, whose outcome is exactly the compiled BatchOutcome and whose builder is
 * exactly the compiled RecordBatchBuilder (a batch of the pure path, where the
 * kernels were bound all the same, makes pure handles and has a pure builder). */
static int direct(PyObject *batch) {
    if (!layout.batch_type || !Py_IS_TYPE(batch, layout.batch_type)) return 0;
    PyObject *outcome = *slot(batch, B_OUTCOME), *builder = *slot(batch, B_BUILDER);
    return outcome && layout.outcome_type && Py_IS_TYPE(outcome, layout.outcome_type) && builder &&
           Py_IS_TYPE(builder, layout.builder_type);
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
        return truth < 0 ? -2 : 0; /* -2: the answer unreadable, the record maybe taken */
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
        code = other < 0 ? -2 : other ? CODE_APPENDED + CODE_FULL : CODE_APPENDED;
    } else if (code < 0) {
        code = -2; /* the answer unreadable: the record maybe taken */
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

/* bind_batch_layout(batch_type, open_state) -> the (append_unkeyed, append_keyed) methods. */
static PyObject *k_bind_batch_layout(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "bind_batch_layout(batch_type, open_state)");
        return NULL;
    }
    PyTypeObject *batch_type = (PyTypeObject *)args[0];
    Py_ssize_t offset[N_SLOTS];
    for (int i = 0; i < N_SLOTS; i++) {
        offset[i] = slot_offset(batch_type, slot_names[i], 1);
        if (offset[i] < 0) return NULL;
    }
    PyObject *unkeyed_pure = PyObject_GetAttrString(args[0], "_append_unkeyed_pure");
    PyObject *keyed_pure = unkeyed_pure ? PyObject_GetAttrString(args[0], "_append_keyed_pure") : NULL;
    PyObject *unkeyed = keyed_pure ? PyDescr_NewMethod(batch_type, &append_def) : NULL;
    PyObject *keyed = unkeyed ? PyDescr_NewMethod(batch_type, &append_keyed_def) : NULL;
    PyObject *method = keyed ? PyTuple_Pack(2, unkeyed, keyed) : NULL;
    Py_XDECREF(unkeyed);
    Py_XDECREF(keyed);
    if (!method) {
        Py_XDECREF(unkeyed_pure);
        Py_XDECREF(keyed_pure);
        return NULL;
    }
    memcpy(layout.offset, offset, sizeof offset);
    Py_XSETREF(layout.outcome_type,
               (PyTypeObject *)Py_NewRef(get_kernels_state(module)->batch_outcome_type));
    Py_INCREF(batch_type);
    Py_INCREF(args[1]);
    Py_XSETREF(layout.batch_type, batch_type);
    Py_XSETREF(layout.builder_type,
               (PyTypeObject *)Py_NewRef(get_kernels_state(module)->builder_type));
    Py_XSETREF(layout.open_state, args[1]);
    Py_XSETREF(layout.unkeyed_pure, unkeyed_pure);
    Py_XSETREF(layout.keyed_pure, keyed_pure);
    return method;
}

static PyMethodDef bind_def = {
    "bind_batch_layout", (PyCFunction)(void (*)(void))k_bind_batch_layout, METH_FASTCALL,
    "bind_batch_layout(batch_type, open_state) -> the batch's (append_unkeyed, append_keyed) "
    "methods",
};

int add_append_kernel(PyObject *module) { return add_module_function(module, &bind_def); }
