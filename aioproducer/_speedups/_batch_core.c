/* BatchCore, compiled: the fields of a batch its per-record appends use, and
 * the appends (ProducerBatch.append_unkeyed, append_keyed).
 *
 * The reference is BatchCorePy (aioproducer/engine/batch.py): one record
 * without headers appended to an open batch (RecordBatchBuilder.append's
 * encoding and room check, ProducerBatch.try_append's bookkeeping), an unkeyed
 * one then counted for the sticky partitioner (engine/partitioner.py's
 * time_to_switch rule); the answer says whether it left the batch full
 * (ProducerBatch.is_full), for the lane to wake the sender.
 * tests/unit/test_kernels_equal.py checks that both leave the same bytes,
 * dicts, counters and answers on random input.
 *
 * ProducerBatch subclasses this type when the kernels are built (its other
 * fields stay Python slots, weak references included); the fields here are a
 * C struct's, exposed as properties. The builder is reached through its
 * C-level surface (_builder.h): it must be the compiled RecordBatchBuilder.
 * Whatever may run Python code (a key's __buffer__, a topic's __hash__, a
 * collection started by an allocation) runs before the batch is read for the
 * last time: its state and builder are checked again right before the commit,
 * and its counters are added to then.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <string.h>

#include "_batch_core.h"
#include "_builder.h"
#include "_outcome_layout.h"
#include "_partitioning.h"
#include "_varint.h"

static inline int is_open(kernels_state *st, BatchCore *b) {
    return b->state && st->open_state && b->state == st->open_state;
}

/* AttributeError for a field never set, as a Python slot raises it. */
static int unset(BatchCore *b, const char *name) {
    PyErr_Format(PyExc_AttributeError, "'%.200s' object has no attribute '%s'", Py_TYPE(b)->tp_name,
                 name);
    return -1;
}

/* Appends a record whose key and value are read (``kspan``, ``vspan``) to
 * ``self``, whose builder was ``builder`` (held) when its state was last seen
 * open: the code, or -1 with an error. ``produced`` NULL: a keyed record, not
 * counted for the sticky partitioner. ``handle`` not NULL: the record's handle
 * is made first (its delta is the record count before the append) and left there. */
