/*
 * execd JavaScript guest: QuickJS as a WebAssembly reactor module.
 *
 * One JSRuntime and one JSContext live for the life of the instance; the host
 * calls execd_eval once per cell. The exports and imports are the ones of
 * sandbox/ABI.md. No guest stack is live between calls, so the instance's
 * whole state is its linear memory plus __stack_pointer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <wasi/api.h>

#include "quickjs.h"

#define EXPORT(name) __attribute__((export_name(name)))
#define IMPORT(name) __attribute__((import_module("execd"), import_name(name)))

/* Host imports (module "execd"). */
IMPORT("progress") void host_progress(double done, double total, const char *msg, uint32_t msg_len);
IMPORT("interrupted") int32_t host_interrupted(void);
IMPORT("show") int32_t host_show(const void *data, uint32_t len);
IMPORT("input") int32_t host_input(const char *prompt, uint32_t prompt_len, char *buf, uint32_t cap);

/* Added to QuickJS by quickjs-wasi.patch. */
void JS_DiscardPendingJobs(JSRuntime *rt);
void JS_SetRandomSeed(JSContext *ctx, uint64_t seed);
/* In quickjs.c, not in its header: the interrupt's error cannot be caught. */
int JS_IsUncatchableError(JSContext *ctx, JSValueConst val);

/* QuickJS checks its recursion against the shadow stack (in linear memory),
   but each JS call also takes a wasm frame of ~15 KB on the engine's native
   stack, about 50 times its shadow stack use: wazero's native stack, not
   ours, is what deep recursion exhausts first (a trap, and the instance is
   lost). So the limit is set low: 1 MiB allows ~3600 nested JS calls with a
   transient ~55 MB of native stack. */
#ifndef STACK_SIZE
#define STACK_SIZE (2 << 20)
#endif
#ifndef JS_STACK_LIMIT
#define JS_STACK_LIMIT (STACK_SIZE / 2)
#endif

/* Longest printable value handed back; the host truncates further. */
#define MAX_VALUE_BYTES (1 << 20)

static JSRuntime *rt;
static JSContext *ctx;
static JSValue helpers; /* object returned by the bootstrap script */
static int interrupt_fired; /* the host's poll said stop during this cell */
static int polling;         /* the interrupt handler asks the host */

/* The current result envelope: u32 little-endian length, then JSON. */
static char *result_buf;

/* ---- allocator ----------------------------------------------------------
 * The JS heap cap is enforced here rather than by JS_SetMemoryLimit, so
 * that running out of memory never bricks the instance:
 *  - each cell may allocate RESERVE bytes above the cap it starts with, so a
 *    cell that frees memory (`data = null`) can still be compiled and run
 *    when earlier cells left the heap full;
 *  - the first refusal in a cell lifts the cap once more by RESERVE, so
 *    QuickJS can build the InternalError, its stack and our envelope
 *    instead of throwing a bare null.
 * The total stays under heap_limit + 3*RESERVE, inside the linear memory
 * the host reserves above heap_limit.
 * QuickJS's own allocator also asserts size != 0, which aborted the whole
 * instance on some error paths after an out-of-memory; here a zero-size
 * request is served as one byte. The accounting mirrors js_def_malloc. */

#define MALLOC_OVERHEAD 8
#define RESERVE ((size_t)4 << 20)

static size_t heap_limit = (size_t)-1; /* set by execd_init */
static size_t cur_limit = (size_t)-1;  /* heap_limit, lifted per cell */
static int oom_fired;                  /* a request was refused this cell */
static JSMallocState *mstate;

static int over_limit(JSMallocState *s, size_t grow)
{
    mstate = s; /* &rt->malloc_state once the runtime exists */
    if (s->malloc_size + grow <= cur_limit)
        return 0;
    if (!oom_fired) {
        oom_fired = 1;
        if (cur_limit < (size_t)-1 - RESERVE)
            cur_limit += RESERVE;
    }
    return 1;
}

/* Called at the start of every cell. */
static void reset_limit(JSMallocState *s)
{
    oom_fired = 0;
    if (!s)
        return;
    cur_limit = heap_limit;
    if (heap_limit != (size_t)-1 && s->malloc_size + RESERVE > heap_limit)
        cur_limit = s->malloc_size + RESERVE;
}

static void *g_malloc(JSMallocState *s, size_t size)
{
    void *p;
    if (size == 0)
        size = 1;
    if (over_limit(s, size))
        return NULL;
    p = malloc(size);
    if (!p) {
        oom_fired = 1;
        return NULL;
    }
    s->malloc_count++;
    s->malloc_size += malloc_usable_size(p) + MALLOC_OVERHEAD;
    return p;
}

