/*
 * execd JavaScript guest: npm packages and Node's small built-ins, the C
 * side of modules.js. Included by guest.c (one translation unit) after
 * read_file, throw_stop and the module loader's helpers are declared.
 *
 * The module loader of guest.c hands modules.js what is its: a bare
 * specifier ("dayjs", "npm:zod@3", "node:path"), or any specifier imported
 * from a file under PACKAGES, goes to modules.resolve; a module named
 * "node:..." or a file under PACKAGES is compiled from the text
 * modules.source gives. The natives below are modules.js's way to the
 * host (execd.packages of sandbox/ABI.md) and to the read-only package
 * cache mounted at PACKAGES.
 */

#define PACKAGES "/packages"

static JSValue modules; /* the object modules.js returned: resolve, source */

/* call(request) -> the host's answer to a JSON request (execd.packages). */
static JSValue js_pkg_call(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *req;
    size_t rn;
    int32_t n;
    char small[4096], *buf = small;
    JSValue s;
    (void)this_val;
    if (argc < 1)
        return JS_ThrowTypeError(c, "packages: no request");
    req = JS_ToCStringLen(c, &rn, argv[0]);
    if (!req)
        return JS_EXCEPTION;
    n = host_packages(req, (uint32_t)rn, small, sizeof(small));
    JS_FreeCString(c, req);
    if (n == -4)
        return throw_stop(c);
    if (n < 0)
        return JS_ThrowInternalError(c, "packages: the host gave no answer (%d)", (int)n);
    if ((size_t)n > sizeof(small)) {
        buf = js_malloc(c, (size_t)n);
        if (!buf)
            return JS_EXCEPTION;
        if (host_packages_answer(buf, (uint32_t)n) != n) {
            js_free(c, buf);
            return JS_ThrowInternalError(c, "packages: the host's answer was lost");
        }
    }
    s = JS_NewStringLen(c, buf, (size_t)n);
    if (buf != small)
        js_free(c, buf);
    return s;
}

/* read(path) -> the file's text (UTF-8), or null when there is none. */
static JSValue js_pkg_read(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *path;
    char *src;
    size_t n = 0;
    JSValue s;
    (void)this_val;
    if (argc < 1)
        return JS_NULL;
    path = JS_ToCString(c, argv[0]);
    if (!path)
        return JS_EXCEPTION;
    src = read_file(c, path, &n);
    JS_FreeCString(c, path);
    if (!src)
        return JS_HasException(c) ? JS_EXCEPTION : JS_NULL;
    s = JS_NewStringLen(c, src, n);
    js_free(c, src);
    return s;
}

/* kind(path) -> 1 a regular file, 2 a directory, 0 neither (or none). */
static JSValue js_pkg_kind(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *path;
    struct stat st;
    int k = 0;
    (void)this_val;
    if (argc < 1)
        return JS_NewInt32(c, 0);
    path = JS_ToCString(c, argv[0]);
    if (!path)
        return JS_EXCEPTION;
    if (stat(path, &st) == 0)
        k = S_ISREG(st.st_mode) ? 1 : S_ISDIR(st.st_mode) ? 2 : 0;
    JS_FreeCString(c, path);
    return JS_NewInt32(c, k);
}

/* compile(source, filename) -> the value of the script source, compiled
   and run under filename (a CommonJS module's wrapper function). */
static JSValue js_pkg_compile(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *src, *name;
    size_t n;
    JSValue r;
    (void)this_val;
    if (argc < 2)
        return JS_ThrowTypeError(c, "compile: source and filename");
    src = JS_ToCStringLen(c, &n, argv[0]);
    if (!src)
        return JS_EXCEPTION;
    name = JS_ToCString(c, argv[1]);
    if (!name) {
        JS_FreeCString(c, src);
        return JS_EXCEPTION;
    }
    r = JS_Eval(c, src, n, name, JS_EVAL_TYPE_GLOBAL);
    JS_FreeCString(c, src);
    JS_FreeCString(c, name);
    return r;
}

static const JSCFunctionListEntry pkg_natives[] = {
    JS_CFUNC_DEF("call", 1, js_pkg_call),
    JS_CFUNC_DEF("read", 1, js_pkg_read),
    JS_CFUNC_DEF("kind", 1, js_pkg_kind),
    JS_CFUNC_DEF("compile", 2, js_pkg_compile),
};

/* packages_owns(base, name): whether modules.js resolves name imported
   from base: a bare specifier (not a path, not file://), or anything
   imported from a file under PACKAGES. */
static int packages_owns(const char *base, const char *name)
{
    if (!strncmp(base, PACKAGES "/", sizeof(PACKAGES)))
        return 1;
    if (!strncmp(name, "file://", 7))
        return 0;
    return name[0] != '/' && strncmp(name, "./", 2) && strncmp(name, "../", 3) && strcmp(name, ".") &&
           strcmp(name, "..");
}

/* packages_normalize: modules.resolve(name, base), from js_malloc; NULL
   with the exception pending when it threw. */
static char *packages_normalize(JSContext *c, const char *base, const char *name)
{
    JSValue fn, args[2], r;
    const char *s;
    char *out = NULL;
    fn = JS_GetPropertyStr(c, modules, "resolve");
    args[0] = JS_NewString(c, name);
    args[1] = JS_NewString(c, base);
    r = JS_Call(c, fn, JS_UNDEFINED, 2, args);
    JS_FreeValue(c, args[0]);
    JS_FreeValue(c, args[1]);
    JS_FreeValue(c, fn);
    if (JS_IsException(r))
        return NULL;
    s = JS_ToCString(c, r);
    JS_FreeValue(c, r);
    if (!s)
        return NULL;
    out = js_strdup(c, s);
    JS_FreeCString(c, s);
    return out;
}

/* packages_loads(name): whether the module name is modules.js's to give. */
static int packages_loads(const char *name)
{
    return !strncmp(name, "node:", 5) || !strncmp(name, PACKAGES "/", sizeof(PACKAGES));
}

/* packages_load: the module compiled from modules.source(name), with
   import.meta.url and filename for a file; NULL with the exception
   pending. */
static JSModuleDef *packages_load(JSContext *c, const char *name)
{
    JSValue fn, arg, r, meta;
    const char *src;
    size_t n;
    JSModuleDef *m;
    fn = JS_GetPropertyStr(c, modules, "source");
    arg = JS_NewString(c, name);
    r = JS_Call(c, fn, JS_UNDEFINED, 1, &arg);
    JS_FreeValue(c, arg);
    JS_FreeValue(c, fn);
    if (JS_IsException(r))
        return NULL;
    src = JS_ToCStringLen(c, &n, r);
    JS_FreeValue(c, r);
    if (!src)
        return NULL;
    fn = JS_Eval(c, src, n, name, JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
    JS_FreeCString(c, src);
    if (JS_IsException(fn))
        return NULL;
    m = JS_VALUE_GET_PTR(fn);
    if (name[0] == '/') {
        meta = JS_GetImportMeta(c, m);
        if (!JS_IsException(meta)) {
            char url[1100];
            snprintf(url, sizeof(url), "file://%s", name);
            JS_DefinePropertyValueStr(c, meta, "url", JS_NewString(c, url), JS_PROP_C_W_E);
            JS_DefinePropertyValueStr(c, meta, "filename", JS_NewString(c, name), JS_PROP_C_W_E);
            JS_DefinePropertyValueStr(c, meta, "main", JS_FALSE, JS_PROP_C_W_E);
        }
        JS_FreeValue(c, meta);
    }
    JS_FreeValue(c, fn);
    return m;
}