static int append_exported(kernels_state *st, BatchCore *self, PyObject *builder, PyObject *ts_arg,
                           long long ts, int overflow, builder_span *kspan, builder_span *vspan,
                           Py_ssize_t reserve, Py_ssize_t bound, PyObject *produced, PyObject *topic,
                           Py_ssize_t limit, PyObject **handle) {
    if (produced && !PyDict_Check(produced)) {
        PyErr_SetString(PyExc_TypeError, "produced must be a dict");
        return -1;
    }
    /* The topic's hash may run code (a str subclass), and so may a collection
     * started by any allocation below: what is read of the dict before such a
     * call is held, and the batch is read again after the last of them. */
    PyObject *seen = NULL;
    Py_ssize_t before = 0;
    if (produced) {
        seen = Py_XNewRef(PyDict_GetItemWithError(produced, topic));
        if (!seen && PyErr_Occurred()) return -1;
        if (seen && !PyLong_CheckExact(seen)) {
            PyErr_SetString(PyExc_TypeError, "produced counts must be ints");
            Py_DECREF(seen);
            return -1;
        }
        if (seen) {
            before = PyLong_AsSsize_t(seen);
            if (before == -1 && PyErr_Occurred()) {
                Py_DECREF(seen);
                return -1;
            }
        }
    }
    PyObject *outcome = NULL, *record_handle = NULL, *after_obj = NULL;
    int result = -1;
    if (!is_open(st, self) || self->builder != builder) {
        result = CODE_REFUSED; /* sealed (or its builder replaced) by code run meanwhile */
        goto done;
    }
    if (handle) {
        outcome = Py_XNewRef(self->outcome);
        if (!outcome) {
            unset(self, "outcome");
            goto done;
        }
        if (!Py_IS_TYPE(outcome, st->batch_outcome_type)) {
            PyErr_SetString(PyExc_TypeError, "the batch's outcome is not a BatchOutcome");
            goto done;
        }
    }
    /* The builder checks its seal and the timestamp, sizes the record and
     * reserves its room: past this, only the commit below can refuse. */
    record_plan plan;
    int planned = builder_plan(builder, ts_arg, ts, overflow, kspan->len, vspan->len, &plan);
    if (planned <= 0) {
        result = planned; /* -1: an error; 0: no room (CODE_REFUSED) */
        goto done;
    }
    if ((bound > 0 && before > PY_SSIZE_T_MAX - bound) || (bound < 0 && before < PY_SSIZE_T_MIN - bound)) {
        PyErr_SetString(PyExc_OverflowError, "the topic's produced count would pass the C range");
        goto done;
    }
    Py_ssize_t after = before + bound;
    /* Every new object first: the handle, whose allocation may start a collection. */
    if (handle) {
        /* pack_sizes(key size or -1, value size or -1): a span of None has len -1 */
        unsigned long long sizes = ((unsigned long long)(kspan->len + 1) << 32) |
                                   (unsigned long long)(vspan->len + 1);
        record_handle = make_record_handle(outcome, plan.count, plan.ts, sizes);
        if (!record_handle) goto done;
    }
    if (produced) {
        after_obj = PyLong_FromSsize_t(after);
        if (!after_obj || PyDict_SetItem(produced, topic, after_obj) < 0) goto done;
    }
    /* The last check, after the last Python code (a topic's __hash__, a finalizer
     * started by an allocation): the batch still open with this builder, its
     * counters not past int64, the builder unchanged (builder_commit). */
    int refused = !is_open(st, self) || self->builder != builder;
    if (!refused && ((reserve > 0 && self->reserved > LLONG_MAX - reserve) ||
                     (reserve < 0 && self->reserved < LLONG_MIN - reserve))) {
        PyErr_SetString(PyExc_OverflowError, "the batch's reserved bytes would leave int64");
        refused = -1;
    }
    if (refused || builder_commit(builder, &plan, kspan, vspan) < 0) {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        if (produced) { /* ``seen`` is held: put back */
            if (seen) PyDict_SetItem(produced, topic, seen); /* an existing key: cannot fail */
            else PyDict_DelItem(produced, topic);
        }
        PyErr_Restore(exc_type, exc_value, exc_tb);
        if (refused == 1 && !PyErr_Occurred()) result = CODE_REFUSED;
        goto done;
    }
    self->reserved += reserve;
    if (bound > self->max_record_size) self->max_record_size = bound;
    Py_ssize_t filled = plan.offset + plan.total;
    int switch_due = produced && time_to_switch(after, limit, filled, bound);
    result = (switch_due ? CODE_SWITCH : CODE_APPENDED) +
             (filled >= self->batch_size ? CODE_FULL : 0); /* is_full(): the batch is open */
    if (handle) {
        *handle = record_handle;
        record_handle = NULL;
    }
done:
    Py_XDECREF(seen);
    Py_XDECREF(outcome);
    Py_XDECREF(record_handle);
    Py_XDECREF(after_obj);
    return result;
}

/* The batch's state is read first (a batch no longer open refuses, whatever the
 * record), then the builder reads the record, as the pure twin's builder does;
 * exporting the key's and value's buffers may run Python code (a __buffer__ of
 * 3.12+), after which append_exported reads the batch again. ``ts_arg`` None is
 * "now" (time.time_ns() // 1_000_000, the same clock). */
