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
 * Mode 4 (boundary probes, the default of a timing run) subscribes no launch call at all.  Every set_current() (a
 * region boundary) calls one cheap driver function (the probe, e.g. cuDriverGetVersion) whose callback, the only
 * one subscribed, appends (its correlation id, the thread's new current instance, thread id, CLOCK_REALTIME ns) to
 * the same arrays.  CUPTI numbers API calls from one process-wide counter, so a kernel whose correlation id lies
 * between two probes of a thread was launched while that thread's instance of the earlier probe was current; the
 * per-launch cost is CUPTI's kernel record alone.  native.py turns the probes into per-kernel instances.
 *
 * Mode 5 (the clock, asked by the launch_identity setting) makes no call at all at a boundary:
 * set_current() appends (0, the thread's new current instance, thread id, cuptiGetTimestamp()) to the same arrays.
 * CUPTI stamps each kernel record with `queued`, read on CUPTI's clock inside the launch call, so a kernel belongs
 * to the instance a thread made current last before that stamp.  Graph launches, whose kernels carry no `queued`
 * stamp, are subscribed with the launch callback of mode 1 (one callback per graph launch, not per kernel).
 *
 * Region boundaries (boundary_*): while a recorder of argus_lab.regions records with this module's set_current as
 * its only boundary work, `with region(...)` calls boundary_enter(marker) / boundary_exit(marker), which do in one
 * C call what RegionMarker.__enter__/__exit__ do in Python for a thread's stack: the frame pushed on (popped from)
 * the thread's region stack is the same 8-tuple, the instance id comes from the same process-wide counter (handed
 * over at boundary_start and back at boundary_stop), the current instance id for the launch callback is set, and
 * the finished instance is appended as the same row of ROW_WIDTH int64 values (regions._ROW_WIDTH, same order) to
 * a fixed buffer that the recorder moves into its own columns (regions.Recorder._spill).  Anything else (a running
 * asyncio event loop, an exception, an exit that is not the innermost open region) returns False and the Python
 * methods run instead, appending their rows through boundary_append so that rows stay in finishing order.
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
#include <structmember.h>
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
enum { MODE_OFF = 0, MODE_CALLBACKS = 1, MODE_EXTERNAL = 2, MODE_CALLBACKS_EMPTY = 3, MODE_PROBES = 4, MODE_CLOCK = 5 };
typedef int (*probe_t)(void *); /* cuDriverGetVersion(int *), cuDeviceGetCount(int *), cuCtxGetCurrent(CUcontext *) */
typedef cupti_result_t (*timestamp_t)(uint64_t *); /* cuptiGetTimestamp */
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
    probe_t probe;       /* MODE_PROBES: the driver function a boundary calls */
    uint32_t probe_cbid; /* ... and its driver callback id */
    timestamp_t timestamp; /* MODE_CLOCK: CUPTI's own clock, the one its `queued` launch stamps are in */
    int clock_reads; /* launch callbacks: 2 = entry and exit of every launch call, 1 = entry only, 0 = entry only
                      * of launches made with no region open on the thread (set_clock_reads) */
} S = {.clock_reads = 2};

/* Per-thread state in one struct: one thread-local address computation per callback (the module is loaded with
 * dlopen, so each distinct __thread variable would cost its own __tls_get_addr call). */
typedef struct {
    int64_t current; /* the calling thread's innermost open region instance (0 = none) */
    int64_t when;    /* MODE_PROBES: the boundary's own clock reading, which its probe records (0 = read one) */
    int pushed;      /* MODE_EXTERNAL: an id is pushed on this thread */
    int generation;  /* the run the nesting below belongs to */
    int depth;       /* subscribed API calls open on this thread (a runtime launch calls the driver) */
    int named;       /* the generation in which this thread's name was noted (launching threads, TH) */
    int64_t slot[NEST_MAX];
    /* region boundaries: borrowed references, valid for the boundary run `stack_run` (the thread's _Stack lives
     * as long as the thread, held by regions._local; its `ident` slot holds the id object) */
    long long stack_run;
    PyObject *stack;
    PyObject *ident;
} thread_state_t;

static __thread thread_state_t T;

/* The launching threads of a run, each noted at its first recorded launch: its pthread id and its system name
 * (pthread_getname_np: "pt_autograd_0" for autograd's device threads; a Python thread keeps the process's name).
 * Python names its own threads after the run (native.py); what only the system knows is read here, while the
 * thread lives. */
#define THREADS_MAX 4096
#define THREAD_NAME 16
static struct {
    uint64_t id[THREADS_MAX];
    char name[THREADS_MAX][THREAD_NAME];
    int64_t count;
} TH;

static inline void note_thread(thread_state_t *t) {
    if (t->named == S.generation)
        return;
    t->named = S.generation;
    int64_t k = __atomic_fetch_add(&TH.count, 1, __ATOMIC_RELAXED);
    if (k >= THREADS_MAX)
        return;
    TH.id[k] = (uint64_t)pthread_self();
    if (pthread_getname_np(pthread_self(), TH.name[k], THREAD_NAME) != 0)
        TH.name[k][0] = 0;
    TH.name[k][THREAD_NAME - 1] = 0;
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Takes the next slot of the arrays and writes one row (end 0) there; returns the slot, or -1 when the arrays are
 * full (counted as dropped).  Shared by the launch callback and the probe callback. */
static inline int64_t put_row(uint32_t correlation, int64_t instance, int64_t start, uint32_t cbid, int domain) {
    int64_t slot = __atomic_fetch_add(&S.count, 1, __ATOMIC_RELAXED);
    if (slot >= S.capacity) {
        __atomic_fetch_add(&S.dropped, 1, __ATOMIC_RELAXED);
        return -1;
    }
    S.correlation[slot] = correlation;
    S.instance[slot] = instance;
    S.thread[slot] = (uint64_t)pthread_self();
    if (start != 0) /* the arrays come zeroed from calloc: an untimed launch leaves these pages unbacked */
        S.start[slot] = start;
    S.cbid[slot] = cbid;
    S.domain[slot] = (uint8_t)domain;
    return slot;
}

/* ---- the CUPTI callback: runs on the launching thread, inside the API call; never touches Python ------- */
static void on_api_call(void *userdata, int domain, uint32_t cbid, const void *raw) {
    const cupti_callback_data_t *data = (const cupti_callback_data_t *)raw;
    thread_state_t *t;
    (void)userdata;
    if (S.mode == MODE_CALLBACKS_EMPTY || S.clock_reads < 0)
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
            int64_t at = (S.clock_reads > 0 || t->current == 0) ? now_ns() : 0;
            slot = put_row(data->correlation_id, t->current, at, cbid, domain);
            note_thread(t);
        }
        if (t->depth < NEST_MAX)
            t->slot[t->depth] = slot;
        t->depth++;
        return;
    }
    if (t->depth == 0) /* the entry happened before the subscription */
        return;
    t->depth--;
    if (S.clock_reads == 2 && t->depth < NEST_MAX && t->slot[t->depth] >= 0)
        S.end[t->slot[t->depth]] = now_ns();
}

