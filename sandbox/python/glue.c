/*
 * execd Python guest: CPython 3.11 as a WebAssembly reactor module.
 *
 * One interpreter and one __main__ namespace live for the life of the
 * instance; the host calls execd_eval once per cell. The exports and imports
 * are the ones of sandbox/ABI.md; the cell logic (REPL value, tracebacks)
 * is driver.py, embedded by build-python.sh. No guest stack is live between
 * calls, so the instance's whole state is its linear memory plus
 * __stack_pointer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wasi/api.h>

#include "sqlite3.h"

/* The imports, execd_alloc and execd_free, the envelope's buffer. The
   patched Modules/signalmodule.c imports "interrupted" itself and polls it
   from the eval breaker. */
#include "execd.h"

/* Defined by cpython-wasi.patch: the host's stop request
   (Modules/signalmodule.c), the stack guard (Python/ceval.c) and the
   recursion limit's ceiling (Python/sysmodule.c). */
extern int _Py_execd_poll_enabled;
extern int _Py_execd_interrupt_fired;
extern int _Py_execd_stop_pending;
void _Py_ExecdCheckInterrupt(void);
extern uintptr_t _Py_execd_stack_floor;
extern int _Py_execd_max_recursion_limit;

/* ---- stacks --------------------------------------------------------------
 * The shadow stack is STACK_SIZE bytes at the bottom of linear memory
 * (build-python.sh links with --stack-first), growing down towards 0:
 * overflowing it is an out-of-bounds trap that loses the interpreter.
 *  - STACK_MARGIN: every recursion check of CPython raises RecursionError
 *    once the stack pointer is this close to the bottom (cpython-wasi.patch,
 *    _Py_MakeRecCheck). No recursion count can do that job: the C stack a
 *    level takes ranges from ~100 bytes (repr of a nested list) to over a
 *    kilobyte (sorted() called from __lt__). The margin is what raising the
 *    error, and the C frames between two checks, may still use.
 *  - MAX_RECURSION_LIMIT: sys.setrecursionlimit() clamps to it. Python
 *    calls take no C stack in 3.11, so past the stack guard the limit only
 *    bounds Python frames: their heap, and the time to reach and unwind a
 *    RecursionError of runaway recursion (under a second here). wazero's
 *    own stack is never the first to run out: the guard stops every C
 *    recursion first (see sandbox/ABI.md for the figures). */
#ifndef STACK_SIZE
#define STACK_SIZE (2 << 20)
#endif
#define STACK_MARGIN (256 << 10)
#define MAX_RECURSION_LIMIT 100000

/* Where the worker mounts python-stdlib.zip (read-only, at /usr): the
   standard library, and the kit of pure-Python packages where Debian's
   apt puts them. */
#define PYTHON_HOME L"/usr/local"
#define PYTHON_LIB L"/usr/local/lib/python3.11"
#define PYTHON_KIT L"/usr/lib/python3/dist-packages"

static PyObject *run_cell;  /* driver.py's run_cell(source) */
static PyObject *reseed;    /* driver.py's reseed() */
static char *result_buf;    /* the current envelope: u32 length, then JSON */

/* ---- allocator ----------------------------------------------------------
 * The heap cap handed to execd_init is enforced here, on every allocation
 * CPython makes (all three allocator domains, see install_allocators), so
 * that running out of memory is an ordinary MemoryError and never bricks
 * the instance:
 *  - each cell may allocate RESERVE bytes above the cap it starts with, so a
 *    cell that frees memory (`del data`) can still be compiled and run when
 *    earlier cells left the heap full;
 *  - the first refusal in a cell lifts the cap once more by RESERVE, so the
 *    MemoryError can be formatted and the envelope built.
 * The total stays under heap_limit + 3*RESERVE, inside the linear memory the
 * host reserves above the heap cap. */

#define RESERVE ((size_t)6 << 20)

static size_t heap_limit = SIZE_MAX; /* set by execd_init */
static size_t cur_limit = SIZE_MAX;  /* heap_limit, lifted per cell */
static size_t used;                  /* bytes handed out, by usable size */
static int oom_fired;                /* a request was refused this cell */

