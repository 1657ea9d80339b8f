/* Step 1 of Producer.enqueue, compiled: EnqueueShortcut.take.
 *
 * The reference is EnqueueShortcutPy (aioproducer/engine/shortcut.py): on the
 * producer's loop, with no yield due, a plain producer and a record a lane
 * can take, hand it to the unkeyed or keyed lane and count it down. Each step
 * is made as the pure step makes it, in its order: the same answers, calls
 * and errors (tests/unit/test_shortcut.py runs both twins). Lanes of this
 * module's types are called directly (_lanes.h); any other lane by its
 * ``append``. The fields are read when the pure step reads them, not before:
 * code run in between (a mark's property, a comparison) may change them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_lanes.h"
#include "_state.h"

typedef struct {
    PyObject_HEAD
    PyObject *countdown, *keyed_lane, *lane, *loop_mark, *plain, *topics_seen;
} ShortcutObject;

#define SHORTCUT_FIELDS(X) X(countdown) X(keyed_lane) X(lane) X(loop_mark) X(plain) X(topics_seen)

/* threading.get_ident() as an int (a new reference), made once per thread in turn. */
static PyObject *current_ident(kernels_state *st) {
    unsigned long ident = PyThread_get_thread_ident();
    if (!st->ident_obj || st->ident != ident) {
        PyObject *obj = PyLong_FromUnsignedLong(ident);
        if (!obj) return NULL;
        Py_XSETREF(st->ident_obj, obj);
        st->ident = ident;
    }
    return Py_NewRef(st->ident_obj);
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

/* A field (a new reference), or NULL with Python's own error for one never set. */
static PyObject *field(PyObject *self, PyObject *value, const char *name) {
    if (!value)
        PyErr_Format(PyExc_AttributeError, "'%.200s' object has no attribute '%s'", Py_TYPE(self)->tp_name,
                     name);
    return Py_XNewRef(value);
}

#define FIELD(self, f) field((PyObject *)(self), (self)->f, #f)

/* ``a op b`` as Python's operator evaluates it (no identity shortcut): 1, 0, or -1. */
static int compare(PyObject *a, PyObject *b, int op) {
    PyObject *answer = PyObject_RichCompare(a, b, op);
    if (!answer) return -1;
    int truth = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    return truth;
}

/* take(topic, value, key, partition, timestamp_ms, headers) -> a handle or None. */
static PyObject *shortcut_take(PyObject *op, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    if (nargs != 6 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "take(topic, value, key, partition, timestamp_ms, headers)");
        return NULL;
    }
    kernels_state *st = (kernels_state *)PyType_GetModuleState(cls);
    ShortcutObject *self = (ShortcutObject *)op;
    PyObject *topic = args[0], *value = args[1], *key = args[2];
    PyObject *obj = NULL, *less = NULL, *fut = NULL, *result = NULL;
    int rc; /* 1 go on, 0 refuse, -1 an error was raised */
    /* self.loop_mark._thread_id != threading.get_ident() */
    obj = FIELD(self, loop_mark);
    if (!obj) goto done;
    PyObject *thread_id = PyObject_GetAttr(obj, st->str_thread_id);
    Py_CLEAR(obj);
    if (!thread_id) goto done;
    PyObject *ident = current_ident(st);
    rc = ident ? compare(thread_id, ident, Py_NE) : -1;
    Py_DECREF(thread_id);
    Py_XDECREF(ident);
    if (rc != 0) goto stop_inverted;
    /* self.countdown <= 0 */
    obj = FIELD(self, countdown);
    if (!obj) goto done;
    rc = counted_down(obj);
    Py_CLEAR(obj);
    if (rc != 0) goto stop_inverted;
    /* not self.plain */
    obj = FIELD(self, plain);
    if (!obj) goto done;
    rc = PyObject_IsTrue(obj);
    Py_CLEAR(obj);
    if (rc <= 0) goto stop;
    if (args[3] != Py_None || args[5] != Py_None || args[4] != Py_None || !PyBytes_CheckExact(value))
        goto refuse;
    /* left = self.countdown - 1, made before anything is appended: once a lane has
     * appended the record, nothing may fail before its handle is returned. */
    obj = FIELD(self, countdown);
    if (!obj) goto done;
    PyObject *one = PyLong_FromLong(1);
    less = one ? PyNumber_Subtract(obj, one) : NULL;
    Py_XDECREF(one);
    Py_CLEAR(obj);
    if (!less) goto done;
    if (key == Py_None) {
        obj = FIELD(self, lane);
        if (!obj) goto done;
        if (Py_IS_TYPE(obj, st->unkeyed_lane_type)) {
            fut = unkeyed_lane_append(st, obj, topic, value);
        } else {
            PyObject *call[3] = {obj, topic, value};
            fut = PyObject_VectorcallMethod(st->str_append, call, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
        Py_CLEAR(obj);
    } else if (PyBytes_CheckExact(key)) {
        obj = FIELD(self, keyed_lane);
        if (!obj) goto done;
        int none = obj == Py_None;
        Py_CLEAR(obj);
        if (none) goto refuse;
        obj = FIELD(self, topics_seen);
        if (!obj) goto done;
        rc = PySequence_Contains(obj, topic); /* as ``in``: a set topic is looked up as a frozenset */
        Py_CLEAR(obj);
        if (rc <= 0) goto stop;
        obj = FIELD(self, keyed_lane);
        if (!obj) goto done;
        if (Py_IS_TYPE(obj, st->keyed_lane_type)) {
            fut = keyed_lane_append(st, obj, topic, key, value);
        } else {
            PyObject *call[4] = {obj, topic, key, value};
            fut = PyObject_VectorcallMethod(st->str_append, call, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
        Py_CLEAR(obj);
    } else {
        goto refuse;
    }
    if (!fut) goto done;
    if (fut != Py_None) {
        Py_XSETREF(self->countdown, less); /* self.countdown = left: a field's store cannot fail */
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

/* EnqueueShortcut(loop_mark, countdown, topics_seen), as EnqueueShortcutPy.__init__. */
static int shortcut_init(PyObject *op, PyObject *args, PyObject *kwds) {
    static char *names[] = {"loop_mark", "countdown", "topics_seen", NULL};
    PyObject *loop_mark, *countdown, *topics_seen;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO:EnqueueShortcut", names, &loop_mark, &countdown,
                                     &topics_seen))
        return -1;
    ShortcutObject *self = (ShortcutObject *)op;
    Py_XSETREF(self->loop_mark, Py_NewRef(loop_mark));
    Py_XSETREF(self->countdown, Py_NewRef(countdown));
    Py_XSETREF(self->plain, Py_NewRef(Py_False));
    Py_XSETREF(self->topics_seen, Py_NewRef(topics_seen));
    Py_XSETREF(self->lane, Py_NewRef(Py_None));
    Py_XSETREF(self->keyed_lane, Py_NewRef(Py_None));
    return 0;
}

static int shortcut_traverse(PyObject *op, visitproc visit, void *arg) {
    ShortcutObject *self = (ShortcutObject *)op;
    Py_VISIT(Py_TYPE(op));
#define VISIT(f) Py_VISIT(self->f);
    SHORTCUT_FIELDS(VISIT)
    return 0;
}

static int shortcut_clear(PyObject *op) {
    ShortcutObject *self = (ShortcutObject *)op;
#define CLEAR(f) Py_CLEAR(self->f);
    SHORTCUT_FIELDS(CLEAR)
    return 0;
}

static void shortcut_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    shortcut_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

#define MEMBER(f) {#f, T_OBJECT_EX, offsetof(ShortcutObject, f), 0, NULL},
static PyMemberDef shortcut_members[] = {SHORTCUT_FIELDS(MEMBER){NULL, 0, 0, 0, NULL}};

static PyMethodDef shortcut_methods[] = {
    {"take", (PyCFunction)(void (*)(void))shortcut_take, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "take(topic, value, key, partition, timestamp_ms, headers) -> the record's handle, or None "
     "when the full path of enqueue must decide"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot shortcut_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, shortcut_init},
    {Py_tp_traverse, shortcut_traverse},
    {Py_tp_clear, shortcut_clear},
    {Py_tp_dealloc, shortcut_dealloc},
    {Py_tp_members, shortcut_members},
    {Py_tp_methods, shortcut_methods},
    {Py_tp_doc, "What step 1 of enqueue reads, and the step itself (see shortcut.py)."},
    {0, NULL},
};

static PyType_Spec shortcut_spec = {
    .name = "aioproducer._speedups._kernels.EnqueueShortcut",
    .basicsize = sizeof(ShortcutObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE_COMPAT,
    .slots = shortcut_slots,
};

int add_shortcut_type(PyObject *module) {
    kernels_state *st = get_kernels_state(module);
    st->str_thread_id = PyUnicode_InternFromString("_thread_id");
    st->str_append = PyUnicode_InternFromString("append");
    if (!st->str_thread_id || !st->str_append) return -1;
    st->shortcut_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &shortcut_spec, NULL);
    if (!st->shortcut_type) return -1;
    return PyModule_AddType(module, st->shortcut_type);
}