/* ---- the probe callback (mode 4): runs inside the probe call a boundary makes ------------------------------ */
static void on_probe(void *userdata, int domain, uint32_t cbid, const void *raw) {
    const cupti_callback_data_t *data = (const cupti_callback_data_t *)raw;
    (void)userdata;
    if (data->callback_site != SITE_ENTER || domain != DOMAIN_DRIVER || cbid != S.probe_cbid)
        return;
    thread_state_t *t = &T;
    put_row(data->correlation_id, t->current, t->when != 0 ? t->when : now_ns(), cbid, domain);
}

/* ---- helpers ------------------------------------------------------------------------------------------ */
/* CUPTI's name for a result code ("unknown" when libcupti cannot say). */
static const char *result_text(cupti_result_t rc) {
    const char *text = NULL;
    if (S.result_string == NULL || S.result_string(rc, &text) != 0 || text == NULL)
        text = "unknown";
    return text;
}

static PyObject *cupti_error(const char *what, cupti_result_t rc) {
    PyErr_Format(PyExc_RuntimeError, "%s returned CUPTI error %d (%s)", what, rc, result_text(rc));
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
    TH.count = 0;
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

/* Maps the libcupti cupti-python loaded (never a second copy: two libcupti copies in a process do not mix) into
 * S.lib, with its result-string function; 0, or -1 with a RuntimeError set. */
static int open_libcupti(const char *path) {
    S.lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (S.lib == NULL) {
        PyErr_Format(PyExc_RuntimeError, "libcupti %s is not loaded in this process (%s)", path, dl_error());
        return -1;
    }
    S.result_string = (result_string_t)dlsym(S.lib, "cuptiGetResultString");
    return 0;
}

/* cuptiSubscribe, with cuptiUnsubscribe and cuptiEnableCallback kept in S; NULL with a RuntimeError set. */
static subscribe_t subscriber_calls(void) {
    subscribe_t subscribe = (subscribe_t)symbol("cuptiSubscribe");
    S.unsubscribe = (unsubscribe_t)symbol("cuptiUnsubscribe");
    S.enable_callback = (enable_callback_t)symbol("cuptiEnableCallback");
    if (subscribe == NULL || S.unsubscribe == NULL || S.enable_callback == NULL)
        return NULL;
    return subscribe;
}

/* Enables (`enable` 1) or disables (0) the callback ids of one domain; an id CUPTI refuses (e.g. one this CUPTI
 * version retired) is appended to `refused` as (domain, cbid, result) and skipped.  Returns how many were changed,
 * -1 on a Python error. */
static int enable_list(PyObject *ids, int domain, PyObject *refused, uint32_t enable) {
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
        cupti_result_t rc = S.enable_callback(enable, S.subscriber, domain, (uint32_t)v);
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

/* Enables the runtime and then the driver callback ids into *n_runtime and *n_driver; 0, or -1 on a Python error. */
static int enable_lists(PyObject *runtime_ids, PyObject *driver_ids, PyObject *refused, int *n_runtime, int *n_driver) {
    *n_runtime = enable_list(runtime_ids, DOMAIN_RUNTIME, refused, 1);
    *n_driver = *n_runtime < 0 ? -1 : enable_list(driver_ids, DOMAIN_DRIVER, refused, 1);
    return *n_runtime < 0 || *n_driver < 0 ? -1 : 0;
}

/* The modes that hold a CUPTI subscriber (released by stop()) and write the launch arrays. */
static int subscribing(int mode) {
    return mode == MODE_CALLBACKS || mode == MODE_CALLBACKS_EMPTY || mode == MODE_PROBES || mode == MODE_CLOCK;
}

/* ---- Python API --------------------------------------------------------------------------------------- */
/* `when`: the boundary's clock reading (the instance's start or end), recorded with the probe; 0 = none */
static inline void store_current(thread_state_t *t, int64_t v, int64_t when) {
    t->current = v;
    if (S.mode == MODE_CLOCK) { /* a boundary row on CUPTI's clock: cbid 0, no correlation id */
        uint64_t ts = 0;
        S.timestamp(&ts);
        put_row(0, v, (int64_t)ts, 0, 0);
        return;
    }
    if (S.mode == MODE_PROBES) {
        uint64_t scratch = 0;
        t->when = when;
        S.probe(&scratch); /* its callback (on_probe) records the new current instance with a correlation id */
        t->when = 0;
        return;
    }
    if (S.mode == MODE_EXTERNAL) {
        uint64_t last = 0;
        if (t->pushed)
            S.pop_external(EXTERNAL_CUSTOM2, &last);
        t->pushed = v != 0;
        if (v != 0)
            S.push_external(EXTERNAL_CUSTOM2, (uint64_t)v);
    }
}

PyDoc_STRVAR(set_current_doc, "set_current(instance_id): the calling thread's innermost open region instance.");
static PyObject *set_current(PyObject *self, PyObject *arg) {
    int64_t v = PyLong_AsLongLong(arg);
    (void)self;
    if (v == -1 && PyErr_Occurred())
        return NULL;
    store_current(&T, v, 0);
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
    if (open_libcupti(path) != 0)
        return NULL;
    if (mode == MODE_EXTERNAL) {
        S.push_external = (push_external_t)symbol("cuptiActivityPushExternalCorrelationId");
        S.pop_external = (pop_external_t)symbol("cuptiActivityPopExternalCorrelationId");
        if (S.push_external == NULL || S.pop_external == NULL)
            return NULL;
        S.generation++;
        S.mode = MODE_EXTERNAL;
        Py_RETURN_NONE;
    }
    subscribe_t subscribe = subscriber_calls();
    if (subscribe == NULL)
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
    int n_runtime, n_driver;
    if (enable_lists(runtime_ids, driver_ids, refused, &n_runtime, &n_driver) != 0)
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

/* Calls `fn` as CUPTI would call it back (the tests' simulate functions); needs the arrays. */
static PyObject *call_back(cupti_callback_t fn, int domain, uint32_t cbid, int site, uint32_t correlation) {
    if (S.capacity == 0) {
        PyErr_SetString(PyExc_RuntimeError, "no launch arrays: call allocate(), start() or start_probes() first");
        return NULL;
    }
    cupti_callback_data_t data;
    memset(&data, 0, sizeof data);
    data.callback_site = site;
    data.correlation_id = correlation;
    fn(NULL, domain, cbid, &data);
    Py_RETURN_NONE;
}

/* The checks start_probes and start_clock share: nothing started, a positive capacity, libcupti mapped into S.lib;
 * 0, or -1 with a Python error set. */
static int ready_to_start(const char *path, long long capacity) {
    if (S.mode != MODE_OFF) {
        PyErr_SetString(PyExc_RuntimeError, "the native launch path is already started; stop() it first");
        return -1;
    }
    if (capacity < 1) {
        PyErr_SetString(PyExc_ValueError, "capacity must be at least 1");
        return -1;
    }
    return open_libcupti(path);
}

PyDoc_STRVAR(start_probes_doc,
             "start_probes(libcupti, probe_name, probe_cbid, capacity): mode 4: subscribe only the driver callback "
             "`probe_cbid` of the libcuda function `probe_name`, which every set_current() then calls; the probe is "
             "called once here and must call back (else RuntimeError, nothing stays subscribed).");
static PyObject *start_probes(PyObject *self, PyObject *args) {
    const char *path, *probe_name;
    unsigned int probe_cbid;
    long long capacity;
    (void)self;
    if (!PyArg_ParseTuple(args, "ssIL", &path, &probe_name, &probe_cbid, &capacity))
        return NULL;
    if (ready_to_start(path, capacity) != 0)
        return NULL;
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cuda == NULL) {
        PyErr_Format(PyExc_RuntimeError, "libcuda.so.1 is not loaded in this process (%s)", dl_error());
        return NULL;
    }
    probe_t probe = (probe_t)dlsym(cuda, probe_name);
    if (probe == NULL) {
        PyErr_Format(PyExc_RuntimeError, "libcuda has no function %s (%s)", probe_name, dl_error());
        return NULL;
    }
    subscribe_t subscribe = subscriber_calls();
    if (subscribe == NULL)
        return NULL;
    if (allocate_arrays(capacity) != 0)
        return PyErr_NoMemory();
    S.probe = probe;
    S.probe_cbid = probe_cbid;
    cupti_result_t rc = subscribe(&S.subscriber, on_probe, NULL);
    if (rc != 0)
        return cupti_error("cuptiSubscribe", rc);
    rc = S.enable_callback(1, S.subscriber, DOMAIN_DRIVER, probe_cbid);
    if (rc != 0) {
        S.unsubscribe(S.subscriber);
        S.subscriber = NULL;
        return cupti_error("cuptiEnableCallback (the probe)", rc);
    }
    uint64_t scratch = 0;
    int64_t before = __atomic_load_n(&S.count, __ATOMIC_RELAXED);
    probe(&scratch); /* the first row: the calling thread's current instance when the run starts */
    if (__atomic_load_n(&S.count, __ATOMIC_RELAXED) == before) {
        S.unsubscribe(S.subscriber);
        S.subscriber = NULL;
        PyErr_Format(PyExc_RuntimeError, "CUPTI did not call back for the probe %s (driver callback id %u)", probe_name,
                     probe_cbid);
        return NULL;
    }
    S.mode = MODE_PROBES;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(probe_simulate_doc,
             "probe_simulate(correlation_id): record a probe of the calling thread as the probe callback would (tests; "
             "needs allocate()).");
static PyObject *probe_simulate(PyObject *self, PyObject *arg) {
    unsigned long correlation = PyLong_AsUnsignedLong(arg);
    (void)self;
    if (correlation == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    return call_back(on_probe, DOMAIN_DRIVER, S.probe_cbid, SITE_ENTER, (uint32_t)correlation);
}

PyDoc_STRVAR(start_clock_doc,
             "start_clock(libcupti, runtime_graph_cbids, driver_graph_cbids, capacity) -> (runtime ids enabled, "
             "driver ids enabled, [(domain, cbid, result) refused], subscribe error or None): mode 5: every "
             "set_current() appends (0, the new current instance, thread, cuptiGetTimestamp()) and no launch call "
             "is subscribed; kernels are placed by their `queued` stamp.  The graph launch calls listed are "
             "subscribed with the launch callback (their kernels have no `queued` stamp); a subscriber CUPTI refuses "
             "leaves them unsubscribed and is reported, not raised.");
static PyObject *start_clock(PyObject *self, PyObject *args) {
    const char *path;
    PyObject *runtime_ids, *driver_ids;
    long long capacity;
    (void)self;
    if (!PyArg_ParseTuple(args, "sOOL", &path, &runtime_ids, &driver_ids, &capacity))
        return NULL;
    if (ready_to_start(path, capacity) != 0)
        return NULL;
    timestamp_t timestamp = (timestamp_t)symbol("cuptiGetTimestamp");
    if (timestamp == NULL)
        return NULL;
    uint64_t ts = 0;
    cupti_result_t rc = timestamp(&ts);
    if (rc != 0 || ts == 0)
        return cupti_error("cuptiGetTimestamp", rc);
    subscribe_t subscribe = subscriber_calls();
    if (subscribe == NULL)
        return NULL;
    if (allocate_arrays(capacity) != 0)
        return PyErr_NoMemory();
    S.timestamp = timestamp;
    PyObject *refused = PyList_New(0);
    if (refused == NULL)
        return NULL;
    int n_runtime = 0, n_driver = 0;
    PyObject *subscribe_error = Py_None;
    Py_INCREF(Py_None);
    if (PySequence_Size(runtime_ids) > 0 || PySequence_Size(driver_ids) > 0) {
        rc = subscribe(&S.subscriber, on_api_call, NULL);
        if (rc != 0) {
            Py_DECREF(subscribe_error);
            subscribe_error = PyUnicode_FromFormat("cuptiSubscribe returned CUPTI error %d (%s)", rc, result_text(rc));
            S.subscriber = NULL;
            if (subscribe_error == NULL)
                goto fail;
        } else {
            if (enable_lists(runtime_ids, driver_ids, refused, &n_runtime, &n_driver) != 0) {
                S.unsubscribe(S.subscriber);
                S.subscriber = NULL;
                goto fail;
            }
        }
    }
    S.mode = MODE_CLOCK;
    put_row(0, T.current, (int64_t)ts, 0, 0); /* the calling thread's current instance when the run starts */
    return Py_BuildValue("(iiNN)", n_runtime, n_driver, refused, subscribe_error);
fail:
    Py_XDECREF(refused);
    Py_XDECREF(subscribe_error);
    return NULL;
}

PyDoc_STRVAR(stop_doc, "stop(): unsubscribe (modes 1, 3, 4, 5) or pop the calling thread's pushed id (mode 2).");
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
    if (subscribing(mode) && S.subscriber != NULL) {
        cupti_result_t rc = S.unsubscribe(S.subscriber); /* also disables every callback of the subscriber */
        S.subscriber = NULL;
        if (rc != 0)
            return cupti_error("cuptiUnsubscribe", rc);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(set_clock_reads_doc,
             "set_clock_reads(n): what the launch callback reads the clock for: 2 (the entry and exit of every launch "
             "call), 1 (entries only) or 0 (entries of launches made with no region open on their thread), or -1 "
             "(benchmarks: the callback returns at once, recording nothing); returns the previous value.");
static PyObject *set_clock_reads(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    (void)self;
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < -1 || n > 2) {
        PyErr_Format(PyExc_ValueError, "clock reads must be -1, 0, 1 or 2, got %ld", n);
        return NULL;
    }
    int before = S.clock_reads;
    S.clock_reads = (int)n;
    return PyLong_FromLong(before);
}

PyDoc_STRVAR(enable_callbacks_doc,
             "enable_callbacks(flag, runtime_ids, driver_ids): enable (flag true) or disable the subscriber's "
             "callbacks of those ids while a run records (benchmarks toggle them between blocks); returns (runtime, "
             "driver) counts changed.");
static PyObject *enable_callbacks(PyObject *self, PyObject *args) {
    int flag;
    PyObject *runtime_ids, *driver_ids;
    (void)self;
    if (!PyArg_ParseTuple(args, "pOO", &flag, &runtime_ids, &driver_ids))
        return NULL;
    if (S.mode != MODE_CALLBACKS || S.subscriber == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "enable_callbacks needs a run started with start(..., mode 1)");
        return NULL;
    }
    PyObject *refused = PyList_New(0);
    if (refused == NULL)
        return NULL;
    int n_runtime = enable_list(runtime_ids, DOMAIN_RUNTIME, refused, (uint32_t)flag);
    int n_driver = n_runtime < 0 ? -1 : enable_list(driver_ids, DOMAIN_DRIVER, refused, (uint32_t)flag);
    Py_DECREF(refused);
    if (n_runtime < 0 || n_driver < 0)
        return NULL;
    return Py_BuildValue("(ii)", n_runtime, n_driver);
}

PyDoc_STRVAR(clock_cost_doc, "clock_cost(n): ns per CLOCK_REALTIME read, timed over n reads (benchmarks).");
static PyObject *clock_cost(PyObject *self, PyObject *arg) {
    long long n = PyLong_AsLongLong(arg);
    (void)self;
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1)
        n = 1;
    volatile int64_t sink = 0;
    int64_t t0 = now_ns();
    for (long long i = 0; i < n; i++)
        sink += now_ns();
    int64_t t1 = now_ns();
    (void)sink;
    return PyFloat_FromDouble((double)(t1 - t0) / (double)n);
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
    return call_back(on_api_call, domain, cbid, site, correlation);
}

/* The bytes of one exported column: its n values, or only the first when every value is that one (a constant
 * column costs no copy: start and end of untimed launches, one launching thread, one callback id). */
static PyObject *column_bytes(const char *p, int64_t n, int64_t size) {
    int64_t k = 1;
    if (n == 0)
        return PyBytes_FromStringAndSize("", 0);
    while (k < n && memcmp(p, p + k * size, (size_t)size) == 0)
        k++;
    return PyBytes_FromStringAndSize(p, (Py_ssize_t)((k == n ? 1 : n) * size));
}

PyDoc_STRVAR(export_doc,
             "export() -> (records, dropped, correlation, instance, thread, start, end, cbid, domain): the "
             "recorded launches; the arrays are bytes of uint32, int64, uint64, int64, int64, uint32, uint8, each "
             "holding one value only when every launch has that value.");
static PyObject *export_records(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    int64_t n = __atomic_load_n(&S.count, __ATOMIC_RELAXED);
    if (n > S.capacity)
        n = S.capacity;
    if (S.capacity == 0)
        n = 0;
#define BYTES(p, t) column_bytes((const char *)(p), n, (int64_t)sizeof(t))
    return Py_BuildValue("(LLNNNNNNN)", (long long)n, (long long)__atomic_load_n(&S.dropped, __ATOMIC_RELAXED),
                         BYTES(S.correlation, uint32_t), BYTES(S.instance, int64_t), BYTES(S.thread, uint64_t),
                         BYTES(S.start, int64_t), BYTES(S.end, int64_t), BYTES(S.cbid, uint32_t),
                         BYTES(S.domain, uint8_t));
#undef BYTES
}

PyDoc_STRVAR(threads_doc,
             "threads() -> [(pthread id, system name)]: the threads that made a recorded launch since the arrays were "
             "allocated, each once, with the name the system gave it then (at most 4096 threads).");
static PyObject *threads(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    int64_t n = __atomic_load_n(&TH.count, __ATOMIC_RELAXED);
    if (n > THREADS_MAX)
        n = THREADS_MAX;
    PyObject *out = PyList_New(0);
    for (int64_t k = 0; out != NULL && k < n; k++) {
        PyObject *item = Py_BuildValue("(Ky)", (unsigned long long)TH.id[k], TH.name[k]);
        if (item == NULL || PyList_Append(out, item) != 0) {
            Py_XDECREF(item);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(item);
    }
    return out;
}

PyDoc_STRVAR(release_doc, "release(): free the launch arrays.");
static PyObject *release(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (subscribing(S.mode)) {
        PyErr_SetString(PyExc_RuntimeError, "stop() the native launch path before releasing its arrays");
        return NULL;
    }
    release_arrays();
    Py_RETURN_NONE;
}

/* ---- region boundaries ------------------------------------------------------------------------------- */
#define ROW_WIDTH 7  /* instance id, node, parent instance id, thread id, start ns, end ns, CPU ns (regions/state.py) */
#define FRAME_WIDTH 8 /* marker, instance id, run, thread id, parent instance id, node, start ns, CPU start ns */

typedef struct {
    PyObject *marker; /* strong */
    long long parent_node;
    PyObject *node; /* strong */
} node_entry_t;

static struct {
    int on;
    long long run;        /* the recorder's generation */
    PyObject *run_obj;    /* the same, as the int frames carry */
    PyObject *zero;       /* 0 */
    PyObject *stack_of;   /* () -> the calling thread's region stack (regions._stack) */
    PyObject *node_of;    /* (marker, parent node) -> node (regions._node_of) */
    PyObject *spill;      /* () -> None: the recorder takes the rows (Recorder._spill) */
    PyObject *running_loop; /* asyncio's _get_running_loop */
    PyCFunction running_loop_c; /* its C function when it is a METH_NOARGS builtin (called directly) */
    int64_t next_id;
    int64_t *rows;
    int64_t n_rows, cap_rows;
    node_entry_t *nodes;
    size_t n_nodes, cap_nodes; /* cap_nodes: a power of two */
} B;

/* A non-negative int of a frame (ids, node, thread id, ns) as int64: the digits are read without the byte-array
 * path PyLong_AsLongLong takes for values above 2**30 (every CLOCK_REALTIME ns value). */
static inline int64_t frame_int(PyObject *v) {
    return (int64_t)PyLong_AsUnsignedLongLongMask(v);
}

static inline size_t node_slot(PyObject *marker, long long parent) {
    uint64_t h = ((uint64_t)(uintptr_t)marker >> 4) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)parent * 0xC2B2AE3D27D4EB4FULL;
    return (size_t)(h ^ (h >> 29)) & (B.cap_nodes - 1);
}

static void clear_nodes(void) {
    for (size_t i = 0; i < B.cap_nodes; i++) {
        Py_CLEAR(B.nodes[i].marker);
        Py_CLEAR(B.nodes[i].node);
    }
    PyMem_Free(B.nodes);
    B.nodes = NULL;
    B.n_nodes = B.cap_nodes = 0;
}

static int grow_nodes(void) {
    size_t old_cap = B.cap_nodes;
    node_entry_t *old = B.nodes;
    size_t cap = old_cap ? old_cap * 2 : 256;
    node_entry_t *fresh = PyMem_Calloc(cap, sizeof(node_entry_t));
    if (fresh == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    B.nodes = fresh;
    B.cap_nodes = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].marker == NULL)
            continue;
        size_t k = node_slot(old[i].marker, old[i].parent_node);
        while (B.nodes[k].marker != NULL)
            k = (k + 1) & (cap - 1);
        B.nodes[k] = old[i];
    }
    PyMem_Free(old);
    return 0;
}

