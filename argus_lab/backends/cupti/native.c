/*
 * The native per-launch path of argus_lab's CUPTI timing run (built at first use by native.py).
 *
 * A region boundary calls set_current(instance id): one METH_O call that stores the id in a thread-local.  A
 * CUPTI callback subscribed to the launch (and, when asked, copy/set) API calls only appends, at the API
 * entry, (correlation id, current instance id, thread id, CLOCK_REALTIME ns, callback id, domain) to
 * preallocated arrays, and the time of the API exit; no Python runs per launch.  A call made inside another
 * subscribed call on the same thread (the driver launch a runtime launch makes) is not recorded: the kernel
 * carries the outer call's correlation id, and CUPTI's activity API does not record such nested calls either.
 * After the run, export() hands the arrays to Python, where they become the same raw record families the
 * decoder already joins (external correlation rows and API rows).
 *
 * Mode 2 is the fallback when the callback API cannot be used (another subscriber holds CUPTI): the same
 * set_current() call pushes the instance id as CUPTI external correlation id (kind CUSTOM2) on the calling
 * thread, popping the previous one, and the activity records carry it as before.
 *
 * Mode 3 (benchmarks only) subscribes the same callbacks with a callback that returns at once: what CUPTI's
 * callback dispatch costs by itself, apart from the recording.
 *
 * No CUPTI header is needed to build this file: the few types below follow cupti_callbacks.h and
 * cupti_activity.h (CUpti_CallbackData, CUpti_CallbackFunc, the subscriber and external-correlation calls),
 * and the functions are taken with dlsym() from the libcupti file cupti-python already loaded.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- CUPTI declarations (layouts from cupti_callbacks.h; enums are C ints) ---------------------------- */
typedef int cupti_result_t;
typedef void *cupti_subscriber_t;

typedef struct {
    int callback_site; /* CUpti_ApiCallbackSite: 0 = API enter, 1 = API exit */
    const char *function_name;
    const void *function_params;
    void *function_return_value;
    const char *symbol_name;
    void *context;
    uint32_t context_uid;
    uint64_t *correlation_data;
    uint32_t correlation_id;
} cupti_callback_data_t;

typedef void (*cupti_callback_t)(void *userdata, int domain, uint32_t cbid, const void *data);
typedef cupti_result_t (*subscribe_t)(cupti_subscriber_t *, cupti_callback_t, void *);
typedef cupti_result_t (*unsubscribe_t)(cupti_subscriber_t);
typedef cupti_result_t (*enable_callback_t)(uint32_t, cupti_subscriber_t, int, uint32_t);
typedef cupti_result_t (*result_string_t)(cupti_result_t, const char **);
typedef cupti_result_t (*push_external_t)(int, uint64_t);
typedef cupti_result_t (*pop_external_t)(int, uint64_t *);

enum { DOMAIN_DRIVER = 1, DOMAIN_RUNTIME = 2, SITE_ENTER = 0, EXTERNAL_CUSTOM2 = 5 };
enum { MODE_OFF = 0, MODE_CALLBACKS = 1, MODE_EXTERNAL = 2, MODE_CALLBACKS_EMPTY = 3 };
#define NEST_MAX 8

/* ---- state -------------------------------------------------------------------------------------------- */
static struct {
    int mode;
    int generation;
    void *lib;
    cupti_subscriber_t subscriber;
    unsubscribe_t unsubscribe;
    enable_callback_t enable_callback;
    result_string_t result_string;
    push_external_t push_external;
    pop_external_t pop_external;
    int64_t capacity;
    int64_t count;   /* slots taken (may pass capacity: the excess is counted as dropped) */
    int64_t dropped;
    uint32_t *correlation;
    int64_t *instance;
    uint64_t *thread;
    int64_t *start;
    int64_t *end;
    uint32_t *cbid;
    uint8_t *domain;
} S;

/* Per-thread state in one struct: one thread-local address computation per callback (the module is loaded with
 * dlopen, so each distinct __thread variable would cost its own __tls_get_addr call). */
typedef struct {
    int64_t current; /* the calling thread's innermost open region instance (0 = none) */
    int pushed;      /* MODE_EXTERNAL: an id is pushed on this thread */
    int generation;  /* the run the nesting below belongs to */
    int depth;       /* subscribed API calls open on this thread (a runtime launch calls the driver) */
    int64_t slot[NEST_MAX];
} thread_state_t;