static void g_free(JSMallocState *s, void *ptr)
{
    if (!ptr)
        return;
    s->malloc_count--;
    s->malloc_size -= malloc_usable_size(ptr) + MALLOC_OVERHEAD;
    free(ptr);
}

static void *g_realloc(JSMallocState *s, void *ptr, size_t size)
{
    size_t old;
    void *p;
    if (!ptr)
        return size ? g_malloc(s, size) : NULL;
    if (size == 0) {
        g_free(s, ptr);
        return NULL;
    }
    old = malloc_usable_size(ptr);
    if (size > old && over_limit(s, size - old))
        return NULL;
    p = realloc(ptr, size);
    if (!p) {
        oom_fired = 1;
        return NULL;
    }
    s->malloc_size += malloc_usable_size(p) - old;
    return p;
}

static const JSMallocFunctions mf = {
    g_malloc, g_free, g_realloc, (size_t (*)(const void *))malloc_usable_size,
};

/* ---- small byte buffer for the envelope --------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} buf_t;

static void buf_grow(buf_t *b, size_t n)
{
    size_t cap;
    char *p;
    if (b->failed || b->len + n <= b->cap)
        return;
    cap = b->cap ? b->cap : 256;
    while (cap < b->len + n)
        cap *= 2;
    p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void buf_put(buf_t *b, const char *s, size_t n)
{
    buf_grow(b, n);
    if (b->failed)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void buf_puts(buf_t *b, const char *s) { buf_put(b, s, strlen(s)); }

/* JSON string literal of s[0:n] (input is UTF-8 from JS_ToCStringLen,
   which may hold lone surrogates as CESU-8; passed through unchanged). */
static void buf_json(buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i, start = 0;
    buf_put(b, "\"", 1);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        buf_put(b, s + start, i - start);
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            memcpy(u, "\\u00", 4);
            u[4] = hex[c >> 4];
            u[5] = hex[c & 15];
            u[6] = 0;
            esc = u;
        }
        buf_puts(b, esc);
        start = i + 1;
    }
    buf_put(b, s + start, n - start);
    buf_put(b, "\"", 1);
}

/* ---- JS helpers ---------------------------------------------------------- */

/* Runs the interrupt poll. QuickJS calls it every ~10k interpreter ticks
   and inside regular expression backtracking. It asks the host only while
   a cell runs (its code, its jobs and timers, the printing of its value or
   error), never during the cleanup after it. */
static int interrupt_handler(JSRuntime *r, void *opaque)
{
    (void)r;
    (void)opaque;
    if (polling && host_interrupted()) {
        interrupt_fired = 1;
        return 1;
    }
    return 0;
}

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

/* __write(fd, string): raw write to stdout (1) or stderr (2). */
static JSValue js_write(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    int32_t fd;
    size_t n;
    const char *s;
    (void)this_val;
    if (argc < 2 || JS_ToInt32(c, &fd, argv[0]))
        return JS_EXCEPTION;
    if (fd != 1 && fd != 2)
        return JS_ThrowRangeError(c, "bad fd");
    s = JS_ToCStringLen(c, &n, argv[1]);
    if (!s)
        return JS_EXCEPTION;
    write_all(fd, s, n);
    JS_FreeCString(c, s);
    return JS_UNDEFINED;
}

/* progress(done, total?, message?) or progress(done, message). */
static JSValue js_progress(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    double done = 0, total = 0;
    const char *msg = NULL;
    size_t n = 0;
    int mi = 2;
    (void)this_val;
    if (argc > 0 && JS_ToFloat64(c, &done, argv[0]))
        return JS_EXCEPTION;
    if (argc > 1 && JS_IsString(argv[1])) {
        mi = 1;
    } else if (argc > 1 && !JS_IsUndefined(argv[1]) && !JS_IsNull(argv[1])) {
        if (JS_ToFloat64(c, &total, argv[1]))
            return JS_EXCEPTION;
    }
    if (argc > mi && !JS_IsUndefined(argv[mi]) && !JS_IsNull(argv[mi])) {
        msg = JS_ToCStringLen(c, &n, argv[mi]);
        if (!msg)
            return JS_EXCEPTION;
        if (n > 4096)
            n = 4096;
    }
    host_progress(done, total, msg ? msg : "", (uint32_t)n);
    if (msg)
        JS_FreeCString(c, msg);
    return JS_UNDEFINED;
}

/* ---- fs: synchronous file access under the preopened /workspace ---------- */

static JSValue throw_errno(JSContext *c, const char *op, const char *path)
{
    return JS_ThrowTypeError(c, "%s '%s': %s", op, path, strerror(errno));
}

/* read_whole reads the file at path into *data (js_malloc'd, the caller
   frees it) and *len. Returns 0, or -1 with errno set (a JS exception is
   pending when out of memory). */