/* The node (path code) of `marker` opened under node `parent` (new reference); asks regions._node_of once. */
static PyObject *node_of(PyObject *marker, PyObject *parent_obj, long long parent) {
    if (B.cap_nodes) {
        size_t k = node_slot(marker, parent);
        while (B.nodes[k].marker != NULL) {
            if (B.nodes[k].marker == marker && B.nodes[k].parent_node == parent) {
                Py_INCREF(B.nodes[k].node);
                return B.nodes[k].node;
            }
            k = (k + 1) & (B.cap_nodes - 1);
        }
    }
    PyObject *node = PyObject_CallFunctionObjArgs(B.node_of, marker, parent_obj, NULL);
    if (node == NULL)
        return NULL;
    if ((B.n_nodes + 1) * 2 > B.cap_nodes && grow_nodes() != 0) {
        Py_DECREF(node);
        return NULL;
    }
    size_t k = node_slot(marker, parent);
    while (B.nodes[k].marker != NULL)
        k = (k + 1) & (B.cap_nodes - 1);
    Py_INCREF(marker);
    Py_INCREF(node);
    B.nodes[k].marker = marker;
    B.nodes[k].parent_node = parent;
    B.nodes[k].node = node;
    B.n_nodes++;
    return node;
}

/* The calling thread's state with its region stack resolved for this run; NULL with an exception set. */
static thread_state_t *boundary_thread(void) {
    thread_state_t *t = &T;
    if (t->stack_run == B.run)
        return t;
    PyObject *stack = PyObject_CallNoArgs(B.stack_of);
    if (stack == NULL)
        return NULL;
    if (!PyList_Check(stack)) {
        Py_DECREF(stack);
        PyErr_SetString(PyExc_TypeError, "the region stack must be a list");
        return NULL;
    }
    PyObject *ident = PyObject_GetAttrString(stack, "ident");
    if (ident == NULL) {
        Py_DECREF(stack);
        return NULL;
    }
    /* borrowed from here on: regions._local keeps the stack (and the stack its ident) for the thread's life */
    t->stack = stack;
    t->ident = ident;
    Py_DECREF(ident);
    Py_DECREF(stack);
    t->stack_run = B.run;
    return t;
}