static int over_limit(size_t grow)
{
    if (used + grow <= cur_limit && used + grow >= used)
        return 0;
    if (!oom_fired) {
        oom_fired = 1;
        if (cur_limit < SIZE_MAX - RESERVE)
            cur_limit += RESERVE;
    }
    return 1;
}

static void account_free(size_t n) { used = used > n ? used - n : 0; }

/* Called at the start of every cell. */
static void reset_limit(void)
{
    oom_fired = 0;
    cur_limit = heap_limit;
    if (heap_limit != SIZE_MAX && used + RESERVE > heap_limit)
        cur_limit = used + RESERVE;
}

static void *raw_malloc(void *ctx, size_t size)
{
    void *p;
    (void)ctx;
    if (size == 0)
        size = 1;
    if (over_limit(size))
        return NULL;
    p = malloc(size);
    if (!p) {
        oom_fired = 1;
        return NULL;
    }
    used += malloc_usable_size(p);
    return p;
}

static void *raw_calloc(void *ctx, size_t nelem, size_t elsize)
{
    void *p;
    size_t size;
    (void)ctx;
    if (nelem == 0 || elsize == 0)
        nelem = elsize = 1;
    if (elsize != 0 && nelem > SIZE_MAX / elsize)
        return NULL;
    size = nelem * elsize;
    if (over_limit(size))
        return NULL;
    p = calloc(nelem, elsize);
    if (!p) {
        oom_fired = 1;
        return NULL;
    }
    used += malloc_usable_size(p);
    return p;
}

static void *raw_realloc(void *ctx, void *ptr, size_t size)
{
    size_t old;
    void *p;
    if (!ptr)
        return raw_malloc(ctx, size);
    if (size == 0)
        size = 1;
    old = malloc_usable_size(ptr);
    if (size > old && over_limit(size - old))
        return NULL;
    p = realloc(ptr, size);
    if (!p) {
        oom_fired = 1;
        return NULL;
    }
    account_free(old);
    used += malloc_usable_size(p);
    return p;
}

static void raw_free(void *ctx, void *ptr)
{
    (void)ctx;
    if (!ptr)
        return;
    account_free(malloc_usable_size(ptr));
    free(ptr);
}

/* CPython for WASI is built without pymalloc (configure.ac), so the object
   and "mem" domains default to plain malloc() without going through the raw
   domain: all three must be counted, or nothing but the raw domain's few
   kilobytes ever is, and a memory bomb runs into the end of linear memory
   instead of the cap (where CPython's own error paths, short of memory
   themselves, can leave the interpreter unable to compile a cell). */
static void install_allocators(void)
{
    PyMemAllocatorEx counted = {NULL, raw_malloc, raw_calloc, raw_realloc, raw_free};
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &counted);
    PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &counted);
    PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &counted);
}

/* ---- SQLite ---------------------------------------------------------------
 * SQLite (linked in for the sqlite3 module) allocates through the same
 * counted functions, so a database that fills memory (an in-memory table,
 * a huge sort, the page cache) meets the heap cap: SQLITE_NOMEM, which
 * the sqlite3 module raises as MemoryError. */

static void *sq_malloc(int n) { return raw_malloc(NULL, (size_t)n); }
static void sq_free(void *p) { raw_free(NULL, p); }
static void *sq_realloc(void *p, int n) { return raw_realloc(NULL, p, (size_t)n); }
static int sq_size(void *p) { return p ? (int)malloc_usable_size(p) : 0; }
static int sq_roundup(int n) { return (n + 7) & ~7; }
static int sq_init(void *unused) { (void)unused; return SQLITE_OK; }
static void sq_shutdown(void *unused) { (void)unused; }

/* A running statement stops softly: every connection has a progress
 * handler that polls the host's stop request (the one the eval breaker
 * polls) every SQLITE_POLL_OPS virtual machine instructions. A yes
 * aborts the statement (sqlite3.OperationalError "interrupted", which
 * the code may catch; the eval loop then raises KeyboardInterrupt at its
 * next check, as for any stop) and the cell's status is interrupted
 * (driver.py). SQLite has one progress handler per connection, and the
 * code may set its own (Connection.set_progress_handler): the link wraps
 * sqlite3_progress_handler (build-python.sh, --wrap) so that the code's
 * handler is called from ours, at about the interval it asked for,
 * instead of replacing it. The state lives in the connection's client
 * data, freed when it closes. */