static int read_whole(JSContext *c, const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 0, n;
    *data = NULL;
    *len = 0;
    if (!f)
        return -1;
    for (;;) {
        if (*len == cap) {
            char *p;
            cap = cap ? cap * 2 : 65536;
            p = js_realloc(c, *data, cap);
            if (!p) {
                js_free(c, *data);
                *data = NULL;
                fclose(f);
                errno = ENOMEM;
                return -1;
            }
            *data = p;
        }
        n = fread(*data + *len, 1, cap - *len, f);
        if (n == 0)
            break;
        *len += n;
    }
    fclose(f);
    return 0;
}

/* fs.readFile(path) -> string (UTF-8) */
static JSValue js_fs_read(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *path;
    char *data;
    size_t len;
    JSValue ret;
    (void)this_val;
    path = JS_ToCString(c, argc > 0 ? argv[0] : JS_UNDEFINED);
    if (!path)
        return JS_EXCEPTION;
    if (read_whole(c, path, &data, &len) != 0) {
        ret = errno == ENOMEM ? JS_EXCEPTION : throw_errno(c, "readFile", path);
        JS_FreeCString(c, path);
        return ret;
    }
    JS_FreeCString(c, path);
    ret = JS_NewStringLen(c, data ? data : "", len);
    js_free(c, data);
    return ret;
}

/* fs.writeFile(path, string) / fs.appendFile(path, string) (magic 1) */
static JSValue js_fs_write(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv, int append)
{
    const char *path, *s;
    size_t n;
    FILE *f;
    JSValue ret = JS_UNDEFINED;
    (void)this_val;
    path = JS_ToCString(c, argc > 0 ? argv[0] : JS_UNDEFINED);
    if (!path)
        return JS_EXCEPTION;
    s = JS_ToCStringLen(c, &n, argc > 1 ? argv[1] : JS_UNDEFINED);
    if (!s) {
        JS_FreeCString(c, path);
        return JS_EXCEPTION;
    }
    f = fopen(path, append ? "ab" : "wb");
    if (!f || fwrite(s, 1, n, f) != n) {
        ret = throw_errno(c, append ? "appendFile" : "writeFile", path);
    }
    if (f && fclose(f) != 0 && !JS_IsException(ret))
        ret = throw_errno(c, "close", path);
    JS_FreeCString(c, s);
    JS_FreeCString(c, path);
    return ret;
}

/* fs.readdir(path) -> [names] */
static JSValue js_fs_readdir(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *path;
    DIR *d;
    struct dirent *e;
    JSValue arr;
    uint32_t i = 0;
    (void)this_val;
    path = JS_ToCString(c, argc > 0 ? argv[0] : JS_UNDEFINED);
    if (!path)
        return JS_EXCEPTION;
    d = opendir(path);
    if (!d) {
        arr = throw_errno(c, "readdir", path);
        JS_FreeCString(c, path);
        return arr;
    }
    arr = JS_NewArray(c);
    while (!JS_IsException(arr) && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (JS_SetPropertyUint32(c, arr, i++, JS_NewString(c, e->d_name)) < 0) {
            JS_FreeValue(c, arr);
            arr = JS_EXCEPTION;
        }
    }
    closedir(d);
    JS_FreeCString(c, path);
    return arr;
}

/* fs.exists(path) -> bool, fs.unlink(path) (magic 1), fs.mkdir(path) (magic 2),
   fs.rmdir(path) (magic 3) */
static JSValue js_fs_path_op(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv, int op)
{
    const char *path;
    struct stat st;
    int r;
    JSValue ret = JS_UNDEFINED;
    static const char *names[] = {"exists", "unlink", "mkdir", "rmdir"};
    (void)this_val;
    path = JS_ToCString(c, argc > 0 ? argv[0] : JS_UNDEFINED);
    if (!path)
        return JS_EXCEPTION;
    switch (op) {
    case 0:
        ret = JS_NewBool(c, stat(path, &st) == 0);
        break;
    case 1: r = unlink(path); goto check;
    case 2: r = mkdir(path, 0777); goto check;
    default: r = rmdir(path);
    check:
        if (r != 0)
            ret = throw_errno(c, names[op], path);
    }
    JS_FreeCString(c, path);
    return ret;
}

static const JSCFunctionListEntry fs_funcs[] = {
    JS_CFUNC_DEF("readFile", 1, js_fs_read),
    JS_CFUNC_MAGIC_DEF("writeFile", 2, js_fs_write, 0),
    JS_CFUNC_MAGIC_DEF("appendFile", 2, js_fs_write, 1),
    JS_CFUNC_DEF("readdir", 1, js_fs_readdir),
    JS_CFUNC_MAGIC_DEF("exists", 1, js_fs_path_op, 0),
    JS_CFUNC_MAGIC_DEF("unlink", 1, js_fs_path_op, 1),
    JS_CFUNC_MAGIC_DEF("mkdir", 1, js_fs_path_op, 2),
    JS_CFUNC_MAGIC_DEF("rmdir", 1, js_fs_path_op, 3),
};

