/* The unkeyed shortcut's append, compiled: ProducerBatch.append_unkeyed.
 *
 * The reference is ProducerBatch._append_unkeyed_pure (aioproducer/engine/batch.py):
 * one record without key or headers appended to an open batch with its future
 * (RecordBatchBuilder.append's encoding and room check, ProducerBatch.try_append's
 * bookkeeping), then counted for the sticky partitioner (engine/sticky.py's
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
#include <time.h>

#include "_builder.h"
#include "_state.h"
#include "_varint.h"

/* The batch's slots read or written, in the order of slot_names. */
enum {
    B_STATE, B_BUILDER, B_FUTURES, B_SIZES, B_TIMESTAMPS, B_RESERVED, B_MAX_RECORD_SIZE,
    B_BATCH_SIZE,
    N_SLOTS
};

static const char *slot_names[N_SLOTS] = {
    "state", "builder", "futures", "sizes", "timestamps", "reserved", "max_record_size",
    "batch_size",
};

static struct {
    PyTypeObject *batch_type;   /* ProducerBatch (a strong reference once bound) */
    PyTypeObject *builder_type; /* the compiled RecordBatchBuilder */
    PyObject *open_state;       /* BatchState.OPEN */
    PyObject *unkeyed_pure;     /* ProducerBatch._append_unkeyed_pure */
    PyObject *keyed_pure;       /* ProducerBatch._append_keyed_pure */
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

/* Milliseconds since the epoch now: time.time_ns() // 1_000_000 without the
 * Python int of nanoseconds and its division (CPython reads the same clock). */
static int now_ms(long long *out) {
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

/* Rolls the three per-record lists back to ``n`` entries (their length before). */
static void truncate_lists(PyObject **lists, int done, Py_ssize_t n) {
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    for (int i = 0; i < done; i++) PyList_SetSlice(lists[i], n, PY_SSIZE_T_MAX, NULL);
    PyErr_Restore(exc_type, exc_value, exc_tb);
}

/* batch.append_unkeyed(timestamp_ms, value, future, reserve, bound, produced, topic, limit) -> int
 *
 * ``timestamp_ms`` None: now, as time.time_ns() // 1_000_000 (the same clock).
 * 0: refused (the batch is not open, or the record would take it past its
 * batch_size; the first record always fits), nothing changed. 1: appended. 2:
 * appended, and the sticky partitioner should move on. Either plus 4 (FULL)
 * when the batch's buffer reached the batch's own batch_size (is_full()). On
 * an error nothing is changed either.
 *
 * append_record() below takes the numbers as C integers and answers the code
 * (-1 on an error): the lanes (_lane.c) call it without making ints of them.
 * ``bound_obj`` is ``bound`` as an int, or NULL (made if it is kept). It also
 * appends a keyed record (``key`` bytes-like; NULL or None is a null key) and,
 * with ``produced`` NULL, counts nothing for the sticky partitioner (a keyed
 * record: ProducerBatch.append_keyed, whose reference is _append_keyed_pure).
 *
 * ``builder`` is the batch's builder, exactly the compiled type, held; ``key``
 * and ``value`` were read by it (builder_span_get) before anything of the batch
 * is read here: reading them may run Python code (a __buffer__ of 3.12+). */
static int append_exported(PyObject *self, PyObject *builder, PyObject *ts_arg, long long ts,
                           int overflow, builder_span *kspan, builder_span *vspan, PyObject *future,
                           Py_ssize_t reserve, Py_ssize_t bound, PyObject *bound_obj,
                           PyObject *produced, PyObject *topic, Py_ssize_t limit) {
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
    PyObject *lists[3];
    for (int i = 0; i < 3; i++) {
        lists[i] = get_slot(self, B_FUTURES + i);
        if (!lists[i]) return -1;
        if (!PyList_Check(lists[i])) {
            PyErr_Format(PyExc_TypeError, "the batch's %s is not a list", slot_names[B_FUTURES + i]);
            return -1;
        }
    }
    /* The builder's batch_size bounds the buffer; the batch's says when it is full. */
    Py_ssize_t full_at, reserved, max_record_size;
    if (get_ssize(self, B_BATCH_SIZE, &full_at) < 0 ||
        get_ssize(self, B_RESERVED, &reserved) < 0 ||
        get_ssize(self, B_MAX_RECORD_SIZE, &max_record_size) < 0) return -1;
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
    /* The builder checks its seal and the timestamp, sizes the record and
     * reserves its room: past this, only the commit below can refuse. */
    record_plan plan;
    int planned = builder_plan(builder, ts_arg, ts, overflow, kspan->len, vspan->len, &plan);
    if (planned <= 0) return planned; /* -1: an error; 0: no room (CODE_REFUSED) */
    Py_ssize_t old = plan.offset, total = plan.total;
    Py_ssize_t after = before + bound;
    int switch_due = produced && after >= limit &&
                     (after >= 2 * limit || old + total + bound > limit);
    /* Every new object first. */
    /* pack_sizes(key size or -1, value size or -1) */
    PyObject *sizes_obj = PyLong_FromLongLong(((long long)(kspan->len + 1) << 32) |
                                              (long long)(vspan->len + 1));
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
    int appended = 0;
    if (!sizes_obj || !reserved_obj || !after_obj || !ts_obj || largest_failed) goto done;
    PyObject *items[3] = {future, sizes_obj, ts_obj};
    Py_ssize_t n = PyList_GET_SIZE(lists[0]);
    for (; appended < 3; appended++) {
        if (PyList_Append(lists[appended], items[appended]) < 0) goto undo;
    }
    /* The dict drops its reference to ``seen`` when it takes the new count:
     * hold one, to put it back if the commit below refuses. */
    Py_XINCREF(seen);
    if (produced && PyDict_SetItem(produced, topic, after_obj) < 0) {
        Py_XDECREF(seen);
        goto undo;
    }
    /* Refused only if code run meanwhile (a topic's __hash__, a finalizer
     * started by an allocation) changed the builder. */
    if (builder_commit(builder, &plan, kspan, vspan) < 0) {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        if (produced) {
            if (seen) PyDict_SetItem(produced, topic, seen); /* an existing key: cannot fail */
            else PyDict_DelItem(produced, topic);
        }
        Py_XDECREF(seen);
        PyErr_Restore(exc_type, exc_value, exc_tb);
        goto undo;
    }
    Py_XDECREF(seen);
    set_slot(self, B_RESERVED, reserved_obj);
    reserved_obj = NULL;
    if (largest_obj) {
        set_slot(self, B_MAX_RECORD_SIZE, largest_obj);
        largest_obj = NULL;
    }
    result = (switch_due ? CODE_SWITCH : CODE_APPENDED) +
             (old + total >= full_at ? CODE_FULL : 0); /* is_full(): the batch is open */
    goto done;
undo:
    truncate_lists(lists, appended, n);
done:
    Py_XDECREF(sizes_obj);
    Py_XDECREF(reserved_obj);
    Py_XDECREF(after_obj);
    Py_XDECREF(largest_obj);
    Py_XDECREF(ts_obj);
    return result;
}

/* A batch whose builder is not the compiled type (the pure one, in tests): the
 * batch's pure method does it all, as it would without the kernels. */
static int append_by_pure(PyObject *self, PyObject *ts_arg, PyObject *key, PyObject *value,
                          PyObject *future, Py_ssize_t reserve, Py_ssize_t bound,
                          PyObject *bound_obj, PyObject *produced, PyObject *topic,
                          Py_ssize_t limit) {
    PyObject *reserve_obj = PyLong_FromSsize_t(reserve);
    PyObject *bound_ref = bound_obj ? Py_NewRef(bound_obj) : PyLong_FromSsize_t(bound);
    PyObject *limit_obj = produced ? PyLong_FromSsize_t(limit) : NULL;
    PyObject *answer = NULL;
    if (reserve_obj && bound_ref && (!produced || limit_obj)) {
        if (produced) {
            PyObject *call[9] = {self, ts_arg, value, future, reserve_obj, bound_ref, produced, topic,
                                 limit_obj};
            answer = PyObject_Vectorcall(layout.unkeyed_pure, call, 9, NULL);
        } else {
            PyObject *call[7] = {self, ts_arg, key ? key : Py_None, value, future, reserve_obj,
                                 bound_ref};
            answer = PyObject_Vectorcall(layout.keyed_pure, call, 7, NULL);
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
                         PyObject *future, Py_ssize_t reserve, Py_ssize_t bound,
                         PyObject *bound_obj, PyObject *produced, PyObject *topic,
                         Py_ssize_t limit) {
    if (!layout.batch_type || !PyObject_TypeCheck(self, layout.batch_type)) {
        PyErr_SetString(PyExc_TypeError, "append_unkeyed is a method of the batch class bound last");
        return -1;
    }
    PyObject *state = get_slot(self, B_STATE);
    if (!state) return -1;
    if (state != layout.open_state) return CODE_REFUSED;
    PyObject *builder = get_slot(self, B_BUILDER);
    if (!builder) return -1;
    if (!Py_IS_TYPE(builder, layout.builder_type))
        return append_by_pure(self, ts_arg, key, value, future, reserve, bound, bound_obj, produced,
                              topic, limit);
    Py_INCREF(builder); /* held: the caller's code below may replace the batch's */
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
    rc = append_exported(self, builder, ts_arg, ts, overflow, &kspan, &vspan, future, reserve, bound,
                         bound_obj, produced, topic, limit);
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

static PyObject *k_append_unkeyed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "append_unkeyed takes 8 arguments");
        return NULL;
    }
    int closed = not_open(self);
    if (closed) return closed < 0 ? NULL : PyLong_FromLong(CODE_REFUSED);
    Py_ssize_t reserve = PyLong_AsSsize_t(args[3]);
    if (reserve == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t bound = PyLong_AsSsize_t(args[4]);
    if (bound == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(args[7]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    int code = append_record(self, args[0], NULL, args[1], args[2], reserve, bound, args[4],
                             args[5], args[6], limit);
    return code < 0 ? NULL : PyLong_FromLong(code);
}

/* For _lane.c: batch.append_unkeyed(None, value, future, reserve, bound, produced, topic,
 * limit) for a record stamped now (see _varint.h for the answer). The kernel is
 * called directly on an instance of exactly the bound batch class; any other
 * object (a subclass may override the method) gets a method call. */
int call_append_unkeyed(PyObject *batch, PyObject *value, PyObject *future, Py_ssize_t reserve,
                        Py_ssize_t bound, PyObject *produced, PyObject *topic, PyObject *limit_obj,
                        PyObject **answer) {
    *answer = NULL;
    if (layout.batch_type && Py_IS_TYPE(batch, layout.batch_type)) {
        Py_ssize_t limit = PyLong_AsSsize_t(limit_obj);
        if (limit == -1 && PyErr_Occurred()) return -1;
        return append_record(batch, Py_None, NULL, value, future, reserve, bound, NULL, produced,
                             topic, limit);
    }
    PyObject *reserve_obj = PyLong_FromSsize_t(reserve);
    PyObject *bound_obj = PyLong_FromSsize_t(bound);
    PyObject *name = PyUnicode_InternFromString("append_unkeyed");
    PyObject *got = NULL;
    if (reserve_obj && bound_obj && name) {
        PyObject *stack[9] = {batch, Py_None, value, future, reserve_obj, bound_obj, produced, topic,
                              limit_obj};
        got = PyObject_VectorcallMethod(name, stack, 9, NULL);
    }
    Py_XDECREF(reserve_obj);
    Py_XDECREF(bound_obj);
    Py_XDECREF(name);
    if (!got) return -1;
    int truth = PyObject_IsTrue(got);
    if (truth <= 0) {
        Py_DECREF(got);
        return truth;
    }
    *answer = got;
    return 1;
}

/* batch.append_keyed(timestamp_ms, key, value, future, reserve, bound) -> int
 *
 * ProducerBatch.try_append for a record without headers (``key`` may be None),
 * its sizes packed here; ``timestamp_ms`` None stamps it now. 0: refused,
 * nothing changed; 1: appended; 5: appended, and the batch is full now. The
 * reference is ProducerBatch._append_keyed_pure. */
static PyObject *k_append_keyed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "append_keyed takes 6 arguments");
        return NULL;
    }
    int closed = not_open(self);
    if (closed) return closed < 0 ? NULL : PyLong_FromLong(CODE_REFUSED);
    Py_ssize_t reserve = PyLong_AsSsize_t(args[4]);
    if (reserve == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t bound = PyLong_AsSsize_t(args[5]);
    if (bound == -1 && PyErr_Occurred()) return NULL;
    int code = append_record(self, args[0], args[1], args[2], args[3], reserve, bound, args[5],
                             NULL, NULL, 0);
    return code < 0 ? NULL : PyLong_FromLong(code);
}

/* For _lane.c: batch.append_keyed(None, key, value, future, reserve, bound), as 1
 * (appended), 5 (appended, and the batch is full now), 0 (refused) or -1 (an
 * error). A batch not of exactly the bound class gets a method call: its
 * answer's truth decides whether it appended, and an answer other than
 * APPENDED (``!=``, as the pure keyed lane reads it) says the batch is full. */
int call_append_keyed(PyObject *batch, PyObject *key, PyObject *value, PyObject *future,
                      Py_ssize_t reserve, Py_ssize_t bound) {
    if (layout.batch_type && Py_IS_TYPE(batch, layout.batch_type))
        return append_record(batch, Py_None, key, value, future, reserve, bound, NULL, NULL, NULL,
                             0);
    PyObject *reserve_obj = PyLong_FromSsize_t(reserve);
    PyObject *bound_obj = PyLong_FromSsize_t(bound);
    PyObject *name = PyUnicode_InternFromString("append_keyed");
    PyObject *answer = NULL;
    if (reserve_obj && bound_obj && name) {
        PyObject *stack[7] = {batch, Py_None, key, value, future, reserve_obj, bound_obj};
        answer = PyObject_VectorcallMethod(name, stack, 7, NULL);
    }
    Py_XDECREF(reserve_obj);
    Py_XDECREF(bound_obj);
    Py_XDECREF(name);
    if (!answer) return -1;
    int code = PyObject_IsTrue(answer);
    if (code > 0) {
        /* RichCompareBool's identity shortcut answers as != would: only the int 1 is itself. */
        PyObject *appended = PyLong_FromLong(CODE_APPENDED);
        int other = appended ? PyObject_RichCompareBool(answer, appended, Py_NE) : -1;
        Py_XDECREF(appended);
        code = other < 0 ? -1 : other ? CODE_APPENDED + CODE_FULL : CODE_APPENDED;
    }
    Py_DECREF(answer);
    return code;
}

static PyMethodDef append_keyed_def = {
    "append_keyed", (PyCFunction)(void (*)(void))k_append_keyed, METH_FASTCALL,
    "append_keyed(timestamp_ms, key, value, future, reserve, bound) -> 0 refused, 1 appended, "
    "plus 4 when the batch is full now",
};

static PyMethodDef append_def = {
    "append_unkeyed", (PyCFunction)(void (*)(void))k_append_unkeyed, METH_FASTCALL,
    "append_unkeyed(timestamp_ms, value, future, reserve, bound, produced, topic, limit) -> "
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
    PyObject *function = PyCFunction_NewEx(def, NULL, name);
    Py_DECREF(name);
    if (!function) return -1;
    int rc = PyModule_AddObjectRef(module, def->ml_name, function);
    Py_DECREF(function);
    return rc;
}

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

/* Bound to the module (as its own functions are): the binder reads the
 * compiled builder type from the module's state. */
int add_append_kernel(PyObject *module) {
    PyObject *name = PyModule_GetNameObject(module);
    if (!name) return -1;
    PyObject *function = PyCFunction_NewEx(&bind_def, module, name);
    Py_DECREF(name);
    if (!function) return -1;
    int rc = PyModule_AddObjectRef(module, bind_def.ml_name, function);
    Py_DECREF(function);
    return rc;
}
