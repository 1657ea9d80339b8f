/* Sensor.record and Sensor.record_summary, compiled.
 *
 * The reference is aioproducer/metrics.py: a sensor records into each of its
 * stats, then into its parents (recursively), each stat through its record or
 * record_summary method. The producer records a few dozen stats per Produce
 * request, and each was a Python call or two (the sensor's, the stat's, and a
 * parent sensor's). Here the stats of the six built-in kinds (WindowedSum, Avg,
 * WindowedCount, Max, CumulativeSum, CumulativeCount) are updated in place with
 * the same arithmetic (PyNumber_InPlaceAdd and the ">" of Python, on the same
 * objects); any other stat, a subclass included, gets its method called, as
 * does a parent that is not exactly a Sensor.
 * A windowed stat whose current sample is missing or a window old still calls
 * its own _advance(now), once per window. tests/unit/test_sensor_kernel.py checks
 * that both leave the same samples, totals and measures on random input.
 *
 * bind_sensor_kinds(sensor_type, windowed_sum, avg, windowed_count, max,
 * cumulative_sum, cumulative_count) is called once when aioproducer.metrics is
 * imported; it reads where the Sensor's slots sit and returns the two methods.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_varint.h"

enum { K_SUM, K_AVG, K_COUNT, K_MAX, K_CSUM, K_CCOUNT, N_KINDS };

static struct {
    PyTypeObject *sensor_type;
    Py_ssize_t stats_offset, parents_offset;
    PyTypeObject *kind[N_KINDS];
    PyObject *str_head, *str_window, *str_advance, *str_start, *str_value, *str_count, *str_total;
    PyObject *str_record, *str_record_summary;
} sensors;

static int kind_of(PyObject *stat) {
    PyTypeObject *type = Py_TYPE(stat);
    for (int k = 0; k < N_KINDS; k++)
        if (type == sensors.kind[k]) return k;
    return -1;
}

/* obj.name += delta */
static int add_to(PyObject *obj, PyObject *name, PyObject *delta) {
    PyObject *old = PyObject_GetAttr(obj, name);
    if (!old) return -1;
    PyObject *sum = PyNumber_InPlaceAdd(old, delta);
    Py_DECREF(old);
    if (!sum) return -1;
    int rc = PyObject_SetAttr(obj, name, sum);
    Py_DECREF(sum);
    return rc;
}

/* Whether ``now - start >= window``, as Python computes it: in doubles when all
 * three are floats (the producer's monotonic clock), else with Python's own
 * arithmetic (exact for ints). 1, 0, or -1 on an error. */
static int window_over(PyObject *now, PyObject *start, PyObject *window) {
    if (PyFloat_CheckExact(now) && PyFloat_CheckExact(start) && PyFloat_CheckExact(window))
        return PyFloat_AS_DOUBLE(now) - PyFloat_AS_DOUBLE(start) >= PyFloat_AS_DOUBLE(window);
    PyObject *elapsed = PyNumber_Subtract(now, start);
    if (!elapsed) return -1;
    int over = PyObject_RichCompareBool(elapsed, window, Py_GE);
    Py_DECREF(elapsed);
    return over;
}

/* The sample a record at ``now`` goes into (a new reference), as SampledStat.record finds it. */
static PyObject *current_sample(PyObject *stat, PyObject *now) {
    PyObject *head = PyObject_GetAttr(stat, sensors.str_head);
    if (!head) return NULL;
    if (head != Py_None) {
        PyObject *start = PyObject_GetAttr(head, sensors.str_start);
        if (!start) {
            Py_DECREF(head);
            return NULL;
        }
        PyObject *window = PyObject_GetAttr(stat, sensors.str_window);
        int over = window ? window_over(now, start, window) : -1;
        Py_DECREF(start);
        Py_XDECREF(window);
        if (over < 0) {
            Py_DECREF(head);
            return NULL;
        }
        if (!over) return head;
    }
    Py_DECREF(head);
    return PyObject_CallMethodOneArg(stat, sensors.str_advance, now);
}

/* ``obj``'s own record(value, now, count) or record_summary(value, largest, count, now). */
static int call_record(PyObject *obj, int summary, PyObject *value, PyObject *largest,
                       PyObject *now_obj, PyObject *count) {
    PyObject *r = summary
        ? PyObject_CallMethodObjArgs(obj, sensors.str_record_summary, value, largest, count,
                                     now_obj, NULL)
        : PyObject_CallMethodObjArgs(obj, sensors.str_record, value, now_obj, count, NULL);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* One stat's record(value, now, count) or, when ``summary``, record_summary(total=value,
 * largest, count, now). */