/* ---- show() and prompt(): images to the result, questions to the person -- */

static JSValue interrupted_error(void);

/* show(x): attaches the image x to the result: a path (read here) or bytes
   (a Uint8Array, another typed array, or an ArrayBuffer). The host keeps
   PNG, JPEG, GIF and WebP within its limits (sandbox/ABI.md, execd.show). */
static JSValue js_show(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    JSValueConst x = argc > 0 ? argv[0] : JS_UNDEFINED;
    char *file = NULL;
    const uint8_t *p = NULL;
    size_t n = 0;
    int32_t r;
    (void)this_val;
    if (JS_IsString(x)) {
        const char *path = JS_ToCString(c, x);
        if (!path)
            return JS_EXCEPTION;
        if (read_whole(c, path, &file, &n) != 0) {
            JSValue e = errno == ENOMEM ? JS_EXCEPTION : throw_errno(c, "show", path);
            JS_FreeCString(c, path);
            return e;
        }
        JS_FreeCString(c, path);
        p = (const uint8_t *)file;
    } else if ((p = JS_GetArrayBuffer(c, &n, x)) == NULL) {
        size_t off, len, bpe;
        JSValue buf;
        JS_FreeValue(c, JS_GetException(c)); /* not an ArrayBuffer: try a view */
        buf = JS_GetTypedArrayBuffer(c, x, &off, &len, &bpe);
        if (JS_IsException(buf)) {
            JS_FreeValue(c, JS_GetException(c));
            return JS_ThrowTypeError(c, "show() takes a path or the bytes of an image (a Uint8Array or an ArrayBuffer)");
        }
        p = JS_GetArrayBuffer(c, &n, buf);
        JS_FreeValue(c, buf); /* x keeps the buffer alive */
        if (!p)
            return JS_EXCEPTION;
        p += off;
        n = len;
    }
    r = host_show(p, (uint32_t)n); /* wasm32: a buffer is below 4 GiB */
    js_free(c, file);
    switch (r) {
    case 0:
        return JS_UNDEFINED;
    case -1:
        return JS_ThrowTypeError(c, "show(): not an image: execd shows PNG, JPEG, GIF and WebP (recognised by their first bytes)");
    case -2:
        return JS_ThrowRangeError(c, "show(): the image is larger than execd allows (limits.max_image_bytes)");
    default:
        return JS_ThrowRangeError(c, "show(): this result already carries the most images execd allows (limits.max_images)");
    }
}

/* The longest answer prompt() takes; longer ones are cut. */
#define INPUT_CAP (64 << 10)

/* prompt(message): asks the person through the MCP client (sandbox/ABI.md,
   execd.input): the answer, or null when they decline or dismiss it. */
static JSValue js_prompt(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *msg = "";
    size_t n = 0;
    char *buf;
    int32_t r;
    JSValue ret;
    (void)this_val;
    if (argc > 0 && !JS_IsUndefined(argv[0])) {
        msg = JS_ToCStringLen(c, &n, argv[0]);
        if (!msg)
            return JS_EXCEPTION;
    }
    buf = js_malloc(c, INPUT_CAP);
    if (!buf) {
        if (argc > 0 && !JS_IsUndefined(argv[0]))
            JS_FreeCString(c, msg);
        return JS_EXCEPTION;
    }
    r = host_input(msg, (uint32_t)(n > 16384 ? 16384 : n), buf, INPUT_CAP);
    if (argc > 0 && !JS_IsUndefined(argv[0]))
        JS_FreeCString(c, msg);
    if (r >= 0)
        ret = JS_NewStringLen(c, buf, (size_t)r);
    else if (r == -1)
        ret = JS_NULL;
    else if (r == -2)
        ret = JS_ThrowInternalError(c, "prompt(): nobody can answer: the MCP client cannot be asked (it declared no elicitation capability)");
    else if (r == -3)
        ret = JS_ThrowInternalError(c, "prompt(): nobody answered within the time execd waits for an answer (protocol.input_timeout)");
    else { /* the host stops the cell: its interrupt, uncatchable */
        JSValue e;
        interrupt_fired = 1;
        e = interrupted_error();
        JS_SetUncatchableError(c, e, 1);
        ret = JS_Throw(c, e);
    }
    js_free(c, buf);
    return ret;
}

static void rejection_tracker(JSContext *c, JSValueConst promise, JSValueConst reason,
                              JS_BOOL is_handled, void *opaque);

/* ---- bootstrap ----------------------------------------------------------- */

/* bootstrap.js, made into a C string by build.sh. */
#include "bootstrap.h"