static __thread thread_state_t T;

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the CUPTI callback: runs on the launching thread, inside the API call; never touches Python ------- */
static void on_api_call(void *userdata, int domain, uint32_t cbid, const void *raw) {
    const cupti_callback_data_t *data = (const cupti_callback_data_t *)raw;
    thread_state_t *t;
    (void)userdata;
    if (S.mode == MODE_CALLBACKS_EMPTY)
        return;
    t = &T;
    __asm__("" : "+r"(t)); /* keep the address: the compiler would otherwise recompute it after every call */
    if (t->generation != S.generation) {
        t->generation = S.generation;
        t->depth = 0;
    }
    if (data->callback_site == SITE_ENTER) {
        int64_t slot = -1;
        if (t->depth == 0) { /* an outermost launch call: record it (a nested one shares its kernel) */
            slot = __atomic_fetch_add(&S.count, 1, __ATOMIC_RELAXED);
            if (slot < S.capacity) {
                S.correlation[slot] = data->correlation_id;
                S.instance[slot] = t->current;
                S.thread[slot] = (uint64_t)pthread_self();
                S.start[slot] = now_ns();
                S.end[slot] = 0;
                S.cbid[slot] = cbid;
                S.domain[slot] = (uint8_t)domain;
            } else {
                __atomic_fetch_add(&S.dropped, 1, __ATOMIC_RELAXED);
                slot = -1;
            }
        }
        if (t->depth < NEST_MAX)
            t->slot[t->depth] = slot;
        t->depth++;
        return;
    }
    if (t->depth == 0) /* the entry happened before the subscription */
        return;
    t->depth--;
    if (t->depth < NEST_MAX && t->slot[t->depth] >= 0)
        S.end[t->slot[t->depth]] = now_ns();
}

/* ---- helpers ------------------------------------------------------------------------------------------ */
static PyObject *cupti_error(const char *what, cupti_result_t rc) {
    const char *text = NULL;
    if (S.result_string == NULL || S.result_string(rc, &text) != 0 || text == NULL)
        text = "unknown";
    PyErr_Format(PyExc_RuntimeError, "%s returned CUPTI error %d (%s)", what, rc, text);
    return NULL;
}

static void release_arrays(void) {
    free(S.correlation);
    free(S.instance);
    free(S.thread);
    free(S.start);
    free(S.end);
    free(S.cbid);
    free(S.domain);
    S.correlation = NULL;
    S.instance = NULL;
    S.thread = NULL;
    S.start = NULL;
    S.end = NULL;
    S.cbid = NULL;
    S.domain = NULL;
    S.capacity = 0;
}

static int allocate_arrays(int64_t capacity) {
    release_arrays();
    /* calloc: pages are only backed when a launch touches them */
    S.correlation = calloc((size_t)capacity, sizeof(uint32_t));
    S.instance = calloc((size_t)capacity, sizeof(int64_t));
    S.thread = calloc((size_t)capacity, sizeof(uint64_t));
    S.start = calloc((size_t)capacity, sizeof(int64_t));
    S.end = calloc((size_t)capacity, sizeof(int64_t));
    S.cbid = calloc((size_t)capacity, sizeof(uint32_t));
    S.domain = calloc((size_t)capacity, sizeof(uint8_t));
    if (!S.correlation || !S.instance || !S.thread || !S.start || !S.end || !S.cbid || !S.domain) {
        release_arrays();
        return -1;
    }
    S.capacity = capacity;
    S.count = 0;
    S.dropped = 0;
    S.generation++;
    return 0;
}

static const char *dl_error(void) {
    const char *e = dlerror();
    return e != NULL ? e : "no detail";
}

static void *symbol(const char *name) {
    void *p = dlsym(S.lib, name);
    if (p == NULL)
        PyErr_Format(PyExc_RuntimeError, "libcupti has no symbol %s (%s)", name, dl_error());
    return p;
}

/* Enables the callback ids of one domain; an id CUPTI refuses (e.g. one this CUPTI version retired) is appended to
 * `refused` as (domain, cbid, result) and skipped.  Returns how many were enabled, -1 on a Python error. */
static int enable_list(PyObject *ids, int domain, PyObject *refused) {
    PyObject *seq = PySequence_Fast(ids, "callback ids must be a sequence of ints");
    if (seq == NULL)
        return -1;
    int enabled = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        cupti_result_t rc = S.enable_callback(1, S.subscriber, domain, (uint32_t)v);
        if (rc == 0) {
            enabled++;
            continue;
        }
        PyObject *item = Py_BuildValue("(ili)", domain, v, rc);
        if (item == NULL || PyList_Append(refused, item) != 0) {
            Py_XDECREF(item);
            Py_DECREF(seq);
            return -1;
        }
        Py_DECREF(item);
    }
    Py_DECREF(seq);
    return enabled;
}