#define SQLITE_POLL_OPS 1000
#define PROGRESS_KEY "execd.progress"

struct progress {
    int (*cb)(void *); /* the code's handler, or NULL */
    void *arg;
    int every;         /* its interval */
    int step;          /* the interval SQLite calls on_progress at */
    int since_poll, since_cb;
};

void __real_sqlite3_progress_handler(sqlite3 *db, int n, int (*cb)(void *), void *arg);

static int on_progress(void *ctx)
{
    struct progress *p = ctx;
    p->since_poll += p->step;
    if (p->since_poll >= SQLITE_POLL_OPS) {
        p->since_poll = 0;
        _Py_ExecdCheckInterrupt();
        if (_Py_execd_stop_pending)
            return 1;
    }
    if (p->cb) {
        p->since_cb += p->step;
        if (p->since_cb >= p->every) {
            p->since_cb = 0;
            return p->cb(p->arg);
        }
    }
    return 0;
}

static void install_progress(sqlite3 *db, struct progress *p)
{
    p->step = p->cb && p->every < SQLITE_POLL_OPS ? p->every : SQLITE_POLL_OPS;
    p->since_poll = p->since_cb = 0;
    __real_sqlite3_progress_handler(db, p->step, on_progress, p);
}

void __wrap_sqlite3_progress_handler(sqlite3 *db, int n, int (*cb)(void *), void *arg)
{
    struct progress *p = sqlite3_get_clientdata(db, PROGRESS_KEY);
    if (!p) { /* a connection on_open could not equip */
        __real_sqlite3_progress_handler(db, n, cb, arg);
        return;
    }
    p->cb = n > 0 ? cb : NULL;
    p->arg = arg;
    p->every = n;
    install_progress(db, p);
}

/* Runs for every new connection (sqlite3_auto_extension). */
static int on_open(sqlite3 *db, char **err, const sqlite3_api_routines *api)
{
    struct progress *p = sqlite3_malloc(sizeof(*p));
    (void)err;
    (void)api;
    if (!p)
        return SQLITE_NOMEM;
    memset(p, 0, sizeof(*p));
    if (sqlite3_set_clientdata(db, PROGRESS_KEY, p, sqlite3_free) != SQLITE_OK) {
        sqlite3_free(p);
        return SQLITE_NOMEM;
    }
    install_progress(db, p);
    return SQLITE_OK;
}

static int setup_sqlite(void)
{
    static const sqlite3_mem_methods mem = {
        sq_malloc, sq_free, sq_realloc, sq_size, sq_roundup, sq_init, sq_shutdown, NULL,
    };
    if (sqlite3_config(SQLITE_CONFIG_MALLOC, &mem) != SQLITE_OK)
        return -1;
    return sqlite3_auto_extension((void (*)(void))on_open) == SQLITE_OK ? 0 : -1;
}

/* ---- sleeping ------------------------------------------------------------
 * time.sleep() calls clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ...),
 * and WASI hosts (wazero among them) support only relative clock waits in
 * poll_oneoff. This replaces wasi-libc's clock_nanosleep (and so nanosleep,
 * which calls it): it waits relative, in slices, polling the host's
 * interrupt between slices; an interrupt trips SIGINT and returns EINTR, and
 * CPython's sleep loop then raises KeyboardInterrupt, keeping the state. */

#define SLEEP_SLICE_NS 20000000LL /* 20 ms */

static int64_t ts_ns(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec; }