static int setup_globals(void)
{
    JSValue global, fn, args[2], fs;
    int ret = -1;

    global = JS_GetGlobalObject(ctx);
    JS_SetPropertyStr(ctx, global, "progress",
                      JS_NewCFunction(ctx, js_progress, "progress", 3));
    JS_SetPropertyStr(ctx, global, "show", JS_NewCFunction(ctx, js_show, "show", 1));
    JS_SetPropertyStr(ctx, global, "prompt", JS_NewCFunction(ctx, js_prompt, "prompt", 1));
    fs = JS_NewObject(ctx);
    JS_SetPropertyFunctionList(ctx, fs, fs_funcs, sizeof(fs_funcs) / sizeof(fs_funcs[0]));
    JS_SetPropertyStr(ctx, global, "fs", fs);

    fn = JS_Eval(ctx, bootstrap_js, sizeof(bootstrap_js) - 1, "<execd>", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(fn))
        goto done;
    args[0] = JS_NewCFunction(ctx, js_write, "write", 2);
    args[1] = global;
    helpers = JS_Call(ctx, fn, JS_UNDEFINED, 2, args);
    JS_FreeValue(ctx, args[0]);
    JS_FreeValue(ctx, fn);
    if (JS_IsException(helpers))
        goto done;
    ret = 0;
done:
    JS_FreeValue(ctx, global);
    return ret;
}

/* seed_random: Math.random's state from the host's entropy (WASI
   random_get). 0 on success. */
static int seed_random(void)
{
    uint64_t seed;
    if (__wasi_random_get((uint8_t *)&seed, sizeof(seed)) != 0)
        return -1;
    JS_SetRandomSeed(ctx, seed);
    return 0;
}

/* execd_init(mem_limit): creates the interpreter. mem_limit is the byte cap
   of the JS heap (0 = none). Returns 0 on success. */
EXPORT("execd_init") int32_t execd_init(uint32_t mem_limit)
{
    if (rt)
        return -1;
#ifdef EXECD_DEFAULT_MALLOC
    rt = JS_NewRuntime();
#else
    rt = JS_NewRuntime2(&mf, NULL);
#endif
    if (!rt)
        return -2;
    if (mem_limit)
        heap_limit = cur_limit = mem_limit;
    JS_SetMaxStackSize(rt, JS_STACK_LIMIT);
    JS_SetInterruptHandler(rt, interrupt_handler, NULL);
    JS_SetHostPromiseRejectionTracker(rt, rejection_tracker, NULL);
    ctx = JS_NewContext(rt);
    if (!ctx)
        return -3;
    if (seed_random())
        return -5;
    if (setup_globals())
        return -4;
    return 0;
}

/* execd_reseed(): called by the host in a clone made from a memory image
   (see sandbox/ABI.md): every random generator seeded at init starts again
   from fresh entropy. Here that is Math.random alone. 0 on success. */
EXPORT("execd_reseed") int32_t execd_reseed(void)
{
    if (!ctx)
        return -1;
    return seed_random() ? -2 : 0;
}

/* execd_alloc(n): a buffer of n bytes (plus one spare byte the guest may
   use for a terminating NUL). 0 when memory is exhausted. */
EXPORT("execd_alloc") void *execd_alloc(uint32_t n)
{
    char *p = malloc((size_t)n + 1);
    if (p)
        p[n] = 0;
    return p;
}

EXPORT("execd_free") void execd_free(void *p) { free(p); }

/* ---- eval ---------------------------------------------------------------- */

/* cstr_of: printable text of v via helpers.inspect, falling back to
   ToString; the caller frees with JS_FreeCString. NULL if all fails. */
static const char *inspect(JSValueConst v, size_t *n)
{
    JSValue fn, s;
    const char *r = NULL;
    /* Fast path: a finite, non-(-0) number prints as ToString does. */
    if (JS_IsNumber(v)) {
        double d;
        if (!JS_ToFloat64(ctx, &d, v) && d == d && d != 0 &&
            d != 1.0 / 0.0 && d != -1.0 / 0.0) {
            r = JS_ToCStringLen(ctx, n, v);
            if (r)
                return r;
            JS_FreeValue(ctx, JS_GetException(ctx));
        }
    }
    fn = JS_GetPropertyStr(ctx, helpers, "inspect");
    s = JS_Call(ctx, fn, JS_UNDEFINED, 1, &v);
    JS_FreeValue(ctx, fn);
    if (JS_IsException(s)) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        r = JS_ToCStringLen(ctx, n, v);
        if (!r)
            JS_FreeValue(ctx, JS_GetException(ctx));
        return r;
    }
    r = JS_ToCStringLen(ctx, n, s);
    JS_FreeValue(ctx, s);
    if (!r)
        JS_FreeValue(ctx, JS_GetException(ctx));
    return r;
}

