// Evaluated once by guest.c at init, after fetch.js: code mode, the
// `tools` global through which code calls the tools of the operator's
// upstream MCP servers, and ToolError. It gets the natives of tools.c and
// net.c, the global object and bootstrap.js's helpers; like fetch.js it
// runs on intrinsics captured now.
//
//   await tools.<server>.<tool>(args)  the tool's structuredContent when it
//       has one, else its text (JSON-parsed when it is JSON); with images,
//       {text, images: [Uint8Array, ...]} (each can be show()n). A result
//       with isError, or a call execd refuses or that fails, rejects with
//       a ToolError.
//   tools.list()  [{server, name, description, inputSchema, access}]
//
// A call goes to the host (execd.tool_call of sandbox/ABI.md), where it
// joins the run's network table: several are in flight at once, and
// guest.c's event loop hands each finished one to helpers.netDone, which
// this file extends so that fetch.js still gets its own.
(function (native, global, helpers) {
  "use strict";
  const O = Object;
  const defineProperty = O.defineProperty, create = O.create, freeze = O.freeze;
  const jsonParse = JSON.parse, jsonStringify = JSON.stringify;
  const PromiseCtor = Promise, ProxyCtor = Proxy;
  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const MapCtor = Map, mapGet = uncurry(Map.prototype.get), mapSet = uncurry(Map.prototype.set);
  const mapDelete = uncurry(Map.prototype.delete), mapClear = uncurry(Map.prototype.clear);
  const sizeOf = uncurry(O.getOwnPropertyDescriptor(Map.prototype, "size").get);
  const U8 = Uint8Array, Str = String, TypeErr = TypeError;
  const charCodeAt = uncurry(Str.prototype.charCodeAt), trim = uncurry(Str.prototype.trim);
  const setPrinter = helpers.setPrinter;

  // ToolError: why a call of an upstream's tool has no value. server and
  // tool name it; code is why ("tool_error": the tool's own failure, or
  // execd's word: "limit", "timeout", "refused", "unknown_tool", ...).
  class ToolError extends Error {
    constructor(message, options = undefined) {
      super(message);
      const o = options === undefined || options === null ? {} : options;
      defineProperty(this, "server", { value: o.server === undefined ? "" : Str(o.server), writable: true, configurable: true });
      defineProperty(this, "tool", { value: o.tool === undefined ? "" : Str(o.tool), writable: true, configurable: true });
      defineProperty(this, "code", { value: o.code === undefined ? "" : Str(o.code), writable: true, configurable: true });
    }
  }
  defineProperty(ToolError.prototype, "name", { value: "ToolError", writable: true, configurable: true });

  // The calls the host holds: id -> {resolve, reject, server, tool}. The
  // loop waits while fetch.js's count or this one ([3] of helpers.counts,
  // see bootstrap.js) is above zero.
  const calls = new MapCtor();
  const counts = helpers.counts;
  const counted = () => { counts[3] = sizeOf(calls); };
  const fetchDone = helpers.netDone, fetchClear = helpers.netClear;
  helpers.netDone = (id) => {
    const p = mapGet(calls, id);
    if (p === undefined) return fetchDone(id);
    mapDelete(calls, id);
    counted();
    let v;
    try {
      v = answer(id, p.server, p.tool);
    } catch (e) {
      p.reject(e);
      return;
    }
    p.resolve(v);
  };
  helpers.netClear = () => { mapClear(calls); counted(); fetchClear(); };

  // read(id): the finished call's answer (its head, parsed), forgotten on
  // the host; its images' bytes are read first.
  function read(id) {
    const text = native.netHead(id);
    if (text === null) {
      native.netClose(id);
      throw new ToolError("tools: the answer was lost", { code: "unavailable" });
    }
    const a = jsonParse(text);
    try {
      const ims = a.images;
      if (ims !== undefined) {
        for (let i = 0; i < ims.length; i++) ims[i].bytes = new U8(native.netBody(id, ims[i].length));
      }
    } finally {
      native.netClose(id);
    }
    return a;
  }

  // answer(id, server, tool): the value of a finished call, or its
  // ToolError thrown.
  function answer(id, server, tool) {
    const a = read(id);
    if (a.error !== undefined) throw new ToolError(a.error, { server, tool, code: a.code });
    const text = a.text === undefined ? "" : a.text;
    if (a.isError) throw new ToolError(text === "" ? "tools." + server + "." + tool + " failed" : text, { server, tool, code: "tool_error" });
    if (a.structuredContent !== undefined) return a.structuredContent;
    if (a.images !== undefined) {
      const images = [];
      for (let i = 0; i < a.images.length; i++) images[i] = a.images[i].bytes;
      return { text, images };
    }
    return parsed(text);
  }

  // parsed(text): text's JSON value when it is JSON, else text.
  function parsed(text) {
    const t = trim(text);
    if (t === "") return text;
    const c = charCodeAt(t, 0);
    // {, [, ", a digit, -, t(rue), f(alse), n(ull)
    if (c === 123 || c === 91 || c === 34 || (c >= 48 && c <= 57) || c === 45 || c === 116 || c === 102 || c === 110) {
      try { return jsonParse(t); } catch (e) { }
    }
    return text;
  }

  function call(server, tool, args) {
    let req;
    try {
      if (args !== undefined && (args === null || typeof args !== "object" || Array.isArray(args)))
        throw new TypeErr("tools." + server + "." + tool + " takes its arguments as one object");
      req = jsonStringify({ server, tool, arguments: args === undefined ? {} : args });
    } catch (e) {
      return PromiseCtor.reject(e);
    }
    return new PromiseCtor((resolve, reject) => {
      const id = native.toolCall(req);
      if (!(id > 0)) {
        reject(new ToolError("tools: the host refused the call (" + id + ")", { server, tool, code: "refused" }));
        return;
      }
      mapSet(calls, id, { resolve, reject, server, tool });
      counted();
    });
  }

  // list(): the tools this code may call. It waits for the host (the
  // upstreams are connected as needed), blocking the cell meanwhile.
  function list() {
    const id = native.toolCall('{"list":true}');
    native.netWait(id);
    const a = read(id);
    if (a.error !== undefined) throw new ToolError(a.error, { code: a.code });
    const out = [], ts = a.tools;
    for (let i = 0; i < ts.length; i++) {
      const t = ts[i];
      out[i] = { server: t.server, name: t.name, description: t.description, inputSchema: t.inputSchema, access: t.access };
    }
    return out;
  }

  // The objects code sees: tools (whose properties are the upstreams) and
  // each upstream's (whose properties are its tools' callers). Neither is
  // a thenable nor serialisable: `then` and `toJSON` are not names.
  const ToolsProto = create(null), ServerProto = create(null);
  const skip = (k) => typeof k !== "string" || k === "then" || k === "toJSON";
  const servers = new MapCtor(), names = new MapCtor(); // name -> proxy, proxy -> name
  function serverOf(name) {
    let s = mapGet(servers, name);
    if (s === undefined) {
      const callers = new MapCtor();
      s = new ProxyCtor(create(ServerProto), {
        get(t, k) {
          if (skip(k)) return undefined;
          let f = mapGet(callers, k);
          if (f === undefined) {
            f = { [k]: (args) => call(name, k, args) }[k];
            mapSet(callers, k, f);
          }
          return f;
        },
        set() { return false; },
        defineProperty() { return false; },
        deleteProperty() { return false; },
      });
      mapSet(servers, name, s);
      mapSet(names, s, name);
    }
    return s;
  }
  const tools = new ProxyCtor(create(ToolsProto), {
    get(t, k) {
      if (k === "list") return list;
      if (skip(k)) return undefined;
      return serverOf(k);
    },
    set() { return false; },
    defineProperty() { return false; },
    deleteProperty() { return false; },
  });
  setPrinter(ToolsProto, () => "tools {list: [Function: list], <upstream>: {<tool>: [Function]}}");
  setPrinter(ServerProto, (s) => "tools." + mapGet(names, s) + " {<tool>: [Function]}");

  defineProperty(global, "tools", { value: tools, writable: true, configurable: true });
  defineProperty(global, "ToolError", { value: ToolError, writable: true, configurable: true });
  freeze(ToolsProto);
  freeze(ServerProto);
  return undefined;
})
