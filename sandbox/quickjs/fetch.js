// Evaluated once by guest.c at init, after web.js: fetch and what goes with
// it (the Fetch Standard's fetch, Headers, Request, Response; the DOM
// Standard's Event, EventTarget, AbortController, AbortSignal), and
// execd.env, the secrets as the code sees them (placeholders). It gets the
// natives of net.c, the global object and bootstrap.js's helpers; like
// web.js it runs on intrinsics captured now.
//
// A request goes to the host whole (net.c's netStart: the execd.net_*
// imports of sandbox/ABI.md), where the operator's policy decides; the
// response comes back whole when guest.c's event loop sees it finished
// (helpers.netDone). Several fetches are in flight at once on the host
// while the cell goes on. Nothing is streamed: Response.body is not there.
(function (native, global, helpers) {
  "use strict";
  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const O = Object, Str = String;
  const defineProperty = O.defineProperty, keysOf = O.keys, freeze = O.freeze;
  const descriptorOf = O.getOwnPropertyDescriptor, protoOf = O.getPrototypeOf, create = O.create;
  const getter = (o, k) => uncurry(descriptorOf(o, k).get);
  const TypeErr = TypeError, RangeErr = RangeError;
  const isProtoOf = uncurry(O.prototype.isPrototypeOf);
  const strSlice = uncurry(Str.prototype.slice), toLower = uncurry(Str.prototype.toLowerCase);
  const toUpper = uncurry(Str.prototype.toUpperCase), charCodeAt = uncurry(Str.prototype.charCodeAt);
  const jsonParse = JSON.parse, jsonStringify = JSON.stringify;
  const isArray = Array.isArray, arraySort = uncurry(Array.prototype.sort);
  const iteratorSym = Symbol.iterator, tagSym = Symbol.toStringTag;
  const AB = ArrayBuffer, U8 = Uint8Array, isView = AB.isView;
  const abByteLength = getter(AB.prototype, "byteLength"), abSlice = uncurry(AB.prototype.slice);
  const TypedArrayProto = protoOf(U8.prototype);
  const typedBuffer = getter(TypedArrayProto, "buffer"), typedOffset = getter(TypedArrayProto, "byteOffset");
  const typedByteLength = getter(TypedArrayProto, "byteLength"), typedTag = getter(TypedArrayProto, tagSym);
  const typedSlice = uncurry(TypedArrayProto.slice);
  const dvBuffer = getter(DataView.prototype, "buffer"), dvOffset = getter(DataView.prototype, "byteOffset");
  const dvByteLength = getter(DataView.prototype, "byteLength");
  const promiseThen = uncurry(Promise.prototype.then);
  const PromiseCtor = Promise, promiseReject = Promise.reject.bind(Promise), promiseResolve = Promise.resolve.bind(Promise);
  const MapCtor = Map, mapGet = uncurry(Map.prototype.get), mapSet = uncurry(Map.prototype.set);
  const mapDelete = uncurry(Map.prototype.delete), mapClear = uncurry(Map.prototype.clear);
  const mapSize = getter(Map.prototype, "size");
  const WM = WeakMap, wmGet = uncurry(WeakMap.prototype.get), wmSet = uncurry(WeakMap.prototype.set);
  const wmHas = uncurry(WeakMap.prototype.has);
  const reflectApply = Reflect.apply;
  const DOMExc = global.DOMException, URLCtor = global.URL, USP = global.URLSearchParams;
  const urlHref = getter(URLCtor.prototype, "href"), urlUser = getter(URLCtor.prototype, "username");
  const urlPass = getter(URLCtor.prototype, "password");
  const uspToString = uncurry(USP.prototype.toString);
  const encoder = new global.TextEncoder(), encode = uncurry(global.TextEncoder.prototype.encode);
  const decoder = new global.TextDecoder(), decode = uncurry(global.TextDecoder.prototype.decode);
  const dateNow = Date.now, setPrinter = helpers.setPrinter, methods = helpers.methods;
  const unrefTimer = helpers.unrefTimer, clearTimer = helpers.clearTimer;

  const define = (name, value) =>
    defineProperty(global, name, { value, writable: true, configurable: true });
  const brand = (map, self, what) => {
    const st = wmGet(map, self);
    if (st === undefined) throw new TypeErr("Illegal invocation: not a " + what);
    return st;
  };
  const internal = {}; // the token constructors accept from this file only

  // ---- Event, EventTarget (DOM Standard, the part AbortSignal needs) ----
  const events = new WM();
  class Event {
    constructor(type, init = undefined) {
      if (arguments.length < 1) throw new TypeErr("Event: the type is required");
      wmSet(events, this, { type: Str(type), cancelable: !!(init && init.cancelable), target: null,
        current: null, canceled: false, stop: false, time: dateNow() });
    }
    get type() { return brand(events, this, "Event").type; }
    get target() { return brand(events, this, "Event").target; }
    get currentTarget() { return brand(events, this, "Event").current; }
    get srcElement() { return brand(events, this, "Event").target; }
    get bubbles() { brand(events, this, "Event"); return false; }
    get cancelable() { return brand(events, this, "Event").cancelable; }
    get defaultPrevented() { return brand(events, this, "Event").canceled; }
    get timeStamp() { return brand(events, this, "Event").time; }
    get eventPhase() { return brand(events, this, "Event").current === null ? 0 : 2; }
    get isTrusted() { brand(events, this, "Event"); return false; }
    preventDefault() { const e = brand(events, this, "Event"); if (e.cancelable) e.canceled = true; }
    stopPropagation() { brand(events, this, "Event"); }
    stopImmediatePropagation() { brand(events, this, "Event").stop = true; }
    composedPath() { const e = brand(events, this, "Event"); return e.current === null ? [] : [e.current]; }
  }
  methods(Event, "Event");

  const targets = new WM(); // EventTarget -> Map(type -> [{fn, once}])
  class EventTarget {
    constructor() { wmSet(targets, this, new MapCtor()); }
    addEventListener(type, listener, options = undefined) {
      const m = brand(targets, this, "EventTarget");
      if (listener === null || listener === undefined) return;
      type = Str(type);
      const once = typeof options === "object" && options !== null && !!options.once;
      let list = mapGet(m, type);
      if (list === undefined) mapSet(m, type, list = []);
      for (let i = 0; i < list.length; i++) if (list[i].fn === listener) return;
      list[list.length] = { fn: listener, once };
    }
    removeEventListener(type, listener) {
      const list = mapGet(brand(targets, this, "EventTarget"), Str(type));
      if (list === undefined) return;
      for (let i = 0; i < list.length; i++) {
        if (list[i].fn === listener) {
          for (let j = i; j < list.length - 1; j++) list[j] = list[j + 1];
          list.length--;
          return;
        }
      }
    }
    dispatchEvent(event) {
      const m = brand(targets, this, "EventTarget"), e = brand(events, event, "Event");
      e.target = e.current = this;
      const list = mapGet(m, e.type);
      if (list !== undefined) {
        const copy = [];
        for (let i = 0; i < list.length; i++) copy[i] = list[i];
        for (let i = 0; i < copy.length && !e.stop; i++) {
          const l = copy[i];
          if (l.once) this.removeEventListener(e.type, l.fn);
          if (typeof l.fn === "function") reflectApply(l.fn, this, [event]);
          else if (l.fn && typeof l.fn.handleEvent === "function") reflectApply(l.fn.handleEvent, l.fn, [event]);
        }
      }
      e.current = null;
      return !e.canceled;
    }
  }
  methods(EventTarget, "EventTarget");

  // ---- AbortController, AbortSignal ------------------------------------
  const signals = new WM(); // AbortSignal -> {aborted, reason, onabort, hooks}
  const abortError = () => new DOMExc("This operation was aborted", "AbortError");
  class AbortSignal extends EventTarget {
    constructor(token = undefined) {
      if (token !== internal) throw new TypeErr("Illegal constructor: use new AbortController().signal");
      super();
      wmSet(signals, this, { aborted: false, reason: undefined, onabort: null, hooks: [] });
    }
    get aborted() { return brand(signals, this, "AbortSignal").aborted; }
    get reason() { return brand(signals, this, "AbortSignal").reason; }
    get onabort() { return brand(signals, this, "AbortSignal").onabort; }
    set onabort(fn) { brand(signals, this, "AbortSignal").onabort = typeof fn === "function" ? fn : null; }
    throwIfAborted() {
      const s = brand(signals, this, "AbortSignal");
      if (s.aborted) throw s.reason;
    }
    static abort(reason = undefined) {
      const sig = new AbortSignal(internal);
      signalAbort(sig, reason);
      return sig;
    }
    // timeout(ms): aborted with a TimeoutError after ms; its timer does
    // not keep a cell going by itself.
    static timeout(ms) {
      ms = +ms;
      if (!(ms >= 0) || ms > 9007199254740991) throw new TypeErr("AbortSignal.timeout: the delay must be a non-negative number");
      const sig = new AbortSignal(internal);
      unrefTimer(() => signalAbort(sig, new DOMExc("The operation was aborted due to timeout", "TimeoutError")), ms);
      return sig;
    }
    static any(list) {
      const sig = new AbortSignal(internal), all = [];
      for (const s of list) { brand(signals, s, "AbortSignal"); all[all.length] = s; }
      for (let i = 0; i < all.length; i++) {
        const st = wmGet(signals, all[i]);
        if (st.aborted) { signalAbort(sig, st.reason); return sig; }
      }
      for (let i = 0; i < all.length; i++) {
        const st = wmGet(signals, all[i]);
        st.hooks[st.hooks.length] = (reason) => signalAbort(sig, reason);
      }
      return sig;
    }
  }
  methods(AbortSignal, "AbortSignal");
  // signalAbort: the DOM Standard's "signal abort": the hooks (fetch's
  // abort of its request first), then the abort event.
  function signalAbort(sig, reason) {
    const st = wmGet(signals, sig);
    if (st.aborted) return;
    st.aborted = true;
    st.reason = reason === undefined ? abortError() : reason;
    const hooks = st.hooks;
    st.hooks = [];
    for (let i = 0; i < hooks.length; i++) hooks[i](st.reason);
    const ev = new Event("abort");
    if (st.onabort !== null) reflectApply(st.onabort, sig, [ev]);
    sig.dispatchEvent(ev);
  }
  const controllers = new WM();
  class AbortController {
    constructor() { wmSet(controllers, this, new AbortSignal(internal)); }
    get signal() { return brand(controllers, this, "AbortController"); }
    abort(reason = undefined) { signalAbort(brand(controllers, this, "AbortController"), reason); }
  }
  methods(AbortController, "AbortController");

  // ---- Headers -----------------------------------------------------------
  const headerLists = new WM(); // Headers -> {list: [[lower name, value]], immutable}
  const tchar = (c) => c >= 97 && c <= 122 || c >= 65 && c <= 90 || c >= 48 && c <= 57 ||
    c === 33 || c >= 35 && c <= 39 || c === 42 || c === 43 || c === 45 || c === 46 || c === 94 || c === 95 || c === 96 || c === 124 || c === 126;
  function headerName(name) {
    name = Str(name);
    if (name.length === 0) throw new TypeErr("Headers: \"\" is not a valid header name");
    for (let i = 0; i < name.length; i++) {
      if (!tchar(charCodeAt(name, i))) throw new TypeErr("Headers: " + jsonStringify(strSlice(name, 0, 60)) + " is not a valid header name");
    }
    return toLower(name);
  }
  const httpSpace = (c) => c === 9 || c === 10 || c === 13 || c === 32;
  function headerValue(name, value) {
    value = Str(value);
    let a = 0, b = value.length;
    while (a < b && httpSpace(charCodeAt(value, a))) a++;
    while (b > a && httpSpace(charCodeAt(value, b - 1))) b--;
    value = strSlice(value, a, b);
    for (let i = 0; i < value.length; i++) {
      const c = charCodeAt(value, i);
      if (c === 0 || c === 10 || c === 13) throw new TypeErr("Headers: the value of " + name + " has a line break or a NUL character");
      if (c > 255) throw new TypeErr("Headers: the value of " + name + " has a character beyond Latin-1");
    }
    return value;
  }
  class Headers {
    constructor(init = undefined) {
      const st = { list: [], immutable: false };
      wmSet(headerLists, this, st);
      if (init === undefined || init === null) return;
      if (typeof init !== "object" && typeof init !== "function") throw new TypeErr("Headers: init must be an object, an array of pairs or Headers");
      if (wmHas(headerLists, init)) {
        const src = wmGet(headerLists, init).list;
        for (let i = 0; i < src.length; i++) st.list[i] = [src[i][0], src[i][1]];
      } else if (typeof init[iteratorSym] === "function") {
        for (const pair of init) {
          const p = [];
          for (const x of pair) p[p.length] = x;
          if (p.length !== 2) throw new TypeErr("Headers: each pair must have a name and a value");
          this.append(p[0], p[1]);
        }
      } else {
        const ks = keysOf(init);
        for (let i = 0; i < ks.length; i++) this.append(ks[i], init[ks[i]]);
      }
    }
    append(name, value) {
      const st = writable(this), n = headerName(name);
      st.list[st.list.length] = [n, headerValue(n, value)];
    }
    delete(name) {
      const st = writable(this), n = headerName(name), out = [];
      for (let i = 0; i < st.list.length; i++) if (st.list[i][0] !== n) out[out.length] = st.list[i];
      st.list = out;
    }
    get(name) {
      const n = headerName(name), list = brand(headerLists, this, "Headers").list;
      let v = null;
      for (let i = 0; i < list.length; i++) if (list[i][0] === n) v = v === null ? list[i][1] : v + ", " + list[i][1];
      return v;
    }
    getSetCookie() {
      const list = brand(headerLists, this, "Headers").list, out = [];
      for (let i = 0; i < list.length; i++) if (list[i][0] === "set-cookie") out[out.length] = list[i][1];
      return out;
    }
    has(name) {
      const n = headerName(name), list = brand(headerLists, this, "Headers").list;
      for (let i = 0; i < list.length; i++) if (list[i][0] === n) return true;
      return false;
    }
    set(name, value) {
      const st = writable(this), n = headerName(name), v = headerValue(n, value), out = [];
      let done = false;
      for (let i = 0; i < st.list.length; i++) {
        if (st.list[i][0] !== n) out[out.length] = st.list[i];
        else if (!done) { out[out.length] = [n, v]; done = true; }
      }
      if (!done) out[out.length] = [n, v];
      st.list = out;
    }
    forEach(fn, thisArg = undefined) {
      const pairs = sorted(this);
      for (let i = 0; i < pairs.length; i++) reflectApply(fn, thisArg, [pairs[i][1], pairs[i][0], this]);
    }
    *entries() { const p = sorted(this); for (let i = 0; i < p.length; i++) yield [p[i][0], p[i][1]]; }
    *keys() { const p = sorted(this); for (let i = 0; i < p.length; i++) yield p[i][0]; }
    *values() { const p = sorted(this); for (let i = 0; i < p.length; i++) yield p[i][1]; }
  }
  Headers.prototype[iteratorSym] = Headers.prototype.entries;
  methods(Headers, "Headers");
  function writable(h) {
    const st = brand(headerLists, h, "Headers");
    if (st.immutable) throw new TypeErr("Headers: these headers are immutable (they are a response's)");
    return st;
  }
  // sorted: the Fetch Standard's "sort and combine" (set-cookie kept apart).
  function sorted(h) {
    const list = brand(headerLists, h, "Headers").list, names = [], seen = new MapCtor();
    for (let i = 0; i < list.length; i++) if (mapGet(seen, list[i][0]) === undefined) { mapSet(seen, list[i][0], 1); names[names.length] = list[i][0]; }
    arraySort(names);
    const out = [];
    for (let i = 0; i < names.length; i++) {
      if (names[i] === "set-cookie") {
        for (let j = 0; j < list.length; j++) if (list[j][0] === "set-cookie") out[out.length] = ["set-cookie", list[j][1]];
      } else {
        out[out.length] = [names[i], h.get(names[i])];
      }
    }
    return out;
  }
  const headerPairs = (h) => {
    const list = wmGet(headerLists, h).list, out = [];
    for (let i = 0; i < list.length; i++) out[i] = [list[i][0], list[i][1]];
    return out;
  };

  // ---- bodies --------------------------------------------------------------
  const copyBytes = (src) => {
    if (isView(src)) {
      if (typedTag(src) !== undefined) return typedSlice(new U8(typedBuffer(src), typedOffset(src), typedByteLength(src)));
      return typedSlice(new U8(dvBuffer(src), dvOffset(src), dvByteLength(src)));
    }
    return new U8(abSlice(src, 0));
  };
  const isBuffer = (x) => { try { abByteLength(x); return true; } catch (e) { return false; } };
  // extract: the Fetch Standard's "extract a body": bytes and their type.
  function extract(body) {
    if (body === null || body === undefined) return { bytes: null, type: null };
    if (typeof body === "string") return { bytes: encode(encoder, body), type: "text/plain;charset=UTF-8" };
    if (isView(body) || isBuffer(body)) return { bytes: copyBytes(body), type: null };
    if (typeof body === "object" && isProtoOf(USP.prototype, body)) {
      return { bytes: encode(encoder, uspToString(body)), type: "application/x-www-form-urlencoded;charset=UTF-8" };
    }
    if (typeof body === "object" && typeof body.getReader === "function") throw new TypeErr("fetch: streams are not available in this sandbox; pass a string, an ArrayBuffer or a typed array");
    if (typeof body === "object" && (objToTag(body) === "Blob" || objToTag(body) === "FormData")) throw new TypeErr("fetch: " + objToTag(body) + " is not available in this sandbox; pass a string, an ArrayBuffer or a typed array");
    return { bytes: encode(encoder, Str(body)), type: "text/plain;charset=UTF-8" };
  }
  const objToTag = (o) => { try { return o[tagSym]; } catch (e) { return undefined; } };
  const bodies = new WM(); // Request or Response -> {bytes, used}
  function consume(self, what) {
    const b = wmGet(bodies, self);
    if (b === undefined) return promiseReject(new TypeErr("Illegal invocation: not a " + what));
    if (b.used) return promiseReject(new TypeErr(what + ": the body has already been read"));
    b.used = true;
    return promiseResolve(b.bytes === null ? new U8(0) : b.bytes);
  }
  const what = (self) => wmHas(requests, self) ? "Request" : "Response";
  const Body = {
    get bodyUsed() { const b = wmGet(bodies, this); return b !== undefined && b.used; },
    arrayBuffer() { return promiseThen(consume(this, what(this)), (u8) => abSlice(typedBuffer(u8), typedOffset(u8), typedOffset(u8) + typedByteLength(u8))); },
    bytes() { return promiseThen(consume(this, what(this)), (u8) => typedSlice(u8)); },
    text() { return promiseThen(consume(this, what(this)), (u8) => decode(decoder, u8)); },
    json() { return promiseThen(consume(this, what(this)), (u8) => jsonParse(decode(decoder, u8))); },
    blob() { return promiseReject(new TypeErr("Blob is not available in this sandbox: use arrayBuffer() or bytes()")); },
    formData() { return promiseReject(new TypeErr("FormData is not available in this sandbox: use text() and URLSearchParams")); },
  };
  function mixBody(C) {
    const names = O.getOwnPropertyNames(Body);
    for (let i = 0; i < names.length; i++) defineProperty(C.prototype, names[i], descriptorOf(Body, names[i]));
  }

  // ---- Request -----------------------------------------------------------
  const requests = new WM(); // Request -> {method, url, headers, signal, redirect}
  const normalized = { DELETE: 1, GET: 1, HEAD: 1, OPTIONS: 1, POST: 1, PUT: 1 };
  // simpleURL: URLs the URL Standard leaves as they are but for an empty
  // path (lower-case name of letters, digits and hyphens, not ending in a
  // number; a port that is not the default; a path and query of characters
  // that need no escape, no dot segment, no fragment): most URLs, given
  // back without the full parse (a fifth of a fetch's time otherwise).
  const simpleURL = /^(https?):\/\/((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*([a-z0-9](?:[a-z0-9-]*[a-z0-9])?))(?::([1-9][0-9]{0,4}))?(\/[A-Za-z0-9\-._~!$&'()*+,;=:@%\/]*)?(\?[A-Za-z0-9\-._~!$&'()*+,;=:@%\/?]*)?$/;
  const dotSegment = /(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)/i, numericLabel = /^(?:[0-9]+|0x[0-9a-f]*)$/;
  const octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
  const dottedQuad = new RegExp("^" + octet + "\\." + octet + "\\." + octet + "\\." + octet + "$");
  const reExec = uncurry(RegExp.prototype.exec);
  function fastURL(s) {
    const m = reExec(simpleURL, s);
    if (m === null || reExec(numericLabel, m[3]) !== null && reExec(dottedQuad, m[2]) === null) return null;
    if (m[4] !== undefined && (+m[4] > 65535 || m[4] === (m[1] === "http" ? "80" : "443"))) return null;
    const path = m[5] === undefined ? "/" : m[5];
    if (reExec(dotSegment, path) !== null) return null;
    return m[1] + "://" + m[2] + (m[4] === undefined ? "" : ":" + m[4]) + path + (m[6] === undefined ? "" : m[6]);
  }
  function parseURL(input) {
    const s = Str(input), fast = fastURL(s);
    if (fast !== null) return fast;
    let u;
    try {
      u = new URLCtor(Str(input));
    } catch (e) {
      throw new TypeErr("fetch: " + jsonStringify(strSlice(Str(input), 0, 200)) + " is not a URL (give the whole URL: https://host/path)");
    }
    if (urlUser(u) !== "" || urlPass(u) !== "") throw new TypeErr("fetch: a URL with credentials (user:password@host) cannot be fetched; send them in a header");
    return urlHref(u);
  }
  class Request {
    constructor(input, init = undefined) {
      if (arguments.length < 1) throw new TypeErr("Request: the URL is required");
      if (init === null || init === undefined) init = {};
      let st, body = null;
      const src = typeof input === "object" && input !== null ? wmGet(requests, input) : undefined;
      if (src !== undefined) {
        const b = wmGet(bodies, input);
        if (b.used) throw new TypeErr("Request: the body of the request it copies has already been read");
        st = { method: src.method, url: src.url, headers: new Headers(src.headers), signal: src.signal, redirect: src.redirect };
        body = b.bytes;
      } else {
        st = { method: "GET", url: parseURL(input), headers: new Headers(), signal: null, redirect: "follow" };
      }
      if (init.method !== undefined) {
        let m = Str(init.method);
        for (let i = 0; i < m.length; i++) if (!tchar(charCodeAt(m, i))) m = "";
        if (m === "") throw new TypeErr("Request: " + jsonStringify(Str(init.method)) + " is not an HTTP method");
        const up = toUpper(m);
        if (up === "CONNECT" || up === "TRACE" || up === "TRACK") throw new TypeErr("Request: the " + up + " method is not allowed");
        st.method = normalized[up] === 1 ? up : m;
      }
      if (init.headers !== undefined) st.headers = new Headers(init.headers);
      if (init.signal !== undefined && init.signal !== null) { brand(signals, init.signal, "AbortSignal"); st.signal = init.signal; }
      if (init.redirect !== undefined) {
        const r = Str(init.redirect);
        if (r !== "follow" && r !== "manual" && r !== "error") throw new TypeErr("Request: redirect must be \"follow\", \"manual\" or \"error\"");
        st.redirect = r;
      }
      if (init.body !== undefined && init.body !== null) {
        if (st.method === "GET" || st.method === "HEAD") throw new TypeErr("Request: a " + st.method + " request cannot have a body");
        const x = extract(init.body);
        body = x.bytes;
        if (x.type !== null && !st.headers.has("content-type")) st.headers.append("content-type", x.type);
      }
      if (st.signal === null) st.signal = new AbortSignal(internal);
      wmSet(requests, this, st);
      wmSet(bodies, this, { bytes: body, used: false });
    }
    get method() { return brand(requests, this, "Request").method; }
    get url() { return brand(requests, this, "Request").url; }
    get headers() { return brand(requests, this, "Request").headers; }
    get signal() { return brand(requests, this, "Request").signal; }
    get redirect() { return brand(requests, this, "Request").redirect; }
    get mode() { brand(requests, this, "Request"); return "cors"; }
    get credentials() { brand(requests, this, "Request"); return "same-origin"; }
    get cache() { brand(requests, this, "Request"); return "default"; }
    get destination() { brand(requests, this, "Request"); return ""; }
    clone() {
      const st = brand(requests, this, "Request");
      if (wmGet(bodies, this).used) throw new TypeErr("Request.clone: the body has already been read");
      return new Request(this, { signal: st.signal });
    }
  }
  mixBody(Request);
  methods(Request, "Request");

  // ---- Response ----------------------------------------------------------
  const responses = new WM(); // Response -> {type, url, redirected, status, statusText, headers}
  const nullBody = { 101: 1, 103: 1, 204: 1, 205: 1, 304: 1 };
  class Response {
    constructor(body = null, init = undefined) {
      if (init === null || init === undefined) init = {};
      if (body === internal) { // from fetch: init is the state, the body below
        wmSet(responses, this, init.state);
        wmSet(bodies, this, { bytes: init.bytes, used: false });
        return;
      }
      const status = init.status === undefined ? 200 : +init.status;
      if (!(status >= 200 && status <= 599) || status !== (status | 0)) throw new RangeErr("Response: the status must be from 200 to 599, got " + Str(init.status));
      const statusText = init.statusText === undefined ? "" : Str(init.statusText);
      for (let i = 0; i < statusText.length; i++) {
        const c = charCodeAt(statusText, i);
        if (c === 10 || c === 13 || c > 255) throw new TypeErr("Response: the statusText has a line break or a character beyond Latin-1");
      }
      const headers = new Headers(init.headers);
      const x = extract(body);
      if (x.bytes !== null && nullBody[status] === 1) throw new TypeErr("Response: a " + status + " response cannot have a body");
      if (x.type !== null && !headers.has("content-type")) headers.append("content-type", x.type);
      wmSet(responses, this, { type: "default", url: "", redirected: false, status, statusText, headers });
      wmSet(bodies, this, { bytes: x.bytes, used: false });
    }
    get type() { return brand(responses, this, "Response").type; }
    get url() { return brand(responses, this, "Response").url; }
    get redirected() { return brand(responses, this, "Response").redirected; }
    get status() { return brand(responses, this, "Response").status; }
    get ok() { const s = brand(responses, this, "Response").status; return s >= 200 && s <= 299; }
    get statusText() { return brand(responses, this, "Response").statusText; }
    get headers() { return brand(responses, this, "Response").headers; }
    clone() {
      const st = brand(responses, this, "Response"), b = wmGet(bodies, this);
      if (b.used) throw new TypeErr("Response.clone: the body has already been read");
      const h = new Headers(st.headers);
      wmGet(headerLists, h).immutable = wmGet(headerLists, st.headers).immutable;
      const state = { type: st.type, url: st.url, redirected: st.redirected, status: st.status, statusText: st.statusText, headers: h };
      return new Response(internal, { state, bytes: b.bytes });
    }
    static error() {
      const h = new Headers();
      wmGet(headerLists, h).immutable = true;
      return new Response(internal, { state: { type: "error", url: "", redirected: false, status: 0, statusText: "", headers: h }, bytes: null });
    }
    static redirect(url, status = 302) {
      status = +status;
      if (status !== 301 && status !== 302 && status !== 303 && status !== 307 && status !== 308) throw new RangeErr("Response.redirect: the status must be a redirect status");
      const h = new Headers([["location", parseURL(url)]]);
      wmGet(headerLists, h).immutable = true;
      return new Response(internal, { state: { type: "default", url: "", redirected: false, status, statusText: "", headers: h }, bytes: null });
    }
    static json(data, init = undefined) {
      const text = jsonStringify(data);
      if (text === undefined) throw new TypeErr("Response.json: the value cannot be serialised as JSON");
      const r = new Response(text, init);
      wmGet(responses, r).headers.set("content-type", "application/json");
      return r;
    }
  }
  mixBody(Response);
  methods(Response, "Response");

  // ---- fetch ---------------------------------------------------------------
  // A fetch beyond network.max_concurrent_requests waits here, in order,
  // until one in flight finishes (as browsers queue requests per host).
  const pending = new MapCtor(); // id -> p: the fetches the host holds
  const queued = []; // p: the fetches waiting for room
  const counts = helpers.counts; // [2]: the fetches in flight or queued (bootstrap.js)
  const counted = () => { counts[2] = mapSize(pending) + queued.length; };
  // launch(p): hands p to the host; false when there is no room for it.
  function launch(p) {
    const id = native.netStart(p.head, p.bytes === null ? undefined : p.bytes);
    if (id === -2) return false;
    if (!(id > 0)) {
      p.reject(new TypeErr("fetch failed: the host refused the request (" + id + ")"));
      return true;
    }
    p.id = id;
    mapSet(pending, id, p);
    return true;
  }
  function drain() {
    while (queued.length > 0 && launch(queued[0])) {
      for (let i = 0; i < queued.length - 1; i++) queued[i] = queued[i + 1];
      queued.length--;
    }
    counted();
  }
  function fetch(input, init = undefined) {
    let req;
    try {
      req = new Request(input, init);
    } catch (e) {
      return promiseReject(e);
    }
    const st = wmGet(requests, req), b = wmGet(bodies, req), sig = wmGet(signals, st.signal);
    if (sig.aborted) return promiseReject(sig.reason);
    return new PromiseCtor((resolve, reject) => {
      const head = jsonStringify({ method: st.method, url: st.url, headers: headerPairs(st.headers), redirect: st.redirect });
      b.used = b.bytes !== null;
      const p = { resolve, reject, sig, hook: null, id: 0, head, bytes: b.bytes };
      p.hook = (reason) => {
        if (p.id !== 0) {
          if (mapGet(pending, p.id) !== p) return;
          mapDelete(pending, p.id);
          native.netClose(p.id); // the host request ends now
        } else {
          let k = 0;
          for (let i = 0; i < queued.length; i++) if (queued[i] !== p) queued[k++] = queued[i];
          queued.length = k;
        }
        reject(reason);
        drain();
      };
      sig.hooks[sig.hooks.length] = p.hook;
      if (queued.length > 0 || !launch(p)) queued[queued.length] = p;
      counted();
    });
  }
  // netDone(id): guest.c's event loop saw request id finish.
  helpers.netDone = (id) => {
    const p = mapGet(pending, id);
    if (p === undefined) { native.netClose(id); return; }
    mapDelete(pending, id);
    const hooks = p.sig.hooks, kept = [];
    for (let i = 0; i < hooks.length; i++) if (hooks[i] !== p.hook) kept[kept.length] = hooks[i];
    p.sig.hooks = kept;
    try {
      settle(id, p);
    } finally {
      drain();
    }
  };
  function settle(id, p) {
    const text = native.netHead(id);
    if (text === null) {
      native.netClose(id);
      p.reject(new TypeErr("fetch failed: the response was lost"));
      return;
    }
    const h = jsonParse(text);
    if (h.error !== undefined) {
      native.netClose(id);
      if (h.kind === "aborted" && p.sig.aborted) p.reject(p.sig.reason);
      else p.reject(new TypeErr(h.error));
      return;
    }
    let bytes;
    try {
      bytes = new U8(native.netBody(id, h.length));
    } finally {
      native.netClose(id);
    }
    // The host's headers are valid already (net/http checked them).
    const headers = new Headers(), list = wmGet(headerLists, headers), hs = h.headers;
    for (let i = 0; i < hs.length; i++) list.list[i] = [toLower(hs[i][0]), hs[i][1]];
    list.immutable = true;
    const state = { type: "basic", url: h.url, redirected: h.redirected, status: h.status, statusText: h.statusText, headers };
    p.resolve(new Response(internal, { state, bytes }));
  }
  // netClear(): the host holds none of them (a cell that failed, or the
  // end of a run): forget every pending fetch.
  helpers.netClear = () => { mapClear(pending); queued.length = 0; counted(); };

  // ---- execd.env: the secrets, as placeholders ---------------------------
  const execd = {};
  defineProperty(execd, "env", {
    enumerable: true, configurable: true,
    get() {
      const text = native.netEnv(), env = create(null);
      if (text !== "") {
        const m = jsonParse(text), ks = keysOf(m);
        for (let i = 0; i < ks.length; i++) env[ks[i]] = m[ks[i]];
      }
      return freeze(env);
    },
  });
  defineProperty(execd, tagSym, { value: "execd", configurable: true });

  define("Event", Event);
  define("EventTarget", EventTarget);
  define("AbortController", AbortController);
  define("AbortSignal", AbortSignal);
  define("Headers", Headers);
  define("Request", Request);
  define("Response", Response);
  define("fetch", fetch);
  define("execd", execd);

  const show = (fmt, pairs) => {
    let s = "";
    for (let i = 0; i < pairs.length; i++) s += (i ? ", " : "") + fmt(pairs[i][0]) + ": " + fmt(pairs[i][1]);
    return s;
  };
  setPrinter(Headers.prototype, (h, fmt) => "Headers {" + show(fmt, sorted(h)) + "}");
  setPrinter(Response.prototype, (r, fmt) => {
    const st = wmGet(responses, r);
    return "Response {status: " + st.status + ", ok: " + (st.status >= 200 && st.status <= 299) + ", url: " + fmt(st.url) + "}";
  });
  setPrinter(Request.prototype, (r, fmt) => {
    const st = wmGet(requests, r);
    return "Request {method: " + fmt(st.method) + ", url: " + fmt(st.url) + "}";
  });
  setPrinter(AbortSignal.prototype, (s) => "AbortSignal {aborted: " + wmGet(signals, s).aborted + "}");
  const uncl = helpers.uncloneable;
  uncl(Headers.prototype);
  uncl(Request.prototype);
  uncl(Response.prototype);
  uncl(AbortSignal.prototype);
  uncl(AbortController.prototype);
  uncl(EventTarget.prototype);
  uncl(Event.prototype);
  return undefined;
})
