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

/* The imports, execd_alloc and execd_free, the envelope's buffer. */
#include "execd.h"

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

static JSRuntime *rt;
static JSContext *ctx;
static JSValue helpers; /* object returned by the bootstrap script */
/* The helpers' counters every cell's event loop reads, as atoms made once
   at init (JS_GetPropertyStr would look each name up again per read). */
/* The event loop's counts, written by the guest's JavaScript through
   helpers.counts, an Int32Array over this array (bootstrap.js): the timers
   that keep the cell going, the unref'd timers, fetches and tool calls in
   flight. run_loop reads them after every job without a property lookup. */
enum { COUNT_TIMERS, COUNT_UNREFD, COUNT_FETCHES, COUNT_TOOLS, N_COUNTS };
static int32_t loop_counts[N_COUNTS];
/* Never freed: every cell's JS_Eval names its file "<cell>", and finds
   this atom rather than making it again (and freeing it after). */
static JSAtom atom_cell;
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
        n = utf8_cut(msg, n, MAX_PROGRESS_MESSAGE);
    }
    host_progress(done, total, msg ? msg : "", (uint32_t)n);
    if (msg)
        JS_FreeCString(c, msg);
    return JS_UNDEFINED;
}

/* ---- fs: synchronous file access under the preopened /workspace ---------- */

/* The working directory, set by execd_init: a relative path (in fs, show(),
   a cell's import()) names a file under it, as in the Python guest. It is
   also the one directory the worker mounts (sandbox/ABI.md). */
#define WORKSPACE "/workspace"

/* normalize_path: "." and ".." segments and repeated slashes of the
   absolute path p resolved in place (".." stops at the root). */
static void normalize_path(char *p)
{
    char *out = p, *in = p;
    while (*in) {
        char *seg;
        size_t len;
        while (*in == '/')
            in++;
        seg = in;
        while (*in && *in != '/')
            in++;
        len = (size_t)(in - seg);
        if (len == 0 || (len == 1 && seg[0] == '.'))
            continue;
        if (len == 2 && seg[0] == '.' && seg[1] == '.') {
            while (out > p && *--out != '/')
                ;
            continue;
        }
        *out++ = '/';
        memmove(out, seg, len);
        out += len;
    }
    if (out == p)
        *out++ = '/';
    *out = 0;
}

/* outside_workspace(path): path, taken from the working directory and with
   its "." and ".." resolved, names neither WORKSPACE nor a file under it. */
static int outside_workspace(const char *path)
{
    char abs[1024];
    size_t root = strlen(WORKSPACE);
    int n = path[0] == '/' ? snprintf(abs, sizeof(abs), "%s", path)
                           : snprintf(abs, sizeof(abs), WORKSPACE "/%s", path);
    if (n < 0 || (size_t)n >= sizeof(abs))
        return 0;
    normalize_path(abs);
    return strncmp(abs, WORKSPACE, root) != 0 || (abs[root] != 0 && abs[root] != '/');
}

/* throw_errno: the TypeError for op on path failing with errno. For a path
   outside the workspace wasi-libc and the host say "Capabilities
   insufficient" or "Operation not permitted": the message says what that
   means here instead. */
static JSValue throw_errno(JSContext *c, const char *op, const char *path)
{
    if (outside_workspace(path))
        return JS_ThrowTypeError(c, "%s '%s': outside " WORKSPACE ", the only directory the sandbox sees", op, path);
    return JS_ThrowTypeError(c, "%s '%s': %s", op, path, strerror(errno));
}

/* read_file(path): the whole file, NUL-terminated, from js_malloc; NULL
   with errno set when it cannot be opened, or with an exception pending
   when memory ran out. */