static int append_record(kernels_state *st, BatchCore *self, PyObject *ts_arg, PyObject *key,
                         PyObject *value, Py_ssize_t reserve, Py_ssize_t bound, PyObject *produced,
                         PyObject *topic, Py_ssize_t limit, PyObject **handle) {
    if (!self->state) return unset(self, "state");
    if (!is_open(st, self)) return CODE_REFUSED;
    PyObject *builder = self->builder;
    if (!builder) return unset(self, "builder");
    if (!Py_IS_TYPE(builder, st->builder_type)) {
        PyErr_SetString(PyExc_TypeError, "the batch's builder is not the compiled RecordBatchBuilder");
        return -1;
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
    rc = append_exported(st, self, builder, ts_arg, ts, overflow, &kspan, &vspan, reserve, bound,
                         produced, topic, limit, handle);
    builder_span_release(&vspan);
    builder_span_release(&kspan);
done:
    Py_DECREF(builder);
    return rc;
}

/* An int argument as a Py_ssize_t (its __index__ may run code: the caller reads
 * the batch after it). */
static int ssize_arg(PyObject *obj, Py_ssize_t *out) {
    *out = PyLong_AsSsize_t(obj);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The Python-level methods take a timestamp (an int), as their pure twins do. */
static int check_timestamp(PyObject *ts) {
    if (PyLong_Check(ts)) return 0;
    PyErr_Format(PyExc_TypeError, "timestamp_ms must be an int, not %.100s", Py_TYPE(ts)->tp_name);
    return -1;
}

/* batch.append_unkeyed(timestamp_ms, value, reserve, bound, produced, topic, limit) -> int */
static PyObject *core_append_unkeyed(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                                     Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs != 7 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "append_unkeyed takes 7 positional arguments");
        return NULL;
    }
    kernels_state *st = (kernels_state *)PyType_GetModuleState(cls);
    BatchCore *b = (BatchCore *)self;
    if (!b->state) return unset(b, "state"), NULL;
    if (!is_open(st, b)) return PyLong_FromLong(CODE_REFUSED);
    if (check_timestamp(args[0]) < 0) return NULL;
    Py_ssize_t reserve, bound, limit;
    if (ssize_arg(args[2], &reserve) < 0 || ssize_arg(args[3], &bound) < 0 ||
        ssize_arg(args[6], &limit) < 0)
        return NULL;
    int code = append_record(st, b, args[0], NULL, args[1], reserve, bound, args[4], args[5], limit,
                             NULL);
    return code < 0 ? NULL : PyLong_FromLong(code);
}

/* batch.append_keyed(timestamp_ms, key, value, reserve, bound) -> int */
static PyObject *core_append_keyed(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                                   Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs != 5 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "append_keyed takes 5 positional arguments");
        return NULL;
    }
    kernels_state *st = (kernels_state *)PyType_GetModuleState(cls);
    BatchCore *b = (BatchCore *)self;
    if (!b->state) return unset(b, "state"), NULL;
    if (!is_open(st, b)) return PyLong_FromLong(CODE_REFUSED);
    if (check_timestamp(args[0]) < 0) return NULL;
    Py_ssize_t reserve, bound;
    if (ssize_arg(args[3], &reserve) < 0 || ssize_arg(args[4], &bound) < 0) return NULL;
    int code = append_record(st, b, args[0], args[1], args[2], reserve, bound, NULL, NULL, 0, NULL);
    return code < 0 ? NULL : PyLong_FromLong(code);
}

/* ---- for the lanes ------------------------------------------------------------ */

/* For a batch the lanes do not append to directly (another class, or an outcome or
 * builder not compiled): the handle made through Python, as the pure lanes make it,
 * before the append: batch.outcome.handle(batch.record_count, ts, sizes). */
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

/* Whether the lanes append to ``batch`` by a C call: a BatchCore (a ProducerBatch)
 * whose outcome is the compiled BatchOutcome and builder the compiled builder. */
static int direct(kernels_state *st, PyObject *batch) {
    if (!PyObject_TypeCheck(batch, st->batch_core_type)) return 0;
    BatchCore *b = (BatchCore *)batch;
    return b->outcome && Py_IS_TYPE(b->outcome, st->batch_outcome_type) && b->builder &&
           Py_IS_TYPE(b->builder, st->builder_type);
}

/* "now" as an int, for a method call. */
static PyObject *now_obj(void) {
    long long ts;
    if (now_ms(&ts) < 0) return NULL;
    return PyLong_FromLongLong(ts);
}

/* batch.<name>(now, *rest) with the handle made first: the answer (new) and *made. */
static PyObject *append_by_method(PyObject *batch, const char *name, PyObject *const *rest,
                                  Py_ssize_t nrest, unsigned long long sizes, PyObject **made) {
    *made = NULL;
    PyObject *ts_obj = now_obj();
    if (!ts_obj) return NULL;
    *made = handle_by_method(batch, ts_obj, sizes);
    PyObject *got = NULL, *method = *made ? PyUnicode_InternFromString(name) : NULL;
    if (method) {
        PyObject *stack[8] = {batch, ts_obj};
        for (Py_ssize_t i = 0; i < nrest && i < 6; i++) stack[2 + i] = rest[i];
        got = PyObject_VectorcallMethod(method, stack, 2 + nrest, NULL);
        Py_DECREF(method);
    }
    Py_DECREF(ts_obj);
    if (!got) Py_CLEAR(*made);
    return got;
}