/* ---- Python API --------------------------------------------------------------------------------------- */
PyDoc_STRVAR(set_current_doc, "set_current(instance_id): the calling thread's innermost open region instance.");
static PyObject *set_current(PyObject *self, PyObject *arg) {
    int64_t v = PyLong_AsLongLong(arg);
    (void)self;
    if (v == -1 && PyErr_Occurred())
        return NULL;
    T.current = v;
    if (S.mode == MODE_EXTERNAL) {
        uint64_t last = 0;
        if (T.pushed)
            S.pop_external(EXTERNAL_CUSTOM2, &last);
        T.pushed = v != 0;
        if (v != 0)
            S.push_external(EXTERNAL_CUSTOM2, (uint64_t)v);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(current_doc, "current() -> int: the calling thread's current instance id.");
static PyObject *current(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLongLong(T.current);
}

PyDoc_STRVAR(start_doc,
             "start(libcupti, runtime_cbids, driver_cbids, capacity, mode): mode 1 subscribes the launch callback "
             "(arrays of `capacity` launches) and returns (runtime ids enabled, driver ids enabled, [(domain, cbid, "
             "result) refused]); mode 2 pushes external correlation ids instead and returns None; mode 3 (benchmarks) "
             "subscribes a callback that records nothing.");
static PyObject *start(PyObject *self, PyObject *args) {
    const char *path;
    PyObject *runtime_ids, *driver_ids;
    long long capacity;
    int mode;
    (void)self;
    if (!PyArg_ParseTuple(args, "sOOLi", &path, &runtime_ids, &driver_ids, &capacity, &mode))
        return NULL;
    if (S.mode != MODE_OFF) {
        PyErr_SetString(PyExc_RuntimeError, "the native launch path is already started; stop() it first");
        return NULL;
    }
    if (mode != MODE_CALLBACKS && mode != MODE_EXTERNAL && mode != MODE_CALLBACKS_EMPTY) {
        PyErr_Format(PyExc_ValueError,
                     "mode must be 1 (callbacks), 2 (external correlation) or 3 (empty callbacks), got %d", mode);
        return NULL;
    }
    /* the copy cupti-python loaded, never a second one (two libcupti copies in a process do not mix) */
    S.lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (S.lib == NULL) {
        PyErr_Format(PyExc_RuntimeError, "libcupti %s is not loaded in this process (%s)", path, dl_error());
        return NULL;
    }
    S.result_string = (result_string_t)dlsym(S.lib, "cuptiGetResultString");
    if (mode == MODE_EXTERNAL) {
        S.push_external = (push_external_t)symbol("cuptiActivityPushExternalCorrelationId");
        S.pop_external = (pop_external_t)symbol("cuptiActivityPopExternalCorrelationId");
        if (S.push_external == NULL || S.pop_external == NULL)
            return NULL;
        S.generation++;
        S.mode = MODE_EXTERNAL;
        Py_RETURN_NONE;
    }
    subscribe_t subscribe = (subscribe_t)symbol("cuptiSubscribe");
    S.unsubscribe = (unsubscribe_t)symbol("cuptiUnsubscribe");
    S.enable_callback = (enable_callback_t)symbol("cuptiEnableCallback");
    if (subscribe == NULL || S.unsubscribe == NULL || S.enable_callback == NULL)
        return NULL;
    if (capacity < 1) {
        PyErr_SetString(PyExc_ValueError, "capacity must be at least 1");
        return NULL;
    }
    if (allocate_arrays(capacity) != 0)
        return PyErr_NoMemory();
    cupti_result_t rc = subscribe(&S.subscriber, on_api_call, NULL);
    if (rc != 0)
        return cupti_error("cuptiSubscribe", rc);
    PyObject *refused = PyList_New(0);
    if (refused == NULL)
        goto fail;
    int n_runtime = enable_list(runtime_ids, DOMAIN_RUNTIME, refused);
    int n_driver = n_runtime < 0 ? -1 : enable_list(driver_ids, DOMAIN_DRIVER, refused);
    if (n_runtime < 0 || n_driver < 0)
        goto fail;
    if (n_runtime + n_driver == 0) {
        PyErr_Format(PyExc_RuntimeError, "CUPTI refused every launch callback id (%R)", refused);
        goto fail;
    }
    S.mode = mode;
    return Py_BuildValue("(iiN)", n_runtime, n_driver, refused);
fail:
    Py_XDECREF(refused);
    S.unsubscribe(S.subscriber);
    S.subscriber = NULL;
    return NULL;
}

PyDoc_STRVAR(stop_doc, "stop(): unsubscribe (mode 1) or pop the calling thread's pushed id (mode 2).");
static PyObject *stop(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    int mode = S.mode;
    S.mode = MODE_OFF;
    T.current = 0;
    if (mode == MODE_EXTERNAL && T.pushed) {
        uint64_t last = 0;
        S.pop_external(EXTERNAL_CUSTOM2, &last);
        T.pushed = 0;
    }
    if ((mode == MODE_CALLBACKS || mode == MODE_CALLBACKS_EMPTY) && S.subscriber != NULL) {
        cupti_result_t rc = S.unsubscribe(S.subscriber); /* also disables every callback of the subscriber */
        S.subscriber = NULL;
        if (rc != 0)
            return cupti_error("cuptiUnsubscribe", rc);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(allocate_doc, "allocate(capacity): fresh launch arrays (start() does it; tests call it directly).");
static PyObject *allocate(PyObject *self, PyObject *arg) {
    long long capacity = PyLong_AsLongLong(arg);
    (void)self;
    if (capacity == -1 && PyErr_Occurred())
        return NULL;
    if (capacity < 1) {
        PyErr_SetString(PyExc_ValueError, "capacity must be at least 1");
        return NULL;
    }
    if (allocate_arrays(capacity) != 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(simulate_doc,
             "simulate(domain, cbid, site, correlation_id): call the launch callback as CUPTI would (tests).");
static PyObject *simulate(PyObject *self, PyObject *args) {
    int domain, site;
    unsigned int cbid, correlation;
    (void)self;
    if (!PyArg_ParseTuple(args, "iIiI", &domain, &cbid, &site, &correlation))
        return NULL;
    if (S.capacity == 0) {
        PyErr_SetString(PyExc_RuntimeError, "no launch arrays: call allocate() or start() first");
        return NULL;
    }
    cupti_callback_data_t data;
    memset(&data, 0, sizeof data);
    data.callback_site = site;
    data.correlation_id = correlation;
    on_api_call(NULL, domain, cbid, &data);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(export_doc,
             "export() -> (records, dropped, correlation, instance, thread, start, end, cbid, domain): the "
             "recorded launches; the arrays are bytes of uint32, int64, uint64, int64, int64, uint32, uint8.");
static PyObject *export_records(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    int64_t n = __atomic_load_n(&S.count, __ATOMIC_RELAXED);
    if (n > S.capacity)
        n = S.capacity;
    if (S.capacity == 0)
        n = 0;
#define BYTES(p, t) PyBytes_FromStringAndSize(n ? (const char *)(p) : "", (Py_ssize_t)(n * (int64_t)sizeof(t)))
    return Py_BuildValue("(LLNNNNNNN)", (long long)n, (long long)__atomic_load_n(&S.dropped, __ATOMIC_RELAXED),
                         BYTES(S.correlation, uint32_t), BYTES(S.instance, int64_t), BYTES(S.thread, uint64_t),
                         BYTES(S.start, int64_t), BYTES(S.end, int64_t), BYTES(S.cbid, uint32_t),
                         BYTES(S.domain, uint8_t));
#undef BYTES
}

PyDoc_STRVAR(release_doc, "release(): free the launch arrays.");
static PyObject *release(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (S.mode == MODE_CALLBACKS || S.mode == MODE_CALLBACKS_EMPTY) {
        PyErr_SetString(PyExc_RuntimeError, "stop() the native launch path before releasing its arrays");
        return NULL;
    }
    release_arrays();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_current", set_current, METH_O, set_current_doc},
    {"current", current, METH_NOARGS, current_doc},
    {"start", start, METH_VARARGS, start_doc},
    {"stop", stop, METH_NOARGS, stop_doc},
    {"allocate", allocate, METH_O, allocate_doc},
    {"simulate", simulate, METH_VARARGS, simulate_doc},
    {"export", export_records, METH_NOARGS, export_doc},
    {"release", release, METH_NOARGS, release_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_argus_cupti_native", "argus_lab's native per-launch CUPTI path (see native.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__argus_cupti_native(void) { return PyModule_Create(&module); }