int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *req, struct timespec *rem)
{
    struct timespec now;
    int64_t left, slice;
    if (req->tv_nsec < 0 || req->tv_nsec >= 1000000000L)
        return EINVAL;
    left = ts_ns(req);
    if (flags & TIMER_ABSTIME) {
        if (clock_gettime(clock_id, &now) != 0)
            return errno;
        left -= ts_ns(&now);
    }
    while (left > 0) {
        __wasi_subscription_t sub;
        __wasi_event_t ev;
        __wasi_size_t n;
        __wasi_errno_t err;
        slice = left < SLEEP_SLICE_NS ? left : SLEEP_SLICE_NS;
        memset(&sub, 0, sizeof(sub));
        sub.u.tag = __WASI_EVENTTYPE_CLOCK;
        sub.u.u.clock.id = __WASI_CLOCKID_MONOTONIC;
        sub.u.u.clock.timeout = (__wasi_timestamp_t)slice;
        err = __wasi_poll_oneoff(&sub, &ev, 1, &n);
        if (err != 0)
            return err;
        left -= slice;
        _Py_ExecdCheckInterrupt();
        if (_Py_execd_interrupt_fired && left > 0) {
            if (rem) {
                rem->tv_sec = (time_t)(left / 1000000000LL);
                rem->tv_nsec = (long)(left % 1000000000LL);
            }
            return EINTR;
        }
    }
    return 0;
}

/* ---- the execd module: progress() for the code, hooks for driver.py ----- */

static PyObject *m_progress(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"done", "total", "message", NULL};
    double done, total = 0;
    PyObject *tot = Py_None, *message = Py_None, *s = NULL;
    const char *msg = "";
    Py_ssize_t n = 0;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "d|OO:progress", kwlist, &done, &tot, &message))
        return NULL;
    if (PyUnicode_Check(tot) && message == Py_None) { /* progress(done, message) */
        message = tot;
        tot = Py_None;
    }
    if (tot != Py_None) {
        total = PyFloat_AsDouble(tot);
        if (total == -1.0 && PyErr_Occurred())
            return NULL;
    }
    if (message != Py_None) {
        s = PyObject_Str(message);
        if (!s)
            return NULL;
        msg = PyUnicode_AsUTF8AndSize(s, &n);
        if (!msg) {
            Py_DECREF(s);
            return NULL;
        }
        n = (Py_ssize_t)utf8_cut(msg, (size_t)n, MAX_PROGRESS_MESSAGE);
    }
    host_progress(done, total, msg, (uint32_t)n);
    Py_XDECREF(s);
    Py_RETURN_NONE;
}

/* _show(data): hands the bytes of an image to the host (sandbox/ABI.md,
   execd.show); driver.py's show() reads paths and _repr_png_() first. */
static PyObject *m_show(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    int32_t r;
    (void)self;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "show() takes a path, the bytes of an image or an object with _repr_png_(), not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    r = host_show(view.buf, (uint32_t)view.len); /* wasm32: a buffer is below 4 GiB */
    PyBuffer_Release(&view);
    switch (r) {
    case 0:
        Py_RETURN_NONE;
    case SHOW_NOT_IMAGE:
        PyErr_SetString(PyExc_ValueError, "show(): not an image: execd shows PNG, JPEG, GIF and WebP (recognised by their first bytes)");
        return NULL;
    case SHOW_UNREADABLE:
        PyErr_SetString(PyExc_ValueError, "show(): not an image: " SHOW_UNREADABLE_WHY);
        return NULL;
    case SHOW_TOO_LARGE:
        PyErr_SetString(PyExc_ValueError, "show(): the image is larger than execd allows (limits.max_image_bytes)");
        return NULL;
    default:
        PyErr_SetString(PyExc_RuntimeError, "show(): this result already carries the most images execd allows (limits.max_images)");
        return NULL;
    }
}

/* _input(prompt): asks the person through the MCP client (sandbox/ABI.md,
   execd.input) and returns the answer, whole; EOFError when there is none. */