/* 1 when an asyncio event loop runs on this thread (the Python methods keep a stack per task then), -1 on error */
static int in_event_loop(void) {
    PyObject *loop = B.running_loop_c != NULL ? B.running_loop_c(PyCFunction_GET_SELF(B.running_loop), NULL)
                                              : PyObject_CallNoArgs(B.running_loop);
    if (loop == NULL)
        return -1;
    int running = loop != Py_None;
    Py_DECREF(loop);
    return running;
}

/* The calling thread's state when a boundary can run in C now.  NULL with *declined set when the Python method must
 * do it (no boundary run, an asyncio event loop on the thread); NULL with an exception set on an error. */
static thread_state_t *boundary_here(int *declined) {
    *declined = 1;
    if (!B.on)
        return NULL;
    int loop = in_event_loop();
    if (loop != 0) {
        *declined = loop > 0;
        return NULL;
    }
    *declined = 0;
    return boundary_thread();
}

static int append_row(const int64_t *row) {
    /* Full: the recorder takes the rows (boundary_take).  The spill is Python code, so other threads run meanwhile
     * and may fill the buffer again before this thread is back here: take again until there is room. */
    for (int tries = 0; B.n_rows == B.cap_rows; tries++) {
        if (tries == 1000) {
            PyErr_SetString(PyExc_RuntimeError, "the recorder did not take the boundary rows (boundary_take)");
            return -1;
        }
        PyObject *r = PyObject_CallNoArgs(B.spill);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    memcpy(B.rows + B.n_rows * ROW_WIDTH, row, ROW_WIDTH * sizeof(int64_t));
    B.n_rows++;
    return 0;
}

PyDoc_STRVAR(boundary_enter_doc,
             "boundary_enter(marker) -> bool: enter `marker` on the calling thread's region stack and record the "
             "instance (True), or False when the Python method must do it (no boundary run, an asyncio event loop).");
static PyObject *boundary_enter(PyObject *self, PyObject *marker) {
    (void)self;
    int declined;
    thread_state_t *t = boundary_here(&declined);
    if (t == NULL)
        return declined ? Py_NewRef(Py_False) : NULL;
    PyObject *stack = t->stack;
    Py_ssize_t n = PyList_GET_SIZE(stack);
    PyObject *parent_iid = B.zero, *parent_node = B.zero;
    long long pnode = 0;
    if (n > 0) { /* the innermost open instance of this run is the parent; frames of other runs are not */
        PyObject *top = PyList_GET_ITEM(stack, n - 1);
        if (PyTuple_Check(top) && PyTuple_GET_SIZE(top) >= FRAME_WIDTH) {
            PyObject *run = PyTuple_GET_ITEM(top, 2);
            int same = run == B.run_obj || (PyLong_Check(run) && frame_int(run) == B.run);
            if (same && PyLong_Check(PyTuple_GET_ITEM(top, 5))) {
                parent_iid = PyTuple_GET_ITEM(top, 1);
                parent_node = PyTuple_GET_ITEM(top, 5);
                pnode = frame_int(parent_node);
            }
        }
    }
    PyObject *node = node_of(marker, parent_node, pnode);
    if (node == NULL)
        return NULL;
    int64_t iid = B.next_id++;
    int64_t t0 = now_ns();
    PyObject *iid_obj = PyLong_FromLongLong(iid);
    PyObject *start = iid_obj ? PyLong_FromLongLong(t0) : NULL;
    PyObject *frame = start ? PyTuple_New(FRAME_WIDTH) : NULL;
    if (frame == NULL) {
        Py_XDECREF(iid_obj);
        Py_XDECREF(start);
        Py_DECREF(node);
        return NULL;
    }
    PyTuple_SET_ITEM(frame, 0, Py_NewRef(marker));
    PyTuple_SET_ITEM(frame, 1, iid_obj);
    PyTuple_SET_ITEM(frame, 2, Py_NewRef(B.run_obj));
    PyTuple_SET_ITEM(frame, 3, Py_NewRef(t->ident));
    PyTuple_SET_ITEM(frame, 4, Py_NewRef(parent_iid));
    PyTuple_SET_ITEM(frame, 5, node);
    PyTuple_SET_ITEM(frame, 6, start);
    PyTuple_SET_ITEM(frame, 7, Py_NewRef(B.zero));
    int rc = PyList_Append(stack, frame);
    Py_DECREF(frame);
    if (rc != 0)
        return NULL;
    store_current(t, iid, t0);
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(boundary_exit_doc,
             "boundary_exit(marker) -> bool: exit `marker`, the innermost open region of the calling thread, and "
             "append its row (True), or False when the Python method must do it (no boundary run, an event loop, "
             "a frame not recorded by this run, or `marker` not the innermost open region: the Python method "
             "raises then).");
static PyObject *boundary_exit(PyObject *self, PyObject *marker) {
    (void)self;
    int declined;
    thread_state_t *t = boundary_here(&declined);
    if (t == NULL)
        return declined ? Py_NewRef(Py_False) : NULL;
    PyObject *stack = t->stack;
    Py_ssize_t n = PyList_GET_SIZE(stack);
    if (n == 0)
        Py_RETURN_FALSE;
    PyObject *top = PyList_GET_ITEM(stack, n - 1);
    if (!PyTuple_Check(top) || PyTuple_GET_SIZE(top) != FRAME_WIDTH || PyTuple_GET_ITEM(top, 0) != marker)
        Py_RETURN_FALSE;
    PyObject *run = PyTuple_GET_ITEM(top, 2);
    if (run != B.run_obj && (!PyLong_Check(run) || frame_int(run) != B.run))
        Py_RETURN_FALSE;
    int64_t row[ROW_WIDTH];
    static const int from_frame[5] = {1, 5, 4, 3, 6};
    for (int i = 0; i < 5; i++) {
        PyObject *v = PyTuple_GET_ITEM(top, from_frame[i]);
        if (!PyLong_Check(v))
            Py_RETURN_FALSE;
        row[i] = frame_int(v);
    }
    if (row[0] == 0) /* a frame entered with no recorder */
        Py_RETURN_FALSE;
    row[5] = now_ns();
    row[6] = -1; /* no thread CPU clock on this path */
    if (append_row(row) != 0)
        return NULL;
    /* pop: the list keeps its allocation (as list.pop does until it shrinks) */
    if (PyList_GET_SIZE(stack) != n || PyList_GET_ITEM(stack, n - 1) != top) {
        PyErr_SetString(PyExc_RuntimeError, "the region stack changed during a boundary");
        return NULL;
    }
    Py_SET_SIZE(stack, n - 1);
    Py_DECREF(top);
    store_current(t, row[2], row[5]);
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(boundary_append_doc,
             "boundary_append(row): append a finished instance (a sequence of 7 ints, regions._ROW_WIDTH) recorded "
             "by the Python methods while a boundary run is on.");
static PyObject *boundary_append(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "a row must be a sequence of 7 ints");
    if (seq == NULL)
        return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != ROW_WIDTH) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "a row has %d values, got %zd", ROW_WIDTH, PySequence_Fast_GET_SIZE(seq));
        return NULL;
    }
    int64_t row[ROW_WIDTH];
    for (int i = 0; i < ROW_WIDTH; i++) {
        row[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (row[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    if (!B.on) {
        PyErr_SetString(PyExc_RuntimeError, "no boundary run is on (boundary_start)");
        return NULL;
    }
    if (append_row(row) != 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(boundary_next_id_doc, "boundary_next_id() -> int: the next instance id of the boundary run.");
static PyObject *boundary_next_id(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLongLong(B.next_id++);
}

PyDoc_STRVAR(boundary_take_doc,
             "boundary_take() -> bytes: the rows appended since the last take (native int64, 7 per instance).");
static PyObject *boundary_take(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *out = PyBytes_FromStringAndSize(B.n_rows ? (const char *)B.rows : "",
                                              (Py_ssize_t)(B.n_rows * ROW_WIDTH * (int64_t)sizeof(int64_t)));
    if (out != NULL)
        B.n_rows = 0;
    return out;
}

PyDoc_STRVAR(boundary_pending_doc, "boundary_pending() -> int: rows appended and not taken yet.");
static PyObject *boundary_pending(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLongLong(B.n_rows);
}

/* ---- region(): the README's inline marker in C while a boundary run is on ------------------------------------
 * `with argus_lab.region("attn"):` costs a Python call of regions.region (its call-site lookup) and two Python
 * methods around the C boundary.  While a boundary run is on, regions.Recorder publishes `region` below as
 * `argus_lab.region`: it finds the call site's marker in a table keyed by (caller's code object, instruction
 * offset, name) and returns that marker's boundary object (type Marker), whose __enter__/__exit__ are the C
 * boundary itself.  A miss, keyword arguments, or no boundary run call the Python region() (which checks the name,
 * builds the marker and keeps its own cache); a Marker falls back to the RegionMarker's Python methods whenever
 * boundary_enter/boundary_exit decline (an event loop, an exception, misuse, the run over), and forwards every
 * other use (decorator, attributes) to the RegionMarker. */
typedef struct {
    PyObject_HEAD
    PyObject *marker; /* the RegionMarker (strong) */
} marker_object;

typedef struct {
    PyObject *code; /* strong: keeps its address from being reused while the entry lives */
    int lasti;
    Py_hash_t hash;
    PyObject *name;   /* strong */
    PyObject *marker; /* strong: the Marker */
} site_entry_t;

#define SITES_MAX 4096 /* entries beyond it are not cached (names built at run time): the Python region() serves */
static struct {
    PyObject *python_region; /* regions.region (strong, kept across runs) */
    PyObject *enter_name, *exit_name;
    site_entry_t *sites;
    size_t n_sites, cap_sites; /* cap_sites: a power of two */
} R;

static PyTypeObject MarkerType;

static inline size_t site_slot(PyObject *code, int lasti, Py_hash_t hash, size_t cap) {
    uint64_t h = ((uint64_t)(uintptr_t)code >> 4) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)lasti * 0xC2B2AE3D27D4EB4FULL ^
                 (uint64_t)hash;
    return (size_t)(h ^ (h >> 31)) & (cap - 1);
}

static void clear_sites(void) {
    for (size_t i = 0; i < R.cap_sites; i++) {
        Py_CLEAR(R.sites[i].code);
        Py_CLEAR(R.sites[i].name);
        Py_CLEAR(R.sites[i].marker);
    }
    PyMem_Free(R.sites);
    R.sites = NULL;
    R.n_sites = R.cap_sites = 0;
}

/* The cached Marker of a call site (borrowed), NULL on a miss; never raises. */
static PyObject *site_find(PyObject *code, int lasti, Py_hash_t hash, PyObject *name) {
    if (R.cap_sites == 0)
        return NULL;
    size_t k = site_slot(code, lasti, hash, R.cap_sites);
    while (R.sites[k].code != NULL) {
        site_entry_t *e = &R.sites[k];
        if (e->code == code && e->lasti == lasti && e->hash == hash &&
            (e->name == name || PyUnicode_Compare(e->name, name) == 0))
            return e->marker;
        k = (k + 1) & (R.cap_sites - 1);
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    return NULL;
}

static void site_add(PyObject *code, int lasti, Py_hash_t hash, PyObject *name, PyObject *marker) {
    if (R.n_sites >= SITES_MAX)
        return;
    if ((R.n_sites + 1) * 2 > R.cap_sites) { /* grow (a failed allocation only means no caching) */
        size_t cap = R.cap_sites ? R.cap_sites * 2 : 64;
        site_entry_t *fresh = PyMem_Calloc(cap, sizeof(site_entry_t));
        if (fresh == NULL)
            return;
        for (size_t i = 0; i < R.cap_sites; i++) {
            if (R.sites[i].code == NULL)
                continue;
            size_t k = site_slot(R.sites[i].code, R.sites[i].lasti, R.sites[i].hash, cap);
            while (fresh[k].code != NULL)
                k = (k + 1) & (cap - 1);
            fresh[k] = R.sites[i];
        }
        PyMem_Free(R.sites);
        R.sites = fresh;
        R.cap_sites = cap;
    }
    size_t k = site_slot(code, lasti, hash, R.cap_sites);
    while (R.sites[k].code != NULL)
        k = (k + 1) & (R.cap_sites - 1);
    R.sites[k].code = Py_NewRef(code);
    R.sites[k].lasti = lasti;
    R.sites[k].hash = hash;
    R.sites[k].name = Py_NewRef(name);
    R.sites[k].marker = Py_NewRef(marker);
    R.n_sites++;
}

static PyObject *marker_new_for(PyObject *region_marker) {
    marker_object *m = PyObject_New(marker_object, &MarkerType);
    if (m == NULL)
        return NULL;
    m->marker = Py_NewRef(region_marker);
    return (PyObject *)m;
}

PyDoc_STRVAR(region_doc,
             "region(name, *, kind='host', module=None): argus_lab.region while a native boundary run is on (the "
             "same function: see argus_lab.regions.region); returns the call site's marker.");
static PyObject *c_region(PyObject *self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames) {
    (void)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (R.python_region == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "region(): no boundary run has started in this process");
        return NULL;
    }
    PyObject *code = NULL;
    int lasti = 0;
    Py_hash_t hash = -1;
    int cacheable = B.on && nargs == 1 && kwnames == NULL && PyUnicode_CheckExact(args[0]);
    if (cacheable) {
        PyFrameObject *frame = PyEval_GetFrame(); /* the caller's: a C function has no frame of its own */
        hash = PyObject_Hash(args[0]);            /* cached in the str */
        if (frame == NULL || hash == -1) {
            PyErr_Clear();
            cacheable = 0;
        } else {
            code = (PyObject *)PyFrame_GetCode(frame);
            lasti = PyFrame_GetLasti(frame);
            PyObject *hit = site_find(code, lasti, hash, args[0]);
            if (hit != NULL) {
                Py_DECREF(code);
                return Py_NewRef(hit);
            }
        }
    }
    /* regions.region called from here sees the same caller (sys._getframe(1) skips this C function) */
    PyObject *marker = PyObject_Vectorcall(R.python_region, args, nargsf, kwnames);
    if (marker == NULL || !B.on) {
        Py_XDECREF(code);
        return marker;
    }
    PyObject *out = marker_new_for(marker);
    Py_DECREF(marker);
    if (out != NULL && cacheable)
        site_add(code, lasti, hash, args[0], out);
    Py_XDECREF(code);
    return out;
}

static void marker_dealloc(PyObject *self) {
    Py_CLEAR(((marker_object *)self)->marker);
    PyObject_Free(self);
}

static PyObject *marker_enter(PyObject *self, PyObject *unused) {
    (void)unused;
    PyObject *region_marker = ((marker_object *)self)->marker;
    PyObject *done = boundary_enter(NULL, region_marker);
    if (done == NULL)
        return NULL;
    Py_DECREF(done);
    if (done == Py_True)
        return Py_NewRef(region_marker); /* `with region(...) as m` binds the RegionMarker, as the Python path */
    return PyObject_CallMethodNoArgs(region_marker, R.enter_name);
}

static PyObject *marker_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *region_marker = ((marker_object *)self)->marker;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__ takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (args[0] == Py_None) {
        PyObject *done = boundary_exit(NULL, region_marker);
        if (done == NULL)
            return NULL;
        Py_DECREF(done);
        if (done == Py_True)
            Py_RETURN_NONE;
    }
    PyObject *call[4] = {region_marker, args[0], args[1], args[2]};
    return PyObject_VectorcallMethod(R.exit_name, call, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyObject *marker_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return PyObject_Call(((marker_object *)self)->marker, args, kwargs); /* the decorator */
}

static PyObject *marker_getattro(PyObject *self, PyObject *name) {
    PyObject *v = PyObject_GenericGetAttr(self, name);
    if (v != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return v;
    PyErr_Clear();
    return PyObject_GetAttr(((marker_object *)self)->marker, name);
}

static PyObject *marker_repr(PyObject *self) {
    return PyObject_Repr(((marker_object *)self)->marker);
}

static PyMethodDef marker_methods[] = {
    {"__enter__", marker_enter, METH_NOARGS, "Enter the region (one C call while the boundary run is on)."},
    {"__exit__", (PyCFunction)(void (*)(void))marker_exit, METH_FASTCALL, "Exit the region."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef marker_members[] = {
    {"marker", T_OBJECT_EX, offsetof(marker_object, marker), READONLY, "The RegionMarker this object stands for."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject MarkerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_argus_cupti_native.Marker",
    .tp_basicsize = sizeof(marker_object),
    .tp_dealloc = marker_dealloc,
    .tp_repr = marker_repr,
    .tp_call = marker_call,
    .tp_getattro = marker_getattro,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "What region() returns while a native boundary run is on: the boundary of a RegionMarker in C.",
    .tp_methods = marker_methods,
    .tp_members = marker_members,
};

static void boundary_clear(void) {
    B.on = 0;
    Py_CLEAR(B.run_obj);
    Py_CLEAR(B.zero);
    Py_CLEAR(B.stack_of);
    Py_CLEAR(B.node_of);
    Py_CLEAR(B.spill);
    Py_CLEAR(B.running_loop);
    clear_nodes();
    clear_sites();
    PyMem_Free(B.rows);
    B.rows = NULL;
    B.n_rows = B.cap_rows = 0;
}

PyDoc_STRVAR(boundary_start_doc,
             "boundary_start(stack_of, node_of, spill, running_loop, run, first_id, capacity[, region]): start a "
             "boundary run: generation `run`, instance ids from `first_id`, a row buffer of `capacity` instances; "
             "`region` (regions.region) is what this module's region() falls back to.");
static PyObject *boundary_start(PyObject *self, PyObject *args) {
    PyObject *stack_of, *node_of_fn, *spill, *running_loop, *python_region = NULL;
    long long run, first_id, capacity;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOLLL|O", &stack_of, &node_of_fn, &spill, &running_loop, &run, &first_id,
                          &capacity, &python_region))
        return NULL;
    if (capacity < 1) {
        PyErr_SetString(PyExc_ValueError, "capacity must be at least 1");
        return NULL;
    }
    boundary_clear(); /* a run left on (e.g. copied into a forked child) is dropped */
    B.rows = PyMem_Malloc((size_t)capacity * ROW_WIDTH * sizeof(int64_t));
    B.run_obj = PyLong_FromLongLong(run);
    B.zero = PyLong_FromLong(0);
    if (B.rows == NULL || B.run_obj == NULL || B.zero == NULL) {
        boundary_clear();
        return PyErr_NoMemory();
    }
    B.stack_of = Py_NewRef(stack_of);
    B.node_of = Py_NewRef(node_of_fn);
    B.spill = Py_NewRef(spill);
    B.running_loop = Py_NewRef(running_loop);
    B.running_loop_c = NULL;
    if (PyCFunction_Check(running_loop) &&
        (PyCFunction_GET_FLAGS(running_loop) & (METH_VARARGS | METH_KEYWORDS | METH_NOARGS | METH_O |
                                                METH_FASTCALL | METH_METHOD)) == METH_NOARGS)
        B.running_loop_c = PyCFunction_GET_FUNCTION(running_loop);
    if (python_region != NULL && python_region != Py_None)
        Py_XSETREF(R.python_region, Py_NewRef(python_region));
    B.cap_rows = capacity;
    B.run = run;
    B.next_id = first_id;
    B.on = 1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(boundary_stop_doc,
             "boundary_stop() -> (next id, rows): end the boundary run; the rows not taken yet (as boundary_take) "
             "and the next free instance id are handed back.");
static PyObject *boundary_stop(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (!B.on && B.rows == NULL)
        return Py_BuildValue("(Ly#)", (long long)B.next_id, "", (Py_ssize_t)0);
    PyObject *rest = boundary_take(NULL, NULL);
    if (rest == NULL)
        return NULL;
    long long next = B.next_id;
    boundary_clear();
    return Py_BuildValue("(LN)", next, rest);
}

static void boundary_after_fork_in_child(void) {
    B.on = 0; /* the parent's run; its objects are dropped at the next start */
    if (S.mode == MODE_PROBES || S.mode == MODE_CLOCK)
        S.mode = MODE_OFF; /* a forked child makes no CUPTI call at its boundaries (the parent's CUPTI is not its) */
}

static PyMethodDef methods[] = {
    {"set_current", set_current, METH_O, set_current_doc},
    {"current", current, METH_NOARGS, current_doc},
    {"start", start, METH_VARARGS, start_doc},
    {"start_probes", start_probes, METH_VARARGS, start_probes_doc},
    {"probe_simulate", probe_simulate, METH_O, probe_simulate_doc},
    {"start_clock", start_clock, METH_VARARGS, start_clock_doc},
    {"stop", stop, METH_NOARGS, stop_doc},
    {"allocate", allocate, METH_O, allocate_doc},
    {"set_clock_reads", set_clock_reads, METH_O, set_clock_reads_doc},
    {"clock_cost", clock_cost, METH_O, clock_cost_doc},
    {"enable_callbacks", enable_callbacks, METH_VARARGS, enable_callbacks_doc},
    {"simulate", simulate, METH_VARARGS, simulate_doc},
    {"export", export_records, METH_NOARGS, export_doc},
    {"threads", threads, METH_NOARGS, threads_doc},
    {"release", release, METH_NOARGS, release_doc},
    {"boundary_start", boundary_start, METH_VARARGS, boundary_start_doc},
    {"boundary_stop", boundary_stop, METH_NOARGS, boundary_stop_doc},
    {"boundary_enter", boundary_enter, METH_O, boundary_enter_doc},
    {"boundary_exit", boundary_exit, METH_O, boundary_exit_doc},
    {"boundary_append", boundary_append, METH_O, boundary_append_doc},
    {"boundary_next_id", boundary_next_id, METH_NOARGS, boundary_next_id_doc},
    {"boundary_take", boundary_take, METH_NOARGS, boundary_take_doc},
    {"boundary_pending", boundary_pending, METH_NOARGS, boundary_pending_doc},
    {"region", (PyCFunction)(void (*)(void))c_region, METH_FASTCALL | METH_KEYWORDS, region_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_argus_cupti_native", "argus_lab's native per-launch CUPTI path (see native.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__argus_cupti_native(void) {
    pthread_atfork(NULL, NULL, boundary_after_fork_in_child);
    R.enter_name = PyUnicode_InternFromString("__enter__");
    R.exit_name = PyUnicode_InternFromString("__exit__");
    if (R.enter_name == NULL || R.exit_name == NULL || PyType_Ready(&MarkerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Marker", (PyObject *)&MarkerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
