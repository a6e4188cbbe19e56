/*
 * The guest's side of sandbox/ABI.md that every guest shares: the
 * attributes of exports and imports, the host imports of module "execd",
 * the buffers the host hands code in (execd_alloc, execd_free) and the
 * result envelope execd_eval hands back (a growable byte buffer and a JSON
 * string escaper). Included once by each guest's main file
 * (quickjs/guest.c, python/glue.c); both build scripts put this directory
 * in their cache keys, so a change here rebuilds both guests.
 */
#ifndef EXECD_ABI_H
#define EXECD_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(name)))
#define IMPORT(name) __attribute__((import_module("execd"), import_name(name)))

/* ---- host imports (module "execd") -------------------------------------- */

IMPORT("progress") void host_progress(double done, double total, const char *msg, uint32_t msg_len);
IMPORT("interrupted") int32_t host_interrupted(void);
IMPORT("show") int32_t host_show(const void *data, uint32_t len);
IMPORT("input") int32_t host_input(const char *prompt, uint32_t prompt_len, char *buf, uint32_t cap);
IMPORT("input_answer") int32_t host_input_answer(char *buf, uint32_t cap);
IMPORT("net_start") int32_t host_net_start(const char *head, uint32_t head_len, const void *body, uint32_t body_len);
IMPORT("net_wait") int32_t host_net_wait(int32_t id, double timeout_ms);
IMPORT("net_head") int32_t host_net_head(int32_t id, char *buf, uint32_t cap);
IMPORT("net_body") int32_t host_net_body(int32_t id, void *buf, uint32_t cap);
IMPORT("net_close") int32_t host_net_close(int32_t id);
IMPORT("net_env") int32_t host_net_env(char *buf, uint32_t cap);
IMPORT("tool_call") int32_t host_tool_call(const char *req, uint32_t req_len);
IMPORT("packages") int32_t host_packages(const char *req, uint32_t req_len, char *buf, uint32_t cap);
IMPORT("packages_answer") int32_t host_packages_answer(char *buf, uint32_t cap);

/* What show and input answer besides success (sandbox/ABI.md). */
enum {
    SHOW_NOT_IMAGE = -1,  /* not PNG, JPEG, GIF or WebP */
    SHOW_TOO_LARGE = -2,  /* over limits.max_image_bytes */
    SHOW_TOO_MANY = -3,   /* the cell already showed limits.max_images */
    SHOW_UNREADABLE = -4, /* one of their signatures, but its header does not decode */
};
/* Both guests' words for SHOW_UNREADABLE. */
#define SHOW_UNREADABLE_WHY \
    "it starts like PNG, JPEG, GIF or WebP but its header does not decode to a width and height (a damaged or cut file?)"
enum {
    INPUT_EOF = -1,       /* the person declined or dismissed the question */
    INPUT_NO_CLIENT = -2, /* nobody can be asked */
    INPUT_TIMED_OUT = -3, /* nobody answered within protocol.input_timeout */
    INPUT_STOPPED = -4,   /* the host stops the cell: raise the interrupt */
    INPUT_TOO_LONG = -5,  /* the answer is over limits.max_input_answer_bytes */
};

/* The buffer a guest first hands execd.input; a longer answer is fetched
   with execd.input_answer into one of its length. */
#define INPUT_FIRST_BUF 4096

/* The most of a progress message and of a prompt the host reads; the
   longest printable value a guest hands back (the host truncates further). */
#define MAX_PROGRESS_MESSAGE 4096
#define MAX_PROMPT (16 << 10)
#define MAX_VALUE_BYTES (1 << 20)

/* ---- buffers the host writes code into ------------------------------------ */

/* execd_alloc(n): a buffer of n bytes plus one spare byte the guest may use
   for a terminating NUL. 0 when memory is exhausted. */
EXPORT("execd_alloc") void *execd_alloc(uint32_t n)
{
    char *p = malloc((size_t)n + 1);
    if (p)
        p[n] = 0;
    return p;
}

/* execd_free(p): frees a buffer from execd_alloc never handed to execd_eval. */
EXPORT("execd_free") void execd_free(void *p) { free(p); }

/* ---- text ------------------------------------------------------------------ */

/* utf8_cut(s, n, max): the length of s[0:n] cut to at most max bytes
   without splitting a UTF-8 sequence. */
static inline size_t utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return n;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* ---- the result envelope ------------------------------------------------- */

/* A growable byte buffer on plain malloc, outside the interpreter's heap
   cap (the envelope of an out-of-memory cell must still be built). A
   failed growth sets failed, and every later write is dropped. */
typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} buf_t;

static inline void buf_put(buf_t *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *p;
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
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static inline void buf_puts(buf_t *b, const char *s) { buf_put(b, s, strlen(s)); }

/* buf_json(b, s, n): the JSON string literal of the UTF-8 s[0:n]. Bytes
   from 0x80 up pass through unchanged (QuickJS's lone surrogates, as
   JS_ToCStringLen encodes them, included); the host's decoder replaces
   what is not UTF-8. */
static inline void buf_json(buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i, start = 0;
    buf_put(b, "\"", 1);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc;
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

/* envelope_start(b): room for the u32 length the envelope starts with. */
static inline void envelope_start(buf_t *b) { buf_put(b, "\0\0\0\0", 4); }

/* envelope_finish(b, oom_json): the envelope of b (started by
   envelope_start) with its length written in, or, when b ran out of
   memory, the envelope oom_json; NULL only when not even that fits. The
   caller frees the result at the next cell. */
static inline char *envelope_finish(buf_t *b, const char *oom_json)
{
    uint32_t n;
    if (b->failed) {
        size_t len = strlen(oom_json);
        free(b->p);
        b->p = malloc(4 + len);
        if (!b->p)
            return NULL;
        n = (uint32_t)len;
        memcpy(b->p + 4, oom_json, len);
    } else {
        n = (uint32_t)(b->len - 4);
    }
    memcpy(b->p, &n, 4); /* wasm32 is little-endian */
    return b->p;
}

#endif