static PyObject *m_input(PyObject *self, PyObject *arg)
{
    Py_ssize_t n;
    const char *prompt;
    char small[INPUT_FIRST_BUF], *buf = small;
    int32_t r;
    PyObject *ret = NULL;
    (void)self;
    prompt = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!prompt)
        return NULL;
    r = host_input(prompt, (uint32_t)utf8_cut(prompt, (size_t)n, MAX_PROMPT), small, sizeof(small));
    if (r > (int32_t)sizeof(small)) { /* the host holds it */
        buf = PyMem_Malloc((size_t)r);
        if (!buf)
            return PyErr_NoMemory();
        if (host_input_answer(buf, (uint32_t)r) != r) {
            PyMem_Free(buf);
            PyErr_SetString(PyExc_EOFError, "input(): the answer was lost");
            return NULL;
        }
    }
    switch (r) {
    case INPUT_EOF:
        PyErr_SetString(PyExc_EOFError, "EOF when reading a line (the person declined or dismissed the question)");
        break;
    case INPUT_NO_CLIENT:
        PyErr_SetString(PyExc_EOFError, "input(): nobody can answer: the MCP client cannot be asked (it declared no elicitation capability)");
        break;
    case INPUT_TIMED_OUT:
        PyErr_SetString(PyExc_EOFError, "input(): nobody answered within the time execd waits for an answer (protocol.input_timeout)");
        break;
    case INPUT_TOO_LONG:
        PyErr_SetString(PyExc_ValueError, "input(): the answer is longer than execd takes (limits.max_input_answer_bytes)");
        break;
    case INPUT_STOPPED: /* the host stops the cell: its interrupt, as the eval breaker raises it */
        _Py_ExecdCheckInterrupt();
        if (PyErr_CheckSignals() == 0)
            PyErr_SetNone(PyExc_KeyboardInterrupt);
        break;
    default:
        if (r >= 0)
            ret = PyUnicode_DecodeUTF8(buf, r, "replace");
        else
            PyErr_Format(PyExc_EOFError, "input(): no answer (%d)", (int)r);
    }
    if (buf != small)
        PyMem_Free(buf);
    return ret;
}

/* _poll(on): lets the eval breaker poll the host's interrupt flag (only
   while user code runs). Turning it off also discards a stop requested but
   not yet raised, so driver code that follows is never interrupted. */
static PyObject *m_poll(PyObject *self, PyObject *on)
{
    (void)self;
    _Py_execd_poll_enabled = PyObject_IsTrue(on) == 1;
    if (!_Py_execd_poll_enabled)
        _Py_execd_stop_pending = 0;
    Py_RETURN_NONE;
}

/* _fired(): whether the host's interrupt tripped during this cell. */
static PyObject *m_fired(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(_Py_execd_interrupt_fired);
}

/* _packages(request): execd_packages.py's way to the host (packages.c). */
#include "packages.c"