static void put_prop_json(buf_t *b, JSValueConst obj, const char *prop, const char *fallback)
{
    JSValue v = JS_GetPropertyStr(ctx, obj, prop);
    const char *s = NULL;
    size_t n = 0;
    if (JS_IsException(v)) {
        JS_FreeValue(ctx, JS_GetException(ctx));
    } else if (!JS_IsUndefined(v)) {
        s = JS_ToCStringLen(ctx, &n, v);
        if (!s)
            JS_FreeValue(ctx, JS_GetException(ctx));
    }
    JS_FreeValue(ctx, v);
    if (s) {
        buf_json(b, s, n > MAX_VALUE_BYTES ? MAX_VALUE_BYTES : n);
        JS_FreeCString(ctx, s);
    } else {
        buf_json(b, fallback, strlen(fallback));
    }
}

/* Appends "error":{...} for the thrown value exc. */
static void put_error(buf_t *b, JSValueConst exc)
{
    buf_puts(b, ",\"error\":{\"type\":");
    if (JS_IsError(ctx, exc)) {
        put_prop_json(b, exc, "name", "Error");
        buf_puts(b, ",\"message\":");
        put_prop_json(b, exc, "message", "");
        buf_puts(b, ",\"stack\":");
        put_prop_json(b, exc, "stack", "");
    } else {
        size_t n = 0;
        const char *s = inspect(exc, &n);
        buf_puts(b, "\"Uncaught\",\"message\":");
        if (s) {
            buf_json(b, s, n > MAX_VALUE_BYTES ? MAX_VALUE_BYTES : n);
            JS_FreeCString(ctx, s);
        } else {
            buf_puts(b, "\"[unprintable value]\"");
        }
    }
    buf_puts(b, "}");
}

/* is_oom: the thrown value is QuickJS's out-of-memory InternalError. */
static int is_oom(JSValueConst exc)
{
    JSValue m;
    const char *s;
    int r = 0;
    if (!JS_IsError(ctx, exc))
        return oom_fired && !JS_IsObject(exc);
    m = JS_GetPropertyStr(ctx, exc, "message");
    if (JS_IsException(m)) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        return oom_fired;
    }
    s = JS_ToCString(ctx, m);
    JS_FreeValue(ctx, m);
    if (!s) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        return oom_fired;
    }
    r = strcmp(s, "out of memory") == 0;
    JS_FreeCString(ctx, s);
    return r;
}

/* Promises rejected with no handler during a cell, reported on stderr as
   "Uncaught (in promise)" when the cell ends (as browsers and Node do). */
#define MAX_REJECTIONS 16
static struct {
    JSValue promise, reason;
} rejections[MAX_REJECTIONS];
static int n_rejections, lost_rejections;

static void rejection_tracker(JSContext *c, JSValueConst promise, JSValueConst reason,
                              JS_BOOL is_handled, void *opaque)
{
    int i;
    (void)opaque;
    if (is_handled) {
        for (i = 0; i < n_rejections; i++) {
            if (JS_VALUE_GET_PTR(rejections[i].promise) == JS_VALUE_GET_PTR(promise)) {
                JS_FreeValue(c, rejections[i].promise);
                JS_FreeValue(c, rejections[i].reason);
                rejections[i] = rejections[--n_rejections];
                return;
            }
        }
        return;
    }
    if (n_rejections == MAX_REJECTIONS) {
        lost_rejections++;
        return;
    }
    rejections[n_rejections].promise = JS_DupValue(c, promise);
    rejections[n_rejections].reason = JS_DupValue(c, reason);
    n_rejections++;
}

/* Reports and forgets the tracked rejections, except the cell's own
   promise (its rejection is the cell's error) and those whose reason is
   the interrupt (a job the interrupt stopped rejects its promise with it:
   that is the host's stop, not the code's error). */
static void report_rejections(JSValueConst cell)
{
    int i;
    char more[64];
    for (i = 0; i < n_rejections; i++) {
        JSValueConst reason = rejections[i].reason;
        if (JS_IsUncatchableError(ctx, reason)) {
            /* a later `await` of that promise must be able to catch it */
            JS_SetUncatchableError(ctx, reason, 0);
        } else if (JS_VALUE_GET_PTR(rejections[i].promise) != JS_VALUE_GET_PTR(cell)) {
            size_t n = 0;
            const char *s = inspect(rejections[i].reason, &n);
            write_all(2, "Uncaught (in promise) ", 22);
            if (s) {
                write_all(2, s, n);
                JS_FreeCString(ctx, s);
            }
            write_all(2, "\n", 1);
        }
        JS_FreeValue(ctx, rejections[i].promise);
        JS_FreeValue(ctx, rejections[i].reason);
    }
    n_rejections = 0;
    if (lost_rejections) {
        int k = snprintf(more, sizeof(more), "... and %d more unhandled rejections\n", lost_rejections);
        write_all(2, more, (size_t)k);
        lost_rejections = 0;
    }
}