static char *read_file(JSContext *c, const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, r;
    if (!f)
        return NULL;
    for (;;) {
        if (len + 1 >= cap) {
            char *p;
            cap = cap ? cap * 2 : 65536;
            p = js_realloc(c, buf, cap);
            if (!p) {
                js_free(c, buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        r = fread(buf + len, 1, cap - len - 1, f);
        if (r == 0)
            break;
        len += r;
    }
    fclose(f);
    buf[len] = 0;
    *n = len;
    return buf;
}

/* fs.readFile(path) -> string (UTF-8) */
static JSValue js_fs_read(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *path;
    char *data;
    size_t len = 0;
    JSValue ret;
    (void)this_val;
    path = JS_ToCString(c, argc > 0 ? argv[0] : JS_UNDEFINED);
    if (!path)
        return JS_EXCEPTION;
    data = read_file(c, path, &len);
    if (!data) {
        ret = JS_HasException(c) ? JS_EXCEPTION : throw_errno(c, "readFile", path);
    } else {
        ret = JS_NewStringLen(c, data, len);
        js_free(c, data);
    }
    JS_FreeCString(c, path);
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

/* ---- natives of web.js: bytes, base64, entropy, the clock ---------------- */

/* bytes_of(view): the bytes of a typed array (web.js hands every buffer
   source over as a Uint8Array). NULL with an exception pending if view is
   not one or its buffer is detached. */
static uint8_t *bytes_of(JSContext *c, JSValueConst view, size_t *n)
{
    size_t off, len, per, size;
    uint8_t *p;
    JSValue buf = JS_GetTypedArrayBuffer(c, view, &off, &len, &per);
    if (JS_IsException(buf))
        return NULL;
    p = JS_GetArrayBuffer(c, &size, buf);
    JS_FreeValue(c, buf);
    if (!p)
        return NULL;
    *n = len;
    return p + off;
}

/* randomFill(u8): fills u8 with the host's entropy (WASI random_get). */
static JSValue js_random_fill(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    size_t n;
    uint8_t *p;
    (void)this_val;
    if (argc < 1 || !(p = bytes_of(c, argv[0], &n)))
        return JS_EXCEPTION;
    if (n && __wasi_random_get(p, n) != 0)
        return JS_ThrowInternalError(c, "the host gave no entropy");
    return JS_UNDEFINED;
}

/* utf8Encode(string) -> Uint8Array: UTF-8 with lone surrogates as U+FFFD
   (QuickJS encodes them as 3-byte ED A0..BF xx sequences, the length of
   EF BF BD). */
static JSValue js_utf8_encode(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    size_t n, i, size;
    const char *s;
    uint8_t *p;
    JSValue ab, u8;
    (void)this_val;
    s = JS_ToCStringLen2(c, &n, argc > 0 ? argv[0] : JS_UNDEFINED, 0);
    if (!s)
        return JS_EXCEPTION;
    ab = JS_NewArrayBufferCopy(c, (const uint8_t *)s, n);
    JS_FreeCString(c, s);
    if (JS_IsException(ab))
        return ab;
    p = JS_GetArrayBuffer(c, &size, ab);
    for (i = 0; p && i + 2 < n; i++) {
        if (p[i] == 0xED && p[i + 1] >= 0xA0 && p[i + 1] <= 0xBF) {
            p[i] = 0xEF;
            p[i + 1] = 0xBF;
            p[i + 2] = 0xBD;
            i += 2;
        }
    }
    {
        /* the constructor reads all three arguments whatever argc says */
        JSValueConst args[3] = {ab, JS_NewInt32(c, 0), JS_UNDEFINED};
        u8 = JS_NewTypedArray(c, 3, args, JS_TYPED_ARRAY_UINT8);
    }
    JS_FreeValue(c, ab);
    return u8;
}

/* utf8Decode(u8, fatal) -> string: the WHATWG UTF-8 decoder (Encoding,
   section 9.1.1): each maximal invalid subpart becomes one U+FFFD, or with
   fatal a TypeError. The output is built as valid UTF-8 first. */
static JSValue js_utf8_decode(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    size_t n, i = 0, o = 0;
    const uint8_t *p;
    uint8_t *out;
    int fatal = argc > 1 && JS_ToBool(c, argv[1]) > 0;
    JSValue r;
    (void)this_val;
    if (argc < 1 || !(p = bytes_of(c, argv[0], &n)))
        return JS_EXCEPTION;
    if (n > ((size_t)1 << 28))
        return JS_ThrowRangeError(c, "input too long");
    out = js_malloc(c, n * 3 + 1);
    if (!out)
        return JS_EXCEPTION;
    while (i < n) {
        uint8_t b = p[i];
        size_t need, k;
        uint8_t lo = 0x80, hi = 0xBF;
        if (b < 0x80) {
            out[o++] = b;
            i++;
            continue;
        }
        if (b >= 0xC2 && b <= 0xDF)
            need = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            if (b == 0xE0)
                lo = 0xA0;
            else if (b == 0xED)
                hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            if (b == 0xF0)
                lo = 0x90;
            else if (b == 0xF4)
                hi = 0x8F;
        } else
            goto invalid1;
        for (k = 1; k <= need; k++) {
            if (i + k >= n || p[i + k] < lo || p[i + k] > hi) {
                /* the lead byte and the continuations so far are one subpart */
                if (fatal)
                    goto fail;
                i += k;
                goto replace;
            }
            lo = 0x80;
            hi = 0xBF;
        }
        memcpy(out + o, p + i, need + 1);
        o += need + 1;
        i += need + 1;
        continue;
    invalid1:
        if (fatal)
            goto fail;
        i++;
    replace:
        out[o++] = 0xEF;
        out[o++] = 0xBF;
        out[o++] = 0xBD;
    }
    r = JS_NewStringLen(c, (const char *)out, o);
    js_free(c, out);
    return r;
fail:
    js_free(c, out);
    return JS_ThrowTypeError(c, "The encoded data was not valid for encoding utf-8");
}

/* latin1(s, &n): the UTF-16 code units of the JS string s as bytes, or NULL
   (no exception) when one is above 0xFF; NULL with an exception when s is
   not a string. The caller frees the result with js_free. */
static uint8_t *latin1(JSContext *c, JSValueConst v, size_t *n, int *bad)
{
    size_t len, i, o = 0;
    const char *s = JS_ToCStringLen2(c, &len, v, 1);
    uint8_t *out;
    *bad = 0;
    if (!s)
        return NULL;
    out = js_malloc(c, len + 1);
    if (!out) {
        JS_FreeCString(c, s);
        return NULL;
    }
    for (i = 0; i < len; i++) {
        uint8_t b = (uint8_t)s[i];
        if (b < 0x80) {
            out[o++] = b;
        } else if ((b == 0xC2 || b == 0xC3) && i + 1 < len) {
            out[o++] = (uint8_t)(((b & 0x1F) << 6) | ((uint8_t)s[i + 1] & 0x3F));
            i++;
        } else {
            *bad = 1;
            break;
        }
    }
    JS_FreeCString(c, s);
    if (*bad) {
        js_free(c, out);
        return NULL;
    }
    *n = o;
    return out;
}

/* binary_string(p, n): the JS string whose code units are the bytes p[0:n]. */
static JSValue binary_string(JSContext *c, const uint8_t *p, size_t n)
{
    size_t i, o = 0;
    JSValue r;
    char *s = js_malloc(c, n * 2 + 1);
    if (!s)
        return JS_EXCEPTION;
    for (i = 0; i < n; i++) {
        if (p[i] < 0x80) {
            s[o++] = (char)p[i];
        } else {
            s[o++] = (char)(0xC0 | (p[i] >> 6));
            s[o++] = (char)(0x80 | (p[i] & 0x3F));
        }
    }
    r = JS_NewStringLen(c, s, o);
    js_free(c, s);
    return r;
}

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* btoa(s) -> base64 of s's code units, or null when one is above 0xFF
   (web.js throws the DOMException). */
static JSValue js_b64_encode(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    size_t n = 0, i, o = 0;
    int bad;
    uint8_t *in = latin1(c, argc > 0 ? argv[0] : JS_UNDEFINED, &n, &bad);
    char *out;
    JSValue r;
    (void)this_val;
    if (!in)
        return bad ? JS_NULL : JS_EXCEPTION;
    out = js_malloc(c, (n + 2) / 3 * 4 + 1);
    if (!out) {
        js_free(c, in);
        return JS_EXCEPTION;
    }
    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64_chars[v >> 18];
        out[o++] = b64_chars[(v >> 12) & 63];
        out[o++] = b64_chars[(v >> 6) & 63];
        out[o++] = b64_chars[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = b64_chars[v >> 18];
        out[o++] = b64_chars[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64_chars[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    js_free(c, in);
    r = JS_NewStringLen(c, out, o);
    js_free(c, out);
    return r;
}

static int b64_value(uint8_t ch)
{
    const char *q;
    if (!ch)
        return -1;
    q = strchr(b64_chars, ch);
    return q ? (int)(q - b64_chars) : -1;
}

/* atob(s) -> the decoded binary string, or null when s is not valid
   forgiving-base64 (HTML, section 8.3; web.js throws the DOMException). */
static JSValue js_b64_decode(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    size_t n = 0, i, m = 0, o = 0;
    int bad;
    uint8_t *in = latin1(c, argc > 0 ? argv[0] : JS_UNDEFINED, &n, &bad);
    uint32_t acc = 0;
    int bits = 0;
    JSValue r;
    (void)this_val;
    if (!in)
        return bad ? JS_NULL : JS_EXCEPTION;
    for (i = 0; i < n; i++) /* drop ASCII whitespace */
        if (!strchr(" \t\n\f\r", in[i]) || !in[i])
            in[m++] = in[i];
    if (m % 4 == 0 && m > 0 && in[m - 1] == '=') {
        m--;
        if (in[m - 1] == '=')
            m--;
    }
    if (m % 4 == 1)
        goto invalid;
    for (i = 0; i < m; i++) {
        int v = b64_value(in[i]);
        if (v < 0)
            goto invalid;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            in[o++] = (uint8_t)(acc >> bits);
        }
    }
    r = binary_string(c, in, o);
    js_free(c, in);
    return r;
invalid:
    js_free(c, in);
    return JS_NULL;
}

/* now() -> the guest's monotonic clock in milliseconds, with fraction. */
static JSValue js_now(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    struct timespec ts;
    (void)this_val;
    (void)argc;
    (void)argv;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return JS_NewFloat64(c, (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6);
}

/* detach(arrayBuffer): what structuredClone's transfer leaves behind. */
static JSValue js_detach(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    if (argc > 0)
        JS_DetachArrayBuffer(c, argv[0]);
    return JS_UNDEFINED;
}

static const JSCFunctionListEntry web_natives[] = {
    JS_CFUNC_DEF("detach", 1, js_detach),
    JS_CFUNC_DEF("randomFill", 1, js_random_fill),
    JS_CFUNC_DEF("utf8Encode", 1, js_utf8_encode),
    JS_CFUNC_DEF("utf8Decode", 2, js_utf8_decode),
    JS_CFUNC_DEF("btoa", 1, js_b64_encode),
    JS_CFUNC_DEF("atob", 1, js_b64_decode),
    JS_CFUNC_DEF("now", 0, js_now),
};

/* ---- ES modules: files under /workspace ------------------------------------
 * import() (and the static imports of a cell, which the cell rewrite of
 * bootstrap.js turns into import()) resolve a specifier against the
 * importing module's path, or the working directory (WORKSPACE) for a
 * cell: "./x.mjs", "../x.mjs"
 * and "/workspace/x.mjs" name files; anything else (npm packages, node:
 * built-ins) is not there. A query or fragment ("./x.mjs?v=2") is part of
 * the module's identity, not of its path: QuickJS keeps every module it
 * loaded for the interpreter's life, so a changed file is loaded again
 * under a new query. A .json file is a module whose default export is its
 * parsed content. */

/* npm packages and node: built-ins (packages.c, modules.js). */
static int packages_owns(const char *base, const char *name);
static char *packages_normalize(JSContext *c, const char *base, const char *name);
static int packages_loads(const char *name);
static JSModuleDef *packages_load(JSContext *c, const char *name);

static char *module_normalize(JSContext *c, const char *base, const char *name, void *opaque)
{
    size_t blen, nlen;
    const char *slash, *tail;
    char *r;
    (void)opaque;
    if (packages_owns(base, name))
        return packages_normalize(c, base, name);
    if (!strncmp(name, "file://", 7))
        name += 7;
    if (name[0] != '/' && strncmp(name, "./", 2) && strncmp(name, "../", 3) && strcmp(name, ".") && strcmp(name, ".."))
        return js_strdup(c, name); /* bare: the loader says it is not there */
    /* the query or fragment is kept as it is */
    tail = name + strcspn(name, "?#");
    nlen = strlen(name);
    if (name[0] == '/') {
        base = "";
        blen = 0;
    } else if (base[0] == '/') {
        /* the base's directory, ignoring its own query */
        blen = strcspn(base, "?#");
        for (slash = base + blen; slash > base && *slash != '/'; slash--)
            ;
        blen = (size_t)(slash - base);
    } else { /* a cell */
        base = WORKSPACE;
        blen = strlen(WORKSPACE);
    }
    r = js_malloc(c, blen + nlen + 2);
    if (!r)
        return NULL;
    memcpy(r, base, blen);
    r[blen] = '/';
    memcpy(r + blen + 1, name, (size_t)(tail - name));
    r[blen + 1 + (tail - name)] = 0;
    normalize_path(r);
    strcat(r, tail);
    return r;
}

static JSValue throw_module_error(JSContext *c, const char *fmt, const char *name, const char *extra)
{
    char msg[512];
    JSValue e = JS_NewError(c);
    snprintf(msg, sizeof(msg), fmt, name, extra);
    JS_DefinePropertyValueStr(c, e, "message", JS_NewString(c, msg), JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
    return JS_Throw(c, e);
}

static JSModuleDef *module_loader(JSContext *c, const char *name, void *opaque)
{
    char path[1024];
    size_t plen, n = 0;
    char *src;
    JSValue fn, meta;
    JSModuleDef *m;
    const char *dot;
    (void)opaque;
    if (packages_loads(name))
        return packages_load(c, name);
    if (name[0] != '/') {
        throw_module_error(c, "Cannot find package '%s'%s", name,
            ": this sandbox has no npm packages or Node built-in modules; import files under "
            WORKSPACE " by path (\"./lib.mjs\")");
        return NULL;
    }
    plen = strcspn(name, "?#");
    if (plen >= sizeof(path)) {
        throw_module_error(c, "Cannot find module '%s'%s", name, ": path too long");
        return NULL;
    }
    memcpy(path, name, plen);
    path[plen] = 0;
    src = read_file(c, path, &n);
    if (!src) {
        if (JS_HasException(c))
            return NULL;
        throw_module_error(c, "Cannot find module '%s': %s", path, strerror(errno));
        return NULL;
    }
    dot = strrchr(path, '.');
    if (dot && !strcmp(dot, ".json")) {
        /* export default (the JSON text): JSON is a subset of JS expressions */
        static const char head[] = "export default (\n", foot[] = "\n);\n";
        char *js = js_malloc(c, sizeof(head) + n + sizeof(foot));
        if (!js) {
            js_free(c, src);
            return NULL;
        }
        strcpy(js, head);
        memcpy(js + sizeof(head) - 1, src, n);
        strcpy(js + sizeof(head) - 1 + n, foot);
        n += sizeof(head) + sizeof(foot) - 2;
        js_free(c, src);
        src = js;
    }
    fn = JS_Eval(c, src, n, name, JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
    js_free(c, src);
    if (JS_IsException(fn))
        return NULL;
    m = JS_VALUE_GET_PTR(fn);
    meta = JS_GetImportMeta(c, m);
    if (!JS_IsException(meta)) {
        char url[1100];
        const char *slash = strrchr(path, '/');
        snprintf(url, sizeof(url), "file://%s", path);
        JS_DefinePropertyValueStr(c, meta, "url", JS_NewString(c, url), JS_PROP_C_W_E);
        JS_DefinePropertyValueStr(c, meta, "filename", JS_NewString(c, path), JS_PROP_C_W_E);
        JS_DefinePropertyValueStr(c, meta, "dirname",
            JS_NewStringLen(c, path, slash > path ? (size_t)(slash - path) : 1), JS_PROP_C_W_E);
        JS_DefinePropertyValueStr(c, meta, "main", JS_FALSE, JS_PROP_C_W_E);
    }
    JS_FreeValue(c, meta);
    /* the module is referenced by the runtime now */
    JS_FreeValue(c, fn);
    return m;
}

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
        file = read_file(c, path, &n);
        if (!file) {
            JSValue e = JS_HasException(c) ? JS_EXCEPTION : throw_errno(c, "show", path);
            JS_FreeCString(c, path);
            return e;
        }
        JS_FreeCString(c, path);
        p = (const uint8_t *)file;
    } else if ((p = JS_GetArrayBuffer(c, &n, x)) == NULL) {
        JS_FreeValue(c, JS_GetException(c)); /* not an ArrayBuffer: a view? */
        p = bytes_of(c, x, &n);
        if (!p) {
            JS_FreeValue(c, JS_GetException(c));
            return JS_ThrowTypeError(c, "show() takes a path or the bytes of an image (a Uint8Array or an ArrayBuffer)");
        }
    }
    r = host_show(p, (uint32_t)n); /* wasm32: a buffer is below 4 GiB */
    js_free(c, file);
    switch (r) {
    case 0:
        return JS_UNDEFINED;
    case SHOW_NOT_IMAGE:
        return JS_ThrowTypeError(c, "show(): not an image: execd shows PNG, JPEG, GIF and WebP (recognised by their first bytes)");
    case SHOW_UNREADABLE:
        return JS_ThrowTypeError(c, "show(): not an image: " SHOW_UNREADABLE_WHY);
    case SHOW_TOO_LARGE:
        return JS_ThrowRangeError(c, "show(): the image is larger than execd allows (limits.max_image_bytes)");
    default:
        return JS_ThrowRangeError(c, "show(): this result already carries the most images execd allows (limits.max_images)");
    }
}

/* prompt(message): asks the person through the MCP client (sandbox/ABI.md,
   execd.input): the answer, whole, or null when they decline or dismiss it. */
static JSValue js_prompt(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *msg = NULL;
    size_t n = 0;
    char small[INPUT_FIRST_BUF], *buf = small;
    int32_t r;
    JSValue ret;
    (void)this_val;
    if (argc > 0 && !JS_IsUndefined(argv[0])) {
        msg = JS_ToCStringLen(c, &n, argv[0]);
        if (!msg)
            return JS_EXCEPTION;
    }
    r = host_input(msg ? msg : "", (uint32_t)utf8_cut(msg ? msg : "", n, MAX_PROMPT), small, sizeof(small));
    if (msg)
        JS_FreeCString(c, msg);
    if (r > (int32_t)sizeof(small)) { /* the host holds it */
        buf = js_malloc(c, (size_t)r);
        if (!buf)
            return JS_EXCEPTION;
        if (host_input_answer(buf, (uint32_t)r) != r) {
            js_free(c, buf);
            return JS_ThrowInternalError(c, "prompt(): the answer was lost");
        }
    }
    if (r >= 0)
        ret = JS_NewStringLen(c, buf, (size_t)r);
    else if (r == INPUT_EOF)
        ret = JS_NULL;
    else if (r == INPUT_NO_CLIENT)
        ret = JS_ThrowInternalError(c, "prompt(): nobody can answer: the MCP client cannot be asked (it declared no elicitation capability)");
    else if (r == INPUT_TIMED_OUT)
        ret = JS_ThrowInternalError(c, "prompt(): nobody answered within the time execd waits for an answer (protocol.input_timeout)");
    else if (r == INPUT_TOO_LONG)
        ret = JS_ThrowRangeError(c, "prompt(): the answer is longer than execd takes (limits.max_input_answer_bytes)");
    else { /* the host stops the cell: its interrupt, uncatchable */
        JSValue e;
        interrupt_fired = 1;
        e = interrupted_error();
        JS_SetUncatchableError(c, e, 1);
        ret = JS_Throw(c, e);
    }
    if (buf != small)
        js_free(c, buf);
    return ret;
}

static void rejection_tracker(JSContext *c, JSValueConst promise, JSValueConst reason,
                              JS_BOOL is_handled, void *opaque);

/* ---- fetch.js's natives and the network's turn of the event loop ------- */
static JSValue call_helper(const char *name);
#include "net.c"
#include "tools.c"
#include "packages.c"

/* ---- bootstrap ----------------------------------------------------------- */

/* bootstrap.js, web.js and intl.js, made into C strings by build.sh. */
#include "bootstrap.h"
#include "web.h"
#include "intl.h"
#include "fetch.h"
#include "tools.h"
#include "modules.h"

/* run_init_script(src, args): evaluates src (a function expression) and
   calls it with args; returns its result or JS_EXCEPTION. */
static JSValue run_init_script(const char *src, size_t len, const char *name, int argc, JSValueConst *argv)
{
    JSValue fn = JS_Eval(ctx, src, len, name, JS_EVAL_TYPE_GLOBAL), r;
    if (JS_IsException(fn))
        return fn;
    r = JS_Call(ctx, fn, JS_UNDEFINED, argc, argv);
    JS_FreeValue(ctx, fn);
    return r;
}

/* run_with_natives runs an init script that gets, as its first argument, a
   fresh object with the natives of list (and of more, when n_more > 0);
   args[1] and args[2] are the caller's. */
static JSValue run_with_natives(const char *src, size_t len, const char *name, JSValue *args,
                                const JSCFunctionListEntry *list, int n,
                                const JSCFunctionListEntry *more, int n_more)
{
    JSValue natives = JS_NewObject(ctx), r;
    JS_SetPropertyFunctionList(ctx, natives, list, n);
    if (n_more > 0)
        JS_SetPropertyFunctionList(ctx, natives, more, n_more);
    args[0] = natives;
    r = run_init_script(src, len, name, 3, args);
    JS_FreeValue(ctx, natives);
    return r;
}
#define NATIVES(list) list, (int)(sizeof(list) / sizeof((list)[0]))

static void print_init_error(const char *what)
{
    JSValue e = JS_GetException(ctx);
    const char *s = JS_ToCString(ctx, e);
    fprintf(stderr, "execd: %s: %s\n", what, s ? s : "?");
    if (s)
        JS_FreeCString(ctx, s);
    JS_FreeValue(ctx, e);
}

static int setup_globals(void)
{
    JSValue global, args[3], fs, natives, r;
    int ret = -1;

    global = JS_GetGlobalObject(ctx);
    JS_SetPropertyStr(ctx, global, "progress",
                      JS_NewCFunction(ctx, js_progress, "progress", 3));
    JS_SetPropertyStr(ctx, global, "show", JS_NewCFunction(ctx, js_show, "show", 1));
    JS_SetPropertyStr(ctx, global, "prompt", JS_NewCFunction(ctx, js_prompt, "prompt", 1));
    fs = JS_NewObject(ctx);
    JS_SetPropertyFunctionList(ctx, fs, fs_funcs, sizeof(fs_funcs) / sizeof(fs_funcs[0]));
    JS_SetPropertyStr(ctx, global, "fs", fs);

    args[0] = JS_NewCFunction(ctx, js_write, "write", 2);
    args[1] = global;
    {
        /* loop_counts, as the Int32Array helpers.counts (never freed: static) */
        JSValue view[3]; /* buffer, byte offset, length: JS_NewTypedArray reads all three */
        view[0] = JS_NewArrayBuffer(ctx, (uint8_t *)loop_counts, sizeof(loop_counts), NULL, NULL, 0);
        view[1] = JS_NewInt32(ctx, 0);
        view[2] = JS_NewInt32(ctx, N_COUNTS);
        args[2] = JS_IsException(view[0]) ? view[0] : JS_NewTypedArray(ctx, 3, view, JS_TYPED_ARRAY_INT32);
        JS_FreeValue(ctx, view[0]);
    }
    if (JS_IsException(args[2])) {
        JS_FreeValue(ctx, args[0]);
        print_init_error("helpers.counts");
        goto done;
    }
    helpers = run_init_script(bootstrap_js, sizeof(bootstrap_js) - 1, "<execd>", 3, args);
    JS_FreeValue(ctx, args[0]);
    JS_FreeValue(ctx, args[2]);
    if (JS_IsException(helpers)) {
        print_init_error("bootstrap.js");
        goto done;
    }
    atom_cell = JS_NewAtom(ctx, "<cell>");
    /* web.js and intl.js get the natives, the global object and the
       helpers (to register how their objects print). */
    natives = JS_NewObject(ctx);
    JS_SetPropertyFunctionList(ctx, natives, web_natives, sizeof(web_natives) / sizeof(web_natives[0]));
    args[0] = natives;
    args[2] = helpers;
    r = run_init_script(web_js, sizeof(web_js) - 1, "<execd:web>", 3, args);
    if (!JS_IsException(r)) {
        JS_FreeValue(ctx, r);
        r = run_init_script(intl_js, sizeof(intl_js) - 1, "<execd:intl>", 3, args);
    }
    JS_FreeValue(ctx, natives);
    if (JS_IsException(r)) {
        print_init_error("web.js/intl.js");
        goto done;
    }
    JS_FreeValue(ctx, r);
    /* fetch.js gets net.c's natives */
    r = run_with_natives(fetch_js, sizeof(fetch_js) - 1, "<execd:fetch>", args, NATIVES(net_natives), NULL, 0);
    if (JS_IsException(r)) {
        print_init_error("fetch.js");
        goto done;
    }
    JS_FreeValue(ctx, r);
    /* tools.js (code mode) gets tools.c's natives and net.c's */
    r = run_with_natives(tools_js, sizeof(tools_js) - 1, "<execd:tools>", args, NATIVES(net_natives),
                         NATIVES(tool_natives));
    if (JS_IsException(r)) {
        print_init_error("tools.js");
        goto done;
    }
    JS_FreeValue(ctx, r);
    /* modules.js gets packages.c's natives */
    modules = run_with_natives(modules_js, sizeof(modules_js) - 1, "<execd:modules>", args,
                               NATIVES(pkg_natives), NULL, 0);
    if (JS_IsException(modules)) {
        print_init_error("modules.js");
        goto done;
    }
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
    JS_SetModuleLoaderFunc(rt, module_normalize, module_loader, NULL);
    ctx = JS_NewContext(rt);
    if (!ctx)
        return -3;
    if (seed_random())
        return -5;
    if (setup_globals())
        return -4;
    /* Every instance mounts WORKSPACE (an empty, read-only one when the
       worker has none), so this holds; the cwd is in linear memory, and so
       in every image made from this instance. */
    if (chdir(WORKSPACE) != 0)
        return -6;
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

/* ---- eval ---------------------------------------------------------------- */

/* rewrite_imports(code, &len): code (from execd_alloc) with its top-level
   import declarations rewritten by helpers.rewriteImports, in a new
   malloc'd buffer (code is freed), or code itself when nothing changed or
   the rewrite failed (then the cell's own syntax error says why). */
static char *rewrite_imports(char *code, uint32_t *len)
{
    JSValue fn, src, r;
    const char *s;
    size_t n;
    char *out;
    src = JS_NewStringLen(ctx, code, *len);
    if (JS_IsException(src)) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        return code;
    }
    fn = JS_GetPropertyStr(ctx, helpers, "rewriteImports");
    r = JS_Call(ctx, fn, JS_UNDEFINED, 1, (JSValueConst *)&src);
    JS_FreeValue(ctx, fn);
    JS_FreeValue(ctx, src);
    if (JS_IsException(r) || !JS_IsString(r)) {
        if (JS_IsException(r))
            JS_FreeValue(ctx, JS_GetException(ctx));
        JS_FreeValue(ctx, r);
        return code;
    }
    s = JS_ToCStringLen(ctx, &n, r);
    JS_FreeValue(ctx, r);
    if (!s) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        return code;
    }
    out = malloc(n + 1);
    if (out) {
        memcpy(out, s, n + 1);
        free(code);
        code = out;
        *len = (uint32_t)n;
    }
    JS_FreeCString(ctx, s);
    return code;
}

/* cstr_of: printable text of v via helpers.inspect, falling back to
   ToString; the caller frees with JS_FreeCString. NULL if all fails. */
/* int_digits(v, buf, n): v in decimal, as inspect prints an int, in buf
   (12 bytes); returns buf. */
static const char *int_digits(int32_t v, char *buf, size_t *n)
{
    char tmp[11];
    uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
    size_t k = 0, i = 0;
    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        buf[i++] = '-';
    while (k)
        buf[i++] = tmp[--k];
    buf[i] = 0;
    *n = i;
    return buf;
}

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
   until each is due) and requests in flight (waiting in net_wait for one
   to finish or the next timer), until there is nothing left. On an uncaught exception
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
            JSValue v;
            int32_t pending = loop_counts[COUNT_TIMERS];
            /* fetches and tool calls wait in net_wait alike */
            int32_t net_pending = loop_counts[COUNT_FETCHES] + loop_counts[COUNT_TOOLS];
            if (net_pending > 0) {
                int n = net_step(exc);
                if (n < 0)
                    return -1;
                if (n > 0)
                    continue;
                v = call_helper("runTimer"); /* the next timer is due (or none is) */
                if (JS_IsException(v)) {
                    *exc = JS_GetException(ctx);
                    return -1;
                }
                JS_FreeValue(ctx, v);
                continue;
            }
            if (pending <= 0) {
                /* done: unref'd timers (AbortSignal.timeout) go with the cell */
                if (loop_counts[COUNT_UNREFD] > 0)
                    JS_FreeValue(ctx, call_helper("dropUnrefd"));
                return 0;
            }
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
    char int_text[12]; /* an int value's digits: shown without a JS string */

    free(result_buf);
    result_buf = NULL;
    interrupt_fired = 0;
    envelope_start(&b);

    if (!rt) {
        free(code);
        buf_puts(&b, "{\"status\":\"error\",\"error\":{\"type\":\"InternalError\",\"message\":\"guest not initialised\"}}");
        return result_buf = envelope_finish(&b, oom_envelope);
    }
    JS_UpdateStackTop(rt);
    reset_limit(mstate);
    polling = 1;
    code[len] = 0;
    /* Static imports become import() (bootstrap.js, rewriteImports): only
       a cell that mentions import pays for the look. */
    if (memmem(code, len, "import", 6))
        code = rewrite_imports(code, &len);
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
        if (JS_VALUE_GET_TAG(val) == JS_TAG_INT)
            shown = int_digits(JS_VALUE_GET_INT(val), int_text, &shown_len);
        else
            shown = inspect(val, &shown_len);
        if (interrupt_fired) {
            if (shown && shown != int_text)
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
        /* ... and no fetch: the host forgets the run's requests at its end */
        JS_FreeValue(ctx, call_helper("netClear"));
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
    if (shown && shown != int_text)
        JS_FreeCString(ctx, shown);
    JS_FreeValue(ctx, exc);
    JS_FreeValue(ctx, val);
    if (failed && !strcmp(status, "oom"))
        JS_RunGC(rt);
    return result_buf = envelope_finish(&b, oom_envelope);
}
