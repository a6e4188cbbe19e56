/*
 * execd JavaScript guest: the natives of fetch.js, over the net_* imports
 * of sandbox/ABI.md. Included by guest.c (one translation unit: it uses the
 * interrupt state and the helpers object), after bytes_of and
 * interrupted_error are declared.
 *
 * A request lives on the host from net_start to net_close; the guest holds
 * only its id. fetch.js keeps the promise of each id; the event loop of
 * guest.c (run_loop) waits in net_wait for "a request finished or the next
 * timer is due" and hands each finished id to helpers.netDone. The
 * imports are declared in sandbox/abi/execd.h.
 */

/* The interrupt, as prompt() throws it when the host stops the cell. */
static JSValue throw_stop(JSContext *c)
{
    JSValue e;
    interrupt_fired = 1;
    e = interrupted_error();
    JS_SetUncatchableError(c, e, 1);
    return JS_Throw(c, e);
}

/* netStart(head, body?) -> id (> 0), or -2 when too many requests are
   open. head is the request's JSON head (sandbox/ABI.md, net_start); body
   a Uint8Array or undefined. The host's stop is the interrupt. */
static JSValue js_net_start(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *head;
    size_t hn, bn = 0;
    const uint8_t *body = NULL;
    int32_t r;
    (void)this_val;
    if (argc < 1)
        return JS_ThrowTypeError(c, "netStart: no request");
    head = JS_ToCStringLen(c, &hn, argv[0]);
    if (!head)
        return JS_EXCEPTION;
    if (argc > 1 && !JS_IsUndefined(argv[1])) {
        body = bytes_of(c, argv[1], &bn);
        if (!body) {
            JS_FreeCString(c, head);
            return JS_EXCEPTION;
        }
    }
    r = host_net_start(head, (uint32_t)hn, body, (uint32_t)bn);
    JS_FreeCString(c, head);
    if (r == -4)
        return throw_stop(c);
    return JS_NewInt32(c, r);
}

/* netHead(id) -> the JSON head of a finished request, or null. */
static JSValue js_net_head(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    int32_t id, n;
    char small[1024], *buf = small;
    JSValue s;
    (void)this_val;
    if (argc < 1 || JS_ToInt32(c, &id, argv[0]))
        return JS_EXCEPTION;
    n = host_net_head(id, small, sizeof(small));
    if (n < 0)
        return JS_NULL;
    if ((size_t)n > sizeof(small)) {
        buf = js_malloc(c, (size_t)n);
        if (!buf)
            return JS_EXCEPTION;
        if (host_net_head(id, buf, (uint32_t)n) != n) {
            js_free(c, buf);
            return JS_NULL;
        }
    }
    s = JS_NewStringLen(c, buf, (size_t)n);
    if (buf != small)
        js_free(c, buf);
    return s;
}

/* netBody(id, length) -> an ArrayBuffer with the request's body. */
static JSValue js_net_body(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    int32_t id, len, got = 0, r;
    uint8_t *p;
    size_t size;
    JSValue ab;
    (void)this_val;
    if (argc < 2 || JS_ToInt32(c, &id, argv[0]) || JS_ToInt32(c, &len, argv[1]))
        return JS_EXCEPTION;
    if (len < 0)
        return JS_ThrowRangeError(c, "netBody: bad length");
    ab = JS_NewArrayBufferCopy(c, NULL, (size_t)len);
    if (JS_IsException(ab))
        return ab;
    p = JS_GetArrayBuffer(c, &size, ab);
    if (!p && len > 0) {
        JS_FreeValue(c, ab);
        return JS_EXCEPTION;
    }
    while (got < len) {
        r = host_net_body(id, p + got, (uint32_t)(len - got));
        if (r <= 0)
            break;
        got += r;
    }
    if (got != len) {
        JS_FreeValue(c, ab);
        return JS_ThrowTypeError(c, "fetch: the response's body was lost");
    }
    return ab;
}

/* netClose(id): aborts the request if it is in flight and forgets it. */
static JSValue js_net_close(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    int32_t id;
    (void)this_val;
    if (argc < 1 || JS_ToInt32(c, &id, argv[0]))
        return JS_EXCEPTION;
    host_net_close(id);
    return JS_UNDEFINED;
}

/* netEnv() -> the JSON object of the run's secrets (name: placeholder),
   or "" when there are none. */
static JSValue js_net_env(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    char small[512], *buf = small;
    int32_t n;
    JSValue s;
    (void)this_val;
    (void)argc;
    (void)argv;
    n = host_net_env(small, sizeof(small));
    if (n <= 0)
        return JS_NewString(c, "");
    if ((size_t)n > sizeof(small)) {
        buf = js_malloc(c, (size_t)n);
        if (!buf)
            return JS_EXCEPTION;
        if (host_net_env(buf, (uint32_t)n) != n) {
            js_free(c, buf);
            return JS_NewString(c, "");
        }
    }
    s = JS_NewStringLen(c, buf, (size_t)n);
    if (buf != small)
        js_free(c, buf);
    return s;
}

static const JSCFunctionListEntry net_natives[] = {
    JS_CFUNC_DEF("netStart", 2, js_net_start),
    JS_CFUNC_DEF("netHead", 1, js_net_head),
    JS_CFUNC_DEF("netBody", 2, js_net_body),
    JS_CFUNC_DEF("netClose", 1, js_net_close),
    JS_CFUNC_DEF("netEnv", 0, js_net_env),
};

/* net_step(exc): one turn of the event loop while requests are open:
   waits until one finishes (then hands it to helpers.netDone) or until the
   next timer is due, unref'd ones included (returns 0: the loop runs it).
   Returns 1 after a request was handed over, 0 to go on, -1 with *exc set
   when the host stops the cell or netDone threw. */
static int net_step(JSValue *exc)
{
    double wait = -1;
    int32_t r;
    JSValue v = call_helper("nextTimer");
    if (JS_IsException(v)) {
        *exc = JS_GetException(ctx);
        return -1;
    }
    if (JS_ToFloat64(ctx, &wait, v) || wait < 0)
        wait = -1;
    r = host_net_wait(0, wait);
    if (r == -4) {
        interrupt_fired = 1;
        *exc = interrupted_error();
        return -1;
    }
    if (r > 0) {
        JSValue fn = JS_GetPropertyStr(ctx, helpers, "netDone"), arg = JS_NewInt32(ctx, r), v;
        v = JS_Call(ctx, fn, JS_UNDEFINED, 1, &arg);
        JS_FreeValue(ctx, fn);
        if (JS_IsException(v)) {
            *exc = JS_GetException(ctx);
            return -1;
        }
        JS_FreeValue(ctx, v);
        return 1;
    }
    if (r == -1) /* the host holds none: fetch.js forgets its own */
        JS_FreeValue(ctx, call_helper("netClear"));
    return 0;
}