/* Calls helpers[name](); returns its result (JS_EXCEPTION on error). */
static JSValue call_helper(const char *name)
{
    JSValue fn = JS_GetPropertyStr(ctx, helpers, name), r;
    if (JS_IsException(fn))
        return fn;
    r = JS_Call(ctx, fn, JS_UNDEFINED, 0, NULL);
    JS_FreeValue(ctx, fn);
    return r;
}

/* The error a cell stopped by the host ends with, when QuickJS did not
   throw it itself (the stop came while sleeping, or a promise job swallowed
   QuickJS's own into a rejection). */
static JSValue interrupted_error(void)
{
    JSValue e = JS_NewError(ctx);
    JS_DefinePropertyValueStr(ctx, e, "name", JS_NewString(ctx, "InternalError"), JS_PROP_C_W_E);
    JS_DefinePropertyValueStr(ctx, e, "message", JS_NewString(ctx, "interrupted"), JS_PROP_C_W_E);
    return e;
}

/* Sleeps ms milliseconds in slices, polling the host's interrupt.
   Returns -1 if interrupted. */
static int sleep_ms(double ms)
{
    while (ms > 0) {
        double slice = ms < 10 ? ms : 10;
        struct timespec ts = {0, (long)(slice * 1e6)};
        if (host_interrupted()) {
            interrupt_fired = 1;
            return -1;
        }
        nanosleep(&ts, NULL);
        ms -= slice;
    }
    if (host_interrupted()) {
        interrupt_fired = 1;
        return -1;
    }
    return 0;
}

/* Runs the event loop of a cell: queued promise jobs, then timers (sleeping
   until each is due), until there is nothing left. On an uncaught exception
   (in a job only an interrupt or out of memory escape; a timer callback may
   throw anything) it stores it in *exc and returns -1. A promise job turns
   every exception of its callback into a rejection, the interrupt too, so
   the loop checks after each job whether the host's stop came: then the
   cell ends, whatever queue it was draining. */
static int run_loop(JSValue *exc)
{
    JSContext *c;
    for (;;) {
        int r;
        if (interrupt_fired) {
            *exc = interrupted_error();
            return -1;
        }
        r = JS_ExecutePendingJob(rt, &c);
        if (r < 0) {
            *exc = JS_GetException(c);
            return -1;
        }
        if (r > 0)
            continue;
        {
            JSValue v = JS_GetPropertyStr(ctx, helpers, "pending");
            int32_t pending = 0;
            if (JS_IsException(v) || JS_ToInt32(ctx, &pending, v)) {
                *exc = JS_GetException(ctx);
                return -1;
            }
            if (pending <= 0)
                return 0;
            v = call_helper("nextTimer");
            double wait;
            if (JS_IsException(v)) {
                *exc = JS_GetException(ctx);
                return -1;
            }
            if (JS_ToFloat64(ctx, &wait, v) || wait < 0)
                return 0;
            if (sleep_ms(wait) < 0) {
                *exc = interrupted_error();
                return -1;
            }
            v = call_helper("runTimer");
            if (JS_IsException(v)) {
                *exc = JS_GetException(ctx);
                return -1;
            }
            JS_FreeValue(ctx, v);
        }
    }
}

static const char oom_envelope[] =
    "{\"status\":\"oom\",\"error\":{\"type\":\"InternalError\",\"message\":\"out of memory\"}}";

static char *finish(buf_t *b)
{
    uint32_t n;
    if (b->failed) {
        free(b->p);
        b->p = malloc(4 + sizeof(oom_envelope));
        if (!b->p)
            return NULL;
        n = sizeof(oom_envelope) - 1;
        memcpy(b->p + 4, oom_envelope, n);
    } else {
        n = (uint32_t)(b->len - 4);
    }
    memcpy(b->p, &n, 4); /* wasm32 is little-endian */
    return b->p;
}

/* execd_eval(code, len): evaluates one cell. code was returned by
   execd_alloc(len) and is owned by the guest from now on. Returns a pointer
   to a u32 length followed by that many bytes of JSON (see ABI.md), valid
   until the next execd_eval; 0 only if even that could not be allocated. */