static int record_stat(PyObject *stat, int summary, PyObject *value, PyObject *largest,
                       PyObject *now_obj, PyObject *count) {
    int kind = kind_of(stat);
    if (kind < 0) return call_record(stat, summary, value, largest, now_obj, count);
    if (kind == K_CSUM) return add_to(stat, sensors.str_total, value);
    if (kind == K_CCOUNT) return add_to(stat, sensors.str_total, count);
    PyObject *sample = current_sample(stat, now_obj);
    if (!sample) return -1;
    int rc = 0;
    if (kind == K_SUM || kind == K_AVG) {
        rc = add_to(sample, sensors.str_value, value);
    } else if (kind == K_MAX) {
        /* Max.record_summary records the largest value */
        PyObject *candidate = summary ? largest : value;
        PyObject *held = PyObject_GetAttr(sample, sensors.str_value);
        if (!held) {
            rc = -1;
        } else {
            int greater = PyObject_RichCompareBool(candidate, held, Py_GT);
            Py_DECREF(held);
            if (greater < 0) rc = -1;
            else if (greater) rc = PyObject_SetAttr(sample, sensors.str_value, candidate);
        }
    }
    if (rc == 0) rc = add_to(sample, sensors.str_count, count);
    Py_DECREF(sample);
    return rc;
}

static int record_sensor(PyObject *sensor, int summary, PyObject *value, PyObject *largest,
                         PyObject *now_obj, PyObject *count, int depth) {
    if (depth > 64) {
        PyErr_SetString(PyExc_RecursionError, "sensor parents nest too deep");
        return -1;
    }
    if (depth > 0 && !Py_IS_TYPE(sensor, sensors.sensor_type)) {
        /* A parent that is not exactly a Sensor (a subclass may override
         * record): its own method, as the pure sensor calls it. The sensor the
         * kernel was called on is walked whatever its class: its record is
         * this kernel. */
        return call_record(sensor, summary, value, largest, now_obj, count);
    }
    PyObject *stats = *(PyObject **)((char *)sensor + sensors.stats_offset);
    PyObject *parents = *(PyObject **)((char *)sensor + sensors.parents_offset);
    if (!stats || !parents) {
        PyErr_SetString(PyExc_AttributeError, "a sensor's _stats or parents is not set");
        return -1;
    }
    /* Held across the calls below, which may run Python code. */
    Py_INCREF(stats);
    Py_INCREF(parents);
    int rc = 0;
    PyObject *stat_seq = PySequence_Fast(stats, "a sensor's _stats must be a sequence");
    PyObject *parent_seq = stat_seq ? PySequence_Fast(parents, "a sensor's parents must be a sequence")
                                    : NULL;
    if (!parent_seq) {
        rc = -1;
    } else {
        for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(stat_seq); i++) {
            PyObject *stat = PySequence_Fast_GET_ITEM(stat_seq, i);
            Py_INCREF(stat);
            rc = record_stat(stat, summary, value, largest, now_obj, count);
            Py_DECREF(stat);
        }
        for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(parent_seq); i++) {
            PyObject *parent = PySequence_Fast_GET_ITEM(parent_seq, i);
            Py_INCREF(parent);
            rc = record_sensor(parent, summary, value, largest, now_obj, count, depth + 1);
            Py_DECREF(parent);
        }
    }
    Py_XDECREF(stat_seq);
    Py_XDECREF(parent_seq);
    Py_DECREF(stats);
    Py_DECREF(parents);
    return rc;
}

static PyObject *small_one;

/* Fills ``out`` (nparams entries) from fastcall arguments with keywords, as a
 * Python signature with those parameter names would; unset ones stay NULL. */
static int fill_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                     const char *const *names, int nparams, PyObject **out, const char *sig) {
    for (int i = 0; i < nparams; i++) out[i] = NULL;
    if (nargs > nparams) goto bad;
    for (Py_ssize_t i = 0; i < nargs; i++) out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, j);
        int found = -1;
        for (int i = 0; i < nparams; i++) {
            if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0) found = i;
        }
        if (found < 0 || out[found]) goto bad;
        out[found] = args[nargs + j];
    }
    return 0;
bad:
    PyErr_Format(PyExc_TypeError, "%s: unexpected or repeated arguments", sig);
    return -1;
}