int call_append_unkeyed(kernels_state *st, PyObject *batch, PyObject *value, Py_ssize_t reserve,
                        Py_ssize_t bound, PyObject *produced, PyObject *topic, PyObject *limit_obj,
                        PyObject **answer, PyObject **handle) {
    *answer = NULL;
    *handle = NULL;
    if (direct(st, batch)) {
        Py_ssize_t limit = PyLong_AsSsize_t(limit_obj);
        if (limit == -1 && PyErr_Occurred()) return -1;
        return append_record(st, (BatchCore *)batch, Py_None, NULL, value, reserve, bound, produced,
                             topic, limit, handle);
    }
    Py_ssize_t vlen = value == Py_None ? -1 : PyObject_Size(value);
    if (vlen < 0 && PyErr_Occurred()) return -1;
    PyObject *reserve_obj = PyLong_FromSsize_t(reserve);
    PyObject *bound_obj = reserve_obj ? PyLong_FromSsize_t(bound) : NULL;
    PyObject *made = NULL, *got = NULL;
    if (bound_obj) {
        PyObject *rest[6] = {value, reserve_obj, bound_obj, produced, topic, limit_obj};
        got = append_by_method(batch, "append_unkeyed", rest, 6, (unsigned long long)(vlen + 1), &made);
    }
    Py_XDECREF(reserve_obj);
    Py_XDECREF(bound_obj);
    if (!got) return -1;
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

int call_append_keyed(kernels_state *st, PyObject *batch, PyObject *key, PyObject *value,
                      Py_ssize_t reserve, Py_ssize_t bound, PyObject **handle) {
    *handle = NULL;
    if (direct(st, batch))
        return append_record(st, (BatchCore *)batch, Py_None, key, value, reserve, bound, NULL, NULL,
                             0, handle);
    Py_ssize_t klen = PyObject_Size(key);
    if (klen < 0) return -1;
    Py_ssize_t vlen = PyObject_Size(value);
    if (vlen < 0) return -1;
    PyObject *reserve_obj = PyLong_FromSsize_t(reserve);
    PyObject *bound_obj = reserve_obj ? PyLong_FromSsize_t(bound) : NULL;
    PyObject *made = NULL, *answer = NULL;
    if (bound_obj) {
        PyObject *rest[4] = {key, value, reserve_obj, bound_obj};
        answer = append_by_method(batch, "append_keyed", rest, 4,
                                  ((unsigned long long)(klen + 1) << 32) | (unsigned long long)(vlen + 1),
                                  &made);
    }
    Py_XDECREF(reserve_obj);
    Py_XDECREF(bound_obj);
    if (!answer) return -1;
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

/* ---- the type ------------------------------------------------------------------- */

static int core_traverse(PyObject *op, visitproc visit, void *arg) {
    BatchCore *b = (BatchCore *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(b->state);
    Py_VISIT(b->builder);
    Py_VISIT(b->outcome);
    return 0;
}

static int core_clear(PyObject *op) {
    BatchCore *b = (BatchCore *)op;
    Py_CLEAR(b->state);
    Py_CLEAR(b->builder);
    Py_CLEAR(b->outcome);
    return 0;
}

static void core_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    core_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

/* The object fields: offsets into the struct, the same for every instance. */
enum { F_STATE, F_BUILDER, F_OUTCOME };
static const char *const object_names[] = {"state", "builder", "outcome"};

static PyObject **object_field(PyObject *op, void *which) {
    BatchCore *b = (BatchCore *)op;
    switch ((int)(intptr_t)which) {
    case F_STATE: return &b->state;
    case F_BUILDER: return &b->builder;
    default: return &b->outcome;
    }
}

static PyObject *get_object(PyObject *op, void *which) {
    PyObject *value = *object_field(op, which);
    if (!value) return unset((BatchCore *)op, object_names[(intptr_t)which]), NULL;
    return Py_NewRef(value);
}

static int set_object(PyObject *op, PyObject *value, void *which) {
    if (!value) {
        PyErr_Format(PyExc_AttributeError, "cannot delete '%s'", object_names[(intptr_t)which]);
        return -1;
    }
    Py_XSETREF(*object_field(op, which), Py_NewRef(value));
    return 0;
}

enum { N_RESERVED, N_MAX_RECORD_SIZE, N_BATCH_SIZE };
static const char *const number_names[] = {"reserved", "max_record_size", "batch_size"};

static long long *number_field(PyObject *op, void *which) {
    BatchCore *b = (BatchCore *)op;
    switch ((int)(intptr_t)which) {
    case N_RESERVED: return &b->reserved;
    case N_MAX_RECORD_SIZE: return &b->max_record_size;
    default: return &b->batch_size;
    }
}

static PyObject *get_number(PyObject *op, void *which) {
    return PyLong_FromLongLong(*number_field(op, which));
}

static int set_number(PyObject *op, PyObject *value, void *which) {
    const char *name = number_names[(intptr_t)which];
    if (!value) {
        PyErr_Format(PyExc_AttributeError, "cannot delete '%s'", name);
        return -1;
    }
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", name, Py_TYPE(value)->tp_name);
        return -1;
    }
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "%s must fit in int64, got %R", name, value);
        return -1;
    }
    *number_field(op, which) = n;
    return 0;
}

