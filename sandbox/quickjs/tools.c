/*
 * execd JavaScript guest: the natives of tools.js (code mode: calls of the
 * tools of the operator's upstream MCP servers), over execd.tool_call of
 * sandbox/ABI.md. Included by guest.c after net.c: a call is one more
 * entry of the run's network table, so its answer is read with net.c's
 * netHead and netBody and forgotten with netClose, and guest.c's event
 * loop waits for calls and fetches alike (helpers.netDone).
 */

/* toolCall(request) -> id (> 0). request is the JSON of sandbox/ABI.md's
   tool_call. The host's stop is the interrupt. */
static JSValue js_tool_call(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *req;
    size_t n;
    int32_t r;
    (void)this_val;
    if (argc < 1)
        return JS_ThrowTypeError(c, "toolCall: no request");
    req = JS_ToCStringLen(c, &n, argv[0]);
    if (!req)
        return JS_EXCEPTION;
    r = host_tool_call(req, (uint32_t)n);
    JS_FreeCString(c, req);
    if (r == -4)
        return throw_stop(c);
    return JS_NewInt32(c, r);
}

/* netWait(id) -> id once the call or request id has finished (blocks the
   cell: tools.list()), or -1 when there is no such id. The host's stop is
   the interrupt. */
static JSValue js_net_wait_one(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    int32_t id, r;
    (void)this_val;
    if (argc < 1 || JS_ToInt32(c, &id, argv[0]))
        return JS_EXCEPTION;
    r = host_net_wait(id, -1);
    if (r == -4)
        return throw_stop(c);
    return JS_NewInt32(c, r);
}

static const JSCFunctionListEntry tool_natives[] = {
    JS_CFUNC_DEF("toolCall", 1, js_tool_call),
    JS_CFUNC_DEF("netWait", 1, js_net_wait_one),
};