/* sensor.record(value, now, count=1) */
static PyObject *k_sensor_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
    static const char *const names[] = {"value", "now", "count"};
    PyObject *a[3];
    if (fill_args(args, nargs, kwnames, names, 3, a, "record(value, now, count=1)") < 0) return NULL;
    if (!a[0] || !a[1]) {
        PyErr_SetString(PyExc_TypeError, "record(value, now, count=1): value and now are required");
        return NULL;
    }
    if (!sensors.sensor_type || !PyObject_TypeCheck(self, sensors.sensor_type)) {
        PyErr_SetString(PyExc_TypeError, "record is a method of the sensor class bound last");
        return NULL;
    }
    PyObject *count = a[2] ? a[2] : small_one;
    if (record_sensor(self, 0, a[0], Py_None, a[1], count, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

/* sensor.record_summary(total, largest, count, now): nothing when count is 0 */
static PyObject *k_sensor_record_summary(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                         PyObject *kwnames) {
    static const char *const names[] = {"total", "largest", "count", "now"};
    PyObject *a[4];
    if (fill_args(args, nargs, kwnames, names, 4, a, "record_summary(total, largest, count, now)") < 0)
        return NULL;
    if (!a[0] || !a[1] || !a[2] || !a[3]) {
        PyErr_SetString(PyExc_TypeError, "record_summary(total, largest, count, now) takes all four");
        return NULL;
    }
    if (!sensors.sensor_type || !PyObject_TypeCheck(self, sensors.sensor_type)) {
        PyErr_SetString(PyExc_TypeError, "record_summary is a method of the sensor class bound last");
        return NULL;
    }
    int any = PyObject_IsTrue(a[2]);
    if (any < 0) return NULL;
    if (!any) Py_RETURN_NONE;
    if (record_sensor(self, 1, a[0], a[1], a[3], a[2], 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef sensor_record_def = {
    "record", (PyCFunction)(void (*)(void))k_sensor_record, METH_FASTCALL | METH_KEYWORDS,
    "record(value, now, count=1): into each stat, then into the parents",
};

static PyMethodDef sensor_record_summary_def = {
    "record_summary", (PyCFunction)(void (*)(void))k_sensor_record_summary,
    METH_FASTCALL | METH_KEYWORDS,
    "record_summary(total, largest, count, now): count events at once",
};

/* bind_sensor_kinds(sensor_type, windowed_sum, avg, windowed_count, max, cumulative_sum,
 * cumulative_count) -> (record, record_summary) */
static PyObject *k_bind_sensor_kinds(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1 + N_KINDS) {
        PyErr_SetString(PyExc_TypeError, "bind_sensor_kinds(sensor_type, windowed_sum, avg, "
                                         "windowed_count, max, cumulative_sum, cumulative_count)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (!PyType_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "bind_sensor_kinds takes types");
            return NULL;
        }
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    Py_ssize_t stats_offset = slot_offset(type, "_stats", 0);
    if (stats_offset < 0) return NULL;
    Py_ssize_t parents_offset = slot_offset(type, "parents", 0);
    if (parents_offset < 0) return NULL;
    if (!sensors.str_head) {
        const char *names[] = {"_head", "_window", "_advance", "start", "value", "count", "total",
                               "record", "record_summary"};
        PyObject **slots[] = {&sensors.str_head, &sensors.str_window, &sensors.str_advance,
                              &sensors.str_start, &sensors.str_value, &sensors.str_count,
                              &sensors.str_total, &sensors.str_record, &sensors.str_record_summary};
        for (int i = 0; i < 9; i++) {
            *slots[i] = PyUnicode_InternFromString(names[i]);
            if (!*slots[i]) return NULL;
        }
        small_one = PyLong_FromLong(1);
        if (!small_one) return NULL;
    }
    PyObject *record = PyDescr_NewMethod(type, &sensor_record_def);
    PyObject *summary = record ? PyDescr_NewMethod(type, &sensor_record_summary_def) : NULL;
    PyObject *pair = summary ? PyTuple_Pack(2, record, summary) : NULL;
    Py_XDECREF(record);
    Py_XDECREF(summary);
    if (!pair) return NULL;
    sensors.stats_offset = stats_offset;
    sensors.parents_offset = parents_offset;
    Py_INCREF(type);
    Py_XSETREF(sensors.sensor_type, type);
    for (int k = 0; k < N_KINDS; k++) {
        Py_INCREF(args[1 + k]);
        Py_XSETREF(sensors.kind[k], (PyTypeObject *)args[1 + k]);
    }
    return pair;
}

static PyMethodDef bind_sensor_def = {
    "bind_sensor_kinds", (PyCFunction)(void (*)(void))k_bind_sensor_kinds, METH_FASTCALL,
    "bind_sensor_kinds(sensor_type, windowed_sum, avg, windowed_count, max, cumulative_sum, "
    "cumulative_count) -> (record, record_summary) methods of sensor_type",
};

int add_sensor_kernel(PyObject *module) { return add_module_function(module, &bind_sensor_def); }