#define OBJECT_FIELD(name, which, doc) {name, get_object, set_object, doc, (void *)(intptr_t)(which)}
#define NUMBER_FIELD(name, which, doc) {name, get_number, set_number, doc, (void *)(intptr_t)(which)}

static PyGetSetDef core_getset[] = {
    OBJECT_FIELD("state", F_STATE, "where the batch is in its life (a BatchState)"),
    OBJECT_FIELD("builder", F_BUILDER, "the batch's RecordBatchBuilder"),
    OBJECT_FIELD("outcome", F_OUTCOME, "what happened to the batch (a BatchOutcome)"),
    NUMBER_FIELD("reserved", N_RESERVED, "bytes of buffer memory the batch holds"),
    NUMBER_FIELD("max_record_size", N_MAX_RECORD_SIZE, "the largest record bound appended"),
    NUMBER_FIELD("batch_size", N_BATCH_SIZE, "the size at which the batch is full"),
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef core_methods[] = {
    {"append_unkeyed", (PyCFunction)(void (*)(void))core_append_unkeyed,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "append_unkeyed(timestamp_ms, value, reserve, bound, produced, topic, limit) -> "
     "0 refused, 1 appended, 2 appended and the sticky partition's turn is over, either plus 4 "
     "when the batch is full now"},
    {"append_keyed", (PyCFunction)(void (*)(void))core_append_keyed,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "append_keyed(timestamp_ms, key, value, reserve, bound) -> 0 refused, 1 appended, "
     "plus 4 when the batch is full now"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot core_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_traverse, core_traverse},
    {Py_tp_clear, core_clear},
    {Py_tp_dealloc, core_dealloc},
    {Py_tp_methods, core_methods},
    {Py_tp_getset, core_getset},
    {Py_tp_doc, "The fields of a batch its per-record appends use, and the appends."},
    {0, NULL},
};

static PyType_Spec core_spec = {
    .name = "aioproducer._speedups._kernels.BatchCore",
    .basicsize = sizeof(BatchCore),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = core_slots,
};

/* register_open_state(state): the BatchState the appends take records in. */
static PyObject *k_register_open_state(PyObject *module, PyObject *state) {
    Py_XSETREF(get_kernels_state(module)->open_state, Py_NewRef(state));
    Py_RETURN_NONE;
}

static PyMethodDef register_def = {
    "register_open_state", k_register_open_state, METH_O,
    "register_open_state(state): the batch state (BatchState.OPEN) that takes records",
};

int add_batch_core_type(PyObject *module) {
    kernels_state *st = get_kernels_state(module);
    st->batch_core_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &core_spec, NULL);
    if (!st->batch_core_type || PyModule_AddType(module, st->batch_core_type) < 0) return -1;
    return add_module_function(module, &register_def);
}