EXPORT("execd_eval") char *execd_eval(char *code, uint32_t len)
{
    JSValue ret, exc = JS_UNDEFINED, val = JS_UNDEFINED;
    int failed = 0, state;
    buf_t b = {0}, eb = {0}; /* the envelope, its error part */
    const char *status = "ok", *shown = NULL;
    size_t shown_len = 0;

    free(result_buf);
    result_buf = NULL;
    interrupt_fired = 0;
    buf_put(&b, "\0\0\0\0", 4);

    if (!rt) {
        free(code);
        buf_puts(&b, "{\"status\":\"error\",\"error\":{\"type\":\"InternalError\",\"message\":\"guest not initialised\"}}");
        return result_buf = finish(&b);
    }
    JS_UpdateStackTop(rt);
    reset_limit(mstate);
    polling = 1;
    code[len] = 0;
    /* A cell that cannot contain a top-level await is evaluated as a plain
       script: no async wrapper, no promise to settle. */
    int async = memmem(code, len, "await", 5) != NULL;
    ret = JS_Eval(ctx, code, len, "<cell>", JS_EVAL_TYPE_GLOBAL | (async ? JS_EVAL_FLAG_ASYNC : 0));
    free(code);

    if (JS_IsException(ret)) {
        exc = JS_GetException(ctx);
        failed = 1;
    } else if (!async) {
        /* Jobs queued by the cell still run before it is done. */
        if (run_loop(&exc) < 0)
            failed = 1;
        else
            val = JS_DupValue(ctx, ret);
        report_rejections(JS_UNDEFINED);
        JS_FreeValue(ctx, ret);
    } else {
        /* top-level await: ret is a promise of {value}; run jobs until it
           settles. Jobs queued by the cell run even when it settles first. */
        if (run_loop(&exc) < 0) {
            failed = 1;
        } else {
            state = JS_PromiseState(ctx, ret);
            if (state == JS_PROMISE_FULFILLED) {
                JSValue r = JS_PromiseResult(ctx, ret);
                val = JS_GetPropertyStr(ctx, r, "value");
                JS_FreeValue(ctx, r);
                if (JS_IsException(val)) {
                    val = JS_UNDEFINED;
                    exc = JS_GetException(ctx);
                    failed = 1;
                }
            } else if (state == JS_PROMISE_REJECTED) {
                exc = JS_PromiseResult(ctx, ret);
                failed = 1;
            } else if (state == JS_PROMISE_PENDING) {
                exc = JS_NewError(ctx);
                JS_DefinePropertyValueStr(ctx, exc, "message",
                    JS_NewString(ctx, "top-level await never settled: no promise job or timer left to run"),
                    JS_PROP_C_W_E);
                failed = 1;
            }
        }
        report_rejections(ret);
        JS_FreeValue(ctx, ret);
    }

    /* The value is printed while the host may still stop the cell: a
       getter, a Proxy trap or toString in it is the cell's code. */
    if (!failed && !JS_IsUndefined(val)) {
        shown = inspect(val, &shown_len);
        if (interrupt_fired) {
            if (shown)
                JS_FreeCString(ctx, shown);
            shown = NULL;
            failed = 1;
            exc = interrupted_error();
        }
    }
    /* A stop the host asked for is the status whatever the cell did after
       it (see run_loop): the host maps it to timeout or interrupted. */
    if (interrupt_fired)
        status = "interrupted";
    else if (failed && is_oom(exc))
        status = "oom";
    else if (failed)
        status = "error";
    if (failed) {
        if (!strcmp(status, "oom"))
            JS_RunGC(rt);
        put_error(&eb, exc);
    }

    /* Cleanup, with the poll off: it must run to its end. */
    polling = 0;
    interrupt_fired = 0;
    if (failed) {
        /* A failed cell leaves nothing behind to run later: no queued job,
           no timer (an interval would otherwise fire in every later cell). */
        JS_DiscardPendingJobs(rt);
        JS_FreeValue(ctx, call_helper("clearTimers"));
        if (JS_HasException(ctx))
            JS_FreeValue(ctx, JS_GetException(ctx));
        /* An uncatchable interrupt must not poison the next cell. */
        JS_SetUncatchableError(ctx, exc, 0);
    }
    buf_puts(&b, "{\"status\":\"");
    buf_puts(&b, status);
    buf_puts(&b, "\"");
    if (failed) {
        if (eb.failed)
            b.failed = 1;
        else
            buf_put(&b, eb.p, eb.len);
    } else if (!JS_IsUndefined(val)) {
        buf_puts(&b, ",\"value\":");
        if (shown)
            buf_json(&b, shown, shown_len > MAX_VALUE_BYTES ? MAX_VALUE_BYTES : shown_len);
        else
            buf_puts(&b, "\"[unprintable value]\"");
    }
    buf_puts(&b, "}");
    free(eb.p);
    if (shown)
        JS_FreeCString(ctx, shown);
    JS_FreeValue(ctx, exc);
    JS_FreeValue(ctx, val);
    if (failed && !strcmp(status, "oom"))
        JS_RunGC(rt);
    return result_buf = finish(&b);
}