static PyMethodDef execd_methods[] = {
    {"progress", (PyCFunction)(void (*)(void))m_progress, METH_VARARGS | METH_KEYWORDS,
     "progress(done, total=None, message=None)\n--\n\n"
     "Report progress of the running call to the client. total may be omitted\n"
     "(unknown); progress(done, message) is accepted too."},
    {"_show", m_show, METH_O, NULL},
    {"_input", m_input, METH_O, NULL},
    {"_poll", m_poll, METH_O, NULL},
    {"_fired", m_fired, METH_NOARGS, NULL},
    {"_packages", m_packages, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef execd_module = {
    PyModuleDef_HEAD_INIT, "execd",
    "The sandbox's side of execd: progress(), show() and the input() behind the builtin.", -1, execd_methods,
};

static PyObject *PyInit_execd(void) { return PyModule_Create(&execd_module); }

/* _execd_net: the network's natives (net.c). */
#include "net.c"
/* _execd_tools: code mode's native (tools.c). */
#include "tools.c"

/* ---- the envelope (its buffer: sandbox/abi/execd.h) --------------------- */

/* JSON string of the Python str o (lone surrogates escaped), or fallback. */
static void buf_pystr(buf_t *b, PyObject *o, const char *fallback)
{
    PyObject *bytes = NULL;
    if (o && PyUnicode_Check(o))
        bytes = PyUnicode_AsEncodedString(o, "utf-8", "backslashreplace");
    if (!bytes) {
        PyErr_Clear();
        buf_json(b, fallback, strlen(fallback));
        return;
    }
    buf_json(b, PyBytes_AS_STRING(bytes),
             utf8_cut(PyBytes_AS_STRING(bytes), (size_t)PyBytes_GET_SIZE(bytes), MAX_VALUE_BYTES));
    Py_DECREF(bytes);
}

static const char oom_envelope[] =
    "{\"status\":\"oom\",\"error\":{\"type\":\"MemoryError\",\"message\":\"out of memory\"}}";

/* Envelope for an exception that escaped driver.py itself (only out of
   memory or an interrupt can). */
static void put_escaped(buf_t *b)
{
    PyObject *type, *value, *tb;
    const char *status = "error", *name = "SystemError";
    PyErr_Fetch(&type, &value, &tb);
    if (type && PyErr_GivenExceptionMatches(type, PyExc_MemoryError)) {
        status = "oom";
        name = "MemoryError";
    } else if (type && PyErr_GivenExceptionMatches(type, PyExc_KeyboardInterrupt)) {
        status = _Py_execd_interrupt_fired ? "interrupted" : "error";
        name = "KeyboardInterrupt";
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    buf_puts(b, "{\"status\":\"");
    buf_puts(b, status);
    buf_puts(b, "\",\"error\":{\"type\":\"");
    buf_puts(b, name);
    buf_puts(b, "\",\"message\":\"the cell could not complete\"}}");
}

/* ---- exports ------------------------------------------------------------- */

/* driver.py, made into a C string by build-python.sh. */
#include "driver.h"

static int start_driver(void)
{
    PyObject *code, *ns, *builtins, *main_mod;
    int ret = -1;
    code = Py_CompileString(driver_py, "<execd>", Py_file_input);
    if (!code)
        return -1;
    ns = PyDict_New();
    /* The driver sees a copy of the builtins: code that replaces
       builtins.repr (or __import__) changes its own calls, not how the
       driver prints values and errors. */
    builtins = PyDict_Copy(PyEval_GetBuiltins());
    main_mod = PyImport_AddModule("__main__"); /* borrowed */
    if (ns && builtins && main_mod && PyDict_SetItemString(ns, "__builtins__", builtins) == 0) {
        PyObject *r = PyEval_EvalCode(code, ns, ns);
        if (r) {
            Py_DECREF(r);
            run_cell = PyDict_GetItemString(ns, "run_cell"); /* borrowed */
            reseed = PyDict_GetItemString(ns, "reseed");     /* borrowed */
            Py_XINCREF(run_cell);
            Py_XINCREF(reseed);
            if (run_cell && reseed)
                ret = 0;
        }
    }
    Py_XDECREF(builtins);
    Py_XDECREF(ns);
    Py_DECREF(code);
    return ret;
}

/* execd_init(mem_limit): creates the interpreter. mem_limit is the byte cap
   of the Python heap (0 = none). Returns 0 on success. */
EXPORT("execd_init") int32_t execd_init(uint32_t mem_limit)
{
    static int called;
    PyPreConfig pre;
    PyConfig config;
    PyStatus st;

    if (called)
        return -1;
    called = 1;
    /* The stack is all but empty here: its bottom is STACK_SIZE below. */
    _Py_execd_stack_floor = (uintptr_t)__builtin_frame_address(0) - STACK_SIZE + STACK_MARGIN;
    _Py_execd_max_recursion_limit = MAX_RECURSION_LIMIT;
    if (mem_limit)
        heap_limit = cur_limit = mem_limit;
    install_allocators();
    if (setup_sqlite() != 0)
        return -6;

    PyPreConfig_InitIsolatedConfig(&pre);
    pre.utf8_mode = 1;
    st = Py_PreInitialize(&pre);
    if (PyStatus_Exception(st))
        return -2;

    if (PyImport_AppendInittab("execd", PyInit_execd) < 0 || PyImport_AppendInittab("_execd_net", PyInit__execd_net) < 0 ||
        PyImport_AppendInittab("_execd_tools", PyInit__execd_tools) < 0)
        return -3;

    PyConfig_InitIsolatedConfig(&config);
    config.install_signal_handlers = 1; /* SIGINT -> KeyboardInterrupt */
    config.write_bytecode = 0;          /* the stdlib is read-only */
    config.buffered_stdio = 0;          /* output reaches the host as written */
    config.pathconfig_warnings = 0;
    config.user_site_directory = 0;
    config.module_search_paths_set = 1;
    st = PyConfig_SetString(&config, &config.home, PYTHON_HOME);
    if (!PyStatus_Exception(st))
        st = PyConfig_SetString(&config, &config.program_name, L"python3");
    if (!PyStatus_Exception(st))
        st = PyConfig_SetString(&config, &config.stdio_encoding, L"utf-8");
    if (!PyStatus_Exception(st))
        st = PyConfig_SetString(&config, &config.stdio_errors, L"backslashreplace");
    if (!PyStatus_Exception(st))
        st = PyWideStringList_Append(&config.module_search_paths, PYTHON_LIB);
    if (!PyStatus_Exception(st))
        st = PyWideStringList_Append(&config.module_search_paths, PYTHON_KIT);
    if (!PyStatus_Exception(st))
        st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
        if (st.err_msg)
            fprintf(stderr, "execd: python init: %s\n", st.err_msg);
        return -4;
    }
    if (start_driver() != 0) {
        PyErr_Print();
        return -5;
    }
    return 0;
}

/* execd_eval(code, len): evaluates one cell. code was returned by
   execd_alloc(len) and is owned by the guest from now on. Returns a pointer
   to a u32 length followed by that many bytes of JSON (see ABI.md), valid
   until the next execd_eval; 0 only if even that could not be allocated.
   driver.py's run_cell returns (status, value, error) with value a str or
   None and error None or (type, message, stack). */
EXPORT("execd_eval") char *execd_eval(char *code, uint32_t len)
{
    PyObject *src, *r = NULL;
    buf_t b = {0};

    free(result_buf);
    result_buf = NULL;
    envelope_start(&b);
    if (!run_cell) {
        free(code);
        buf_puts(&b, "{\"status\":\"error\",\"error\":{\"type\":\"SystemError\",\"message\":\"guest not initialised\"}}");
        return result_buf = envelope_finish(&b, oom_envelope);
    }
    _Py_execd_poll_enabled = 0;
    _Py_execd_interrupt_fired = 0;
    _Py_execd_stop_pending = 0; /* a stale request from the last cell */
    reset_limit();

    src = PyUnicode_DecodeUTF8(code, len, "surrogateescape");
    free(code);
    if (src) {
        r = PyObject_CallOneArg(run_cell, src);
        Py_DECREF(src);
    }
    _Py_execd_poll_enabled = 0;
    _Py_execd_stop_pending = 0;

    if (!r || !PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 3) {
        if (!r)
            put_escaped(&b);
        else
            buf_puts(&b, "{\"status\":\"error\",\"error\":{\"type\":\"SystemError\",\"message\":\"bad driver result\"}}");
    } else {
        PyObject *status = PyTuple_GET_ITEM(r, 0), *value = PyTuple_GET_ITEM(r, 1),
                 *err = PyTuple_GET_ITEM(r, 2);
        buf_puts(&b, "{\"status\":");
        buf_pystr(&b, status, "error");
        if (value != Py_None) {
            buf_puts(&b, ",\"value\":");
            buf_pystr(&b, value, "[unprintable value]");
        }
        if (PyTuple_Check(err) && PyTuple_GET_SIZE(err) == 3) {
            buf_puts(&b, ",\"error\":{\"type\":");
            buf_pystr(&b, PyTuple_GET_ITEM(err, 0), "Exception");
            buf_puts(&b, ",\"message\":");
            buf_pystr(&b, PyTuple_GET_ITEM(err, 1), "");
            buf_puts(&b, ",\"stack\":");
            buf_pystr(&b, PyTuple_GET_ITEM(err, 2), "");
            buf_puts(&b, "}");
        }
        buf_puts(&b, "}");
    }
    Py_XDECREF(r);
    PyErr_Clear();
    return result_buf = envelope_finish(&b, oom_envelope);
}

/* execd_reseed(): called by the host in a clone made from a memory image
   (see sandbox/ABI.md): driver.py's reseed() gives every random generator
   seeded so far fresh entropy. 0 on success. */
EXPORT("execd_reseed") int32_t execd_reseed(void)
{
    PyObject *r;
    if (!reseed)
        return -1;
    reset_limit();
    r = PyObject_CallNoArgs(reseed);
    if (!r) {
        PyErr_Clear();
        return -2;
    }
    Py_DECREF(r);
    return 0;
}
