// Evaluated once by guest.c at init, after fetch.js: npm packages and
// Node's small built-ins for the module loader. guest.c hands a specifier
// to resolve() when it is bare ("dayjs", "zod/v4", "npm:nanoid@5",
// "node:path") or imported from a file under /packages, and a module name
// to source() when it is a built-in ("node:path") or a file under
// /packages; source() returns the ES module text QuickJS compiles.
//
// The workspace's packages are the host's (internal/packages): their
// tree comes from execd.packages ({"op": "npm"}), their files are in the
// read-only cache mounted at /packages. Resolution follows Node as
// internal/packages/doc.go ("How a guest loader uses the result") says:
// exports with browser/import|require/default conditions, module, main,
// subpaths, extension and index probing, each package's own dependencies.
// CommonJS runs in Node's module wrapper; imported from an ES module, it
// is evaluated when it is loaded (while the importing graph links), so
// that its exports' names are known: its default export is module.exports
// and each own enumerable key is a named export too.
//
// Globals: require(specifier) resolves from /workspace, as a cell's
// import does.
(function (native, global, helpers) {
  "use strict";
  const O = Object, Str = String, MapCtor = Map, SetCtor = Set, ErrorCtor = Error, TypeErr = TypeError;
  const jsonParse = JSON.parse, jsonStringify = JSON.stringify;
  const U8 = Uint8Array;
  const hasOwn = O.hasOwn, keysOf = O.keys, defineProperty = O.defineProperty, freeze = O.freeze;
  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const mapGet = uncurry(Map.prototype.get), mapSet = uncurry(Map.prototype.set), mapHas = uncurry(Map.prototype.has);
  const mapDelete = uncurry(Map.prototype.delete);
  const setHas = uncurry(Set.prototype.has), setAdd = uncurry(Set.prototype.add);
  const strSlice = uncurry(Str.prototype.slice), strIndexOf = uncurry(Str.prototype.indexOf);
  const strLastIndexOf = uncurry(Str.prototype.lastIndexOf), startsWith = uncurry(Str.prototype.startsWith);
  const endsWith = uncurry(Str.prototype.endsWith), strSplit = uncurry(Str.prototype.split);
  const strReplace = uncurry(Str.prototype.replace), charCodeAt = uncurry(Str.prototype.charCodeAt);
  const arrJoin = uncurry(Array.prototype.join), isArray = Array.isArray;
  const FunctionCtor = Function, reflectApply = Reflect.apply;
  const call = native.call, readText = native.read, kind = native.kind, compile = native.compile;
  const MOUNT = "/packages/", WORKSPACE = "/workspace";

  // ---- the tree ------------------------------------------------------------

  let tree = null, gen = "", byDir = new MapCtor();

  function ask(req) {
    const ans = jsonParse(call(jsonStringify(req)));
    if (ans.error !== undefined) {
      const e = new ErrorCtor(ans.error);
      if (ans.code !== undefined) e.code = "EXECD_PACKAGES_" + ans.code;
      throw e;
    }
    return ans;
  }

  function setTree(ans) {
    if (ans.unchanged) return;
    tree = ans.tree;
    if (!tree.packages) tree.packages = [];
    if (!tree.root) tree.root = {};
    gen = ans.gen || "";
    byDir = new MapCtor();
    for (let i = 0; i < tree.packages.length; i++) {
      const p = tree.packages[i];
      if (!mapHas(byDir, p.dir)) mapSet(byDir, p.dir, i);
    }
  }

  // refresh(): the workspace's tree as the lock has it now (a tool may
  // have installed packages since this interpreter last looked); the host
  // answers {"unchanged": true} for the generation the guest has.
  function refresh() {
    setTree(ask({ op: "npm", have: gen }));
  }

  // install(specs): the host resolves and fetches, the lock is written.
  function install(specs, why) {
    setTree(ask({ op: "install", language: "javascript", packages: specs, reason: why }));
  }

  // The package a file under /packages belongs to (its Dir is a prefix).
  function ownerOf(path) {
    if (tree === null || !startsWith(path, MOUNT)) return -1;
    // "<address>/pkg": the first two segments below the mount
    const rest = strSlice(path, MOUNT.length);
    const a = strIndexOf(rest, "/");
    if (a < 0) return -1;
    const b = strIndexOf(rest, "/", a + 1);
    const dir = b < 0 ? rest : strSlice(rest, 0, b);
    const i = mapGet(byDir, dir);
    return i === undefined ? -1 : i;
  }

  // ---- paths ---------------------------------------------------------------

  function normalize(p) {
    const parts = strSplit(p, "/"), out = [];
    for (let i = 0; i < parts.length; i++) {
      const s = parts[i];
      if (s === "" || s === ".") continue;
      if (s === "..") { if (out.length) out.length--; continue; }
      out[out.length] = s;
    }
    return "/" + arrJoin(out, "/");
  }
  function dirname(p) {
    const i = strLastIndexOf(p, "/");
    return i <= 0 ? "/" : strSlice(p, 0, i);
  }
  function stripQuery(p) {
    let i = strIndexOf(p, "?"), j = strIndexOf(p, "#");
    if (i < 0 || (j >= 0 && j < i)) i = j;
    return i < 0 ? p : strSlice(p, 0, i);
  }
  // A file as Node finds one without an extension: itself, .js, .json,
  // then a directory's package.json main or index.js.
  function probe(p) {
    const k = kind(p);
    if (k === 1) return p;
    for (const ext of [".js", ".json", ".mjs", ".cjs"]) if (kind(p + ext) === 1) return p + ext;
    if (k === 2) {
      const pj = readJSON(p + "/package.json");
      if (pj && typeof pj.main === "string") {
        const m = probe(normalize(p + "/" + pj.main));
        if (m) return m;
      }
      if (kind(p + "/index.js") === 1) return p + "/index.js";
      if (kind(p + "/index.json") === 1) return p + "/index.json";
    }
    return null;
  }
  const jsonCache = new MapCtor();
  function readJSON(p) {
    if (mapHas(jsonCache, p)) return mapGet(jsonCache, p);
    const t = readText(p);
    let v = null;
    if (t !== null) try { v = jsonParse(t); } catch (e) { v = null; }
    mapSet(jsonCache, p, v);
    return v;
  }

  // ---- exports maps ----------------------------------------------------------

  function conditionTarget(t, cond) {
    if (t === null) return null;
    if (typeof t === "string") return t;
    if (isArray(t)) {
      for (let i = 0; i < t.length; i++) {
        const r = conditionTarget(t[i], cond);
        if (r !== undefined && r !== null) return r;
      }
      return undefined;
    }
    if (typeof t === "object") {
      const ks = keysOf(t);
      for (let i = 0; i < ks.length; i++) {
        const k = ks[i];
        if (k === "browser" || k === cond || k === "default") {
          const r = conditionTarget(t[k], cond);
          if (r !== undefined) return r;
        }
      }
    }
    return undefined;
  }

  // exportTarget(exports, "./sub", cond): the "./" target, null when not
  // exported.
  function exportTarget(exports, sub, cond) {
    let map = exports;
    if (typeof exports === "string" || isArray(exports)) map = { ".": exports };
    else if (exports && typeof exports === "object") {
      const ks = keysOf(exports);
      if (ks.length && !startsWith(ks[0], ".")) map = { ".": exports };
    } else return null;
    let t;
    if (hasOwn(map, sub)) t = conditionTarget(map[sub], cond);
    else {
      let best = "", star = "";
      const ks = keysOf(map);
      for (let i = 0; i < ks.length; i++) {
        const k = ks[i], s = strIndexOf(k, "*");
        if (s < 0 || strIndexOf(k, "*", s + 1) >= 0) continue;
        const pre = strSlice(k, 0, s), suf = strSlice(k, s + 1);
        if (sub.length >= k.length - 1 && startsWith(sub, pre) && endsWith(sub, suf) && k.length > best.length) {
          best = k;
          star = strSlice(sub, pre.length, sub.length - suf.length);
        }
      }
      if (best === "") return null;
      t = conditionTarget(map[best], cond);
      if (typeof t === "string") t = strSplit(t, "*").join(star);
    }
    return typeof t === "string" ? t : null;
  }

  // ---- resolution ------------------------------------------------------------

  const CORE = new SetCtor(["assert", "assert/strict", "async_hooks", "buffer", "child_process", "cluster", "console",
    "constants", "crypto", "dgram", "diagnostics_channel", "dns", "dns/promises", "domain", "events", "fs",
    "fs/promises", "http", "http2", "https", "inspector", "module", "net", "os", "path", "path/posix",
    "path/win32", "perf_hooks", "process", "punycode", "querystring", "readline", "readline/promises", "repl",
    "stream", "stream/promises", "stream/web", "string_decoder", "sys", "timers", "timers/promises", "tls",
    "trace_events", "tty", "url", "util", "util/types", "v8", "vm", "wasi", "worker_threads", "zlib", "test"]);
  const PROVIDED = new SetCtor(["path", "path/posix", "events", "util", "buffer", "url"]);

  function splitName(spec) {
    let i = strIndexOf(spec, "/");
    if (spec[0] === "@") i = i < 0 ? -1 : strIndexOf(spec, "/", i + 1);
    return i < 0 ? [spec, "."] : [strSlice(spec, 0, i), "." + strSlice(spec, i)];
  }

  // npm:name@range/sub → ["name@range", "name/sub"]
  function npmSpec(spec) {
    const s = strSlice(spec, 4);
    const at = strIndexOf(s, "@", s[0] === "@" ? 1 : 0);
    if (at < 0) return [s, s];
    const name = strSlice(s, 0, at), rest = strSlice(s, at + 1), slash = strIndexOf(rest, "/");
    const range = slash < 0 ? rest : strSlice(rest, 0, slash);
    return [name + "@" + range, slash < 0 ? name : name + strSlice(rest, slash)];
  }
  const npmDone = new SetCtor();

  function where(base) {
    if (!base || base[0] !== "/") return "";
    const o = ownerOf(base);
    return o >= 0 ? " (imported by " + tree.packages[o].name + "@" + tree.packages[o].version + ", " + base + ")" : " imported from " + base;
  }

  function builtin(name, base) {
    if (setHas(PROVIDED, name)) return "node:" + (name === "path/posix" ? "path" : name);
    throw new ErrorCtor("Cannot load Node's built-in module '" + name + "'" + where(base) +
      ": the sandbox has no '" + name + "' (it provides node:path, node:events, node:util, node:buffer and node:url; " +
      "files are read with the global fs, the network with fetch)");
  }

  // resolve(spec, base, cond): the module name of spec imported from base
  // (a module name; not starting with "/" for a cell).
  function resolve(spec, base, cond) {
    if (startsWith(spec, "node:")) return builtin(strSlice(spec, 5), base);
    if (startsWith(spec, "npm:")) {
      const [want, bare] = npmSpec(spec);
      if (!setHas(npmDone, want)) {
        install([want], spec);
        setAdd(npmDone, want);
      }
      spec = bare;
    }
    if (startsWith(spec, "file://")) spec = strSlice(spec, 7);
    const b = base && base[0] === "/" ? stripQuery(base) : WORKSPACE + "/<cell>";
    if (spec[0] === "/" || startsWith(spec, "./") || startsWith(spec, "../") || spec === "." || spec === "..") {
      const p = spec[0] === "/" ? normalize(spec) : normalize(dirname(b) + "/" + spec);
      const f = probe(p);
      if (f === null) throw new ErrorCtor("Cannot find module '" + spec + "'" + where(base));
      if (endsWith(f, ".js") && setHas(esmHinted, b) && ownerOf(f) === ownerOf(b)) setAdd(esmHinted, f);
      return f;
    }
    if (spec[0] === "#") return resolveImports(spec, b, cond);
    const [name, sub] = splitName(spec);
    if (setHas(CORE, spec) || setHas(CORE, name)) return builtin(spec, base);
    const owner = ownerOf(b);
    let idx;
    if (owner >= 0) {
      const p = tree.packages[owner];
      if (p.name === name) idx = owner;
      else if (p.deps && hasOwn(p.deps, name)) idx = p.deps[name];
      else throw new ErrorCtor("Cannot find package '" + name + "' imported from " + p.name + "@" + p.version +
        ": it is not among the dependencies of " + p.name);
    } else {
      refresh(); // cheap when the lock is unchanged; a tool may have installed since
      if (!hasOwn(tree.root, name)) install([name], spec);
      idx = tree.root[name];
      if (idx === undefined) throw new ErrorCtor("Cannot find package '" + name + "'");
    }
    return packageFile(tree.packages[idx], sub, cond, spec, base);
  }

  const esmHinted = new SetCtor(); // .js files that are ES modules by a package's "module" entry

  function packageFile(p, sub, cond, spec, base) {
    const dir = MOUNT + p.dir;
    let target, viaModule = false;
    if (p.exports !== undefined && p.exports !== null) {
      target = exportTarget(p.exports, sub, cond);
      if (target === null)
        throw new ErrorCtor("Package subpath '" + sub + "' is not defined by \"exports\" in " + p.name + "@" +
          p.version + where(base));
    } else if (sub === ".") {
      if (cond === "import" && p.module) { target = p.module; viaModule = true; }
      else target = p.main || "index.js";
    } else target = sub;
    const f = probe(normalize(dir + "/" + target));
    if (f === null)
      throw new ErrorCtor("Cannot find module '" + spec + "': " + p.name + "@" + p.version + " has no file " + target);
    if (viaModule && endsWith(f, ".js")) setAdd(esmHinted, f);
    return f;
  }

  function resolveImports(spec, b, cond) {
    const owner = ownerOf(b);
    if (owner < 0) throw new ErrorCtor("Cannot resolve '" + spec + "' from " + b + ": not inside a package");
    const p = tree.packages[owner], pj = readJSON(MOUNT + p.dir + "/package.json");
    const t = pj && pj.imports ? exportTarget(pj.imports, spec, cond) : null;
    if (t === null) throw new ErrorCtor("Package import specifier '" + spec + "' is not defined in " + p.name);
    if (startsWith(t, "./")) return probe(normalize(MOUNT + p.dir + "/" + t)) || t;
    return resolve(t, b, cond);
  }

  // ---- formats -------------------------------------------------------------

  // The nearest package.json's "type", up to the package's own directory.
  function typeOf(file) {
    let d = dirname(file);
    while (d.length > MOUNT.length) {
      const pj = readJSON(d + "/package.json");
      if (pj) return pj.type === "module" ? "module" : "commonjs";
      d = dirname(d);
    }
    return "commonjs";
  }
  function formatOf(file) {
    if (endsWith(file, ".mjs")) return "esm";
    if (endsWith(file, ".cjs")) return "cjs";
    if (endsWith(file, ".json")) return "json";
    if (setHas(esmHinted, file) || typeOf(file) === "module") return "esm";
    return "cjs";
  }

  // ---- CommonJS ------------------------------------------------------------

  const cjsCache = new MapCtor(); // file or "node:x" -> module
  const wrap = "(function (exports, require, module, __filename, __dirname, process, Buffer, global) {";

  function loadCJS(file) {
    let m = mapGet(cjsCache, file);
    if (m !== undefined) return m.exports;
    if (startsWith(file, "node:")) return builtinModule(strSlice(file, 5));
    const fmt = formatOf(file);
    const text = readText(file);
    if (text === null) throw new ErrorCtor("Cannot find module '" + file + "'");
    m = { id: file, filename: file, path: dirname(file), exports: {}, loaded: false, children: [], paths: [] };
    mapSet(cjsCache, file, m);
    if (fmt === "json") {
      try { m.exports = jsonParse(text); } catch (e) { mapDelete(cjsCache, file); throw e; }
      m.loaded = true;
      return m.exports;
    }
    if (fmt === "esm")
      throw new ErrorCtor("require() of the ES module " + file + ": import it instead (import x from \"...\" or await import(\"...\"))");
    const req = makeRequire(file);
    m.require = req;
    let fn;
    try {
      fn = compile(wrap + strReplace(text, /^#!/, "//") + "\n})", file);
    } catch (e) {
      mapDelete(cjsCache, file);
      throw e;
    }
    try {
      reflectApply(fn, m.exports, [m.exports, req, m, file, dirname(file), processShim(), bufferClass(), global]);
    } catch (e) {
      mapDelete(cjsCache, file);
      throw e;
    }
    m.loaded = true;
    return m.exports;
  }

  function makeRequire(from) {
    const req = function require(spec) {
      if (typeof spec !== "string") throw new TypeErr("require(): the specifier must be a string");
      return loadCJS(resolve(spec, from, "require"));
    };
    req.resolve = (spec) => resolve(spec, from, "require");
    req.cache = {};
    return req;
  }

  // ---- the ES module texts ---------------------------------------------------

  const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  function facade(key, value) {
    let src = "const m = globalThis[Symbol.for(\"execd.cjs\")](" + jsonStringify(key) + ");\nexport default m;\n";
    if (value !== null && (typeof value === "object" || typeof value === "function")) {
      const ks = keysOf(value);
      let n = 0;
      for (let i = 0; i < ks.length; i++) {
        const k = ks[i];
        if (k === "default" || !IDENT.test(k)) continue;
        src += "const _" + n + " = m[" + jsonStringify(k) + "];\nexport { _" + n + " as " + k + " };\n";
        n++;
      }
    }
    return src;
  }
  defineProperty(global, Symbol.for("execd.cjs"), {
    value: (key) => startsWith(key, "node:") ? builtinModule(strSlice(key, 5)) : mapGet(cjsCache, key).exports,
  });

  // source(name): the ES module text of a built-in or a file under /packages.
  function source(name) {
    if (startsWith(name, "node:")) return facade(name, builtinModule(strSlice(name, 5)));
    const file = stripQuery(name);
    const fmt = formatOf(file);
    if (fmt === "esm") {
      const t = readText(file);
      if (t === null) throw new ErrorCtor("Cannot find module '" + file + "'");
      return t;
    }
    if (fmt === "json") {
      const t = readText(file);
      if (t === null) throw new ErrorCtor("Cannot find module '" + file + "'");
      return "export default (\n" + t + "\n);\n";
    }
    return facade(file, loadCJS(file));
  }

  // ---- Node's small built-ins ----------------------------------------------

  const builtins = new MapCtor();
  function builtinModule(name) {
    if (name === "path/posix") name = "path";
    let m = mapGet(builtins, name);
    if (m !== undefined) return m;
    switch (name) {
      case "path": m = makePath(); break;
      case "events": m = makeEvents(); break;
      case "util": m = makeUtil(); break;
      case "buffer": m = { Buffer: bufferClass(), constants: { MAX_LENGTH: 2 ** 31 - 1 }, kMaxLength: 2 ** 31 - 1 }; break;
      case "url": m = makeURL(); break;
      default: return builtin(name, "");
    }
    mapSet(builtins, name, m);
    return m;
  }

  let proc = null;
  function processShim() {
    if (proc !== null) return proc;
    proc = {
      env: { NODE_ENV: "production" }, argv: ["execd"], platform: "wasi", version: "", versions: {},
      browser: false, exitCode: undefined,
      cwd: () => WORKSPACE,
      nextTick: (fn, ...args) => queueMicrotask(() => fn(...args)),
      emitWarning: () => {},
      hrtime: Object.assign((prev) => {
        const ns = BigInt(Math.round(performance.now() * 1e6));
        const s = Number(ns / 1000000000n), n = Number(ns % 1000000000n);
        if (!prev) return [s, n];
        let ds = s - prev[0], dn = n - prev[1];
        if (dn < 0) { ds--; dn += 1e9; }
        return [ds, dn];
      }, { bigint: () => BigInt(Math.round(performance.now() * 1e6)) }),
    };
    return proc;
  }

  function makePath() {
    function assertPath(p) { if (typeof p !== "string") throw new TypeErr("The \"path\" argument must be of type string"); }
    function norm(p, abs) {
      const parts = strSplit(p, "/"), out = [];
      for (let i = 0; i < parts.length; i++) {
        const s = parts[i];
        if (s === "" || s === ".") continue;
        if (s === "..") {
          if (out.length && out[out.length - 1] !== "..") out.length--;
          else if (!abs) out[out.length] = "..";
          continue;
        }
        out[out.length] = s;
      }
      return arrJoin(out, "/");
    }
    const path = {
      sep: "/", delimiter: ":",
      normalize(p) {
        assertPath(p);
        if (p === "") return ".";
        const abs = p[0] === "/", trail = endsWith(p, "/");
        let r = norm(p, abs);
        if (r === "" && !abs) r = ".";
        if (r !== "" && trail) r += "/";
        return (abs ? "/" : "") + r;
      },
      join(...parts) {
        for (const p of parts) assertPath(p);
        const j = arrJoin(parts.filter((p) => p !== ""), "/");
        return j === "" ? "." : path.normalize(j);
      },
      resolve(...parts) {
        let r = "";
        for (let i = parts.length - 1; i >= 0 && r[0] !== "/"; i--) {
          assertPath(parts[i]);
          if (parts[i] !== "") r = parts[i] + (r === "" ? "" : "/" + r);
        }
        if (r[0] !== "/") r = WORKSPACE + (r === "" ? "" : "/" + r);
        return "/" + norm(r, true);
      },
      isAbsolute(p) { assertPath(p); return p[0] === "/"; },
      dirname(p) {
        assertPath(p);
        if (p === "") return ".";
        let end = p.length;
        while (end > 1 && p[end - 1] === "/") end--;
        const i = strLastIndexOf(strSlice(p, 0, end), "/");
        if (i < 0) return ".";
        if (i === 0) return "/";
        let e = i;
        while (e > 1 && p[e - 1] === "/") e--;
        return strSlice(p, 0, e);
      },
      basename(p, ext) {
        assertPath(p);
        let end = p.length;
        while (end > 1 && p[end - 1] === "/") end--;
        let b = strSlice(p, strLastIndexOf(strSlice(p, 0, end), "/") + 1, end);
        if (ext !== undefined && endsWith(b, ext) && b !== ext) b = strSlice(b, 0, b.length - ext.length);
        return b;
      },
      extname(p) {
        const b = path.basename(p), i = strLastIndexOf(b, ".");
        return i <= 0 ? "" : strSlice(b, i);
      },
      relative(from, to) {
        const f = strSplit(path.resolve(from), "/").filter(Boolean), t = strSplit(path.resolve(to), "/").filter(Boolean);
        let i = 0;
        while (i < f.length && i < t.length && f[i] === t[i]) i++;
        const up = [];
        for (let k = i; k < f.length; k++) up[up.length] = "..";
        return arrJoin(up.concat(t.slice(i)), "/");
      },
      parse(p) {
        assertPath(p);
        const root = p[0] === "/" ? "/" : "", base = path.basename(p), ext = path.extname(p);
        let dir = path.dirname(p);
        if (dir === "." && strIndexOf(p, "/") < 0) dir = "";
        return { root, dir, base, ext, name: ext ? strSlice(base, 0, base.length - ext.length) : base };
      },
      format(o) {
        const dir = o.dir || o.root || "", base = o.base || (o.name || "") + (o.ext || "");
        return dir === "" ? base : dir === o.root ? dir + base : dir + "/" + base;
      },
      toNamespacedPath: (p) => p,
    };
    path.posix = path;
    return freeze(path);
  }

  function makeEvents() {
    const kEvents = Symbol("events");
    function listeners(t) {
      if (!hasOwn(t, kEvents)) defineProperty(t, kEvents, { value: new MapCtor(), writable: true });
      return t[kEvents];
    }
    function EventEmitter() { listeners(this); this._maxListeners = undefined; }
    const P = EventEmitter.prototype;
    function add(t, name, fn, prepend, once) {
      if (typeof fn !== "function") throw new TypeErr("The \"listener\" argument must be of type function");
      const m = listeners(t);
      if (mapHas(m, "newListener") && name !== "newListener") t.emit("newListener", name, fn);
      const l = mapGet(m, name) || [];
      const entry = { fn, once };
      if (prepend) l.unshift(entry); else l.push(entry);
      mapSet(m, name, l);
      return t;
    }
    P.on = P.addListener = function (n, fn) { return add(this, n, fn, false, false); };
    P.prependListener = function (n, fn) { return add(this, n, fn, true, false); };
    P.once = function (n, fn) { return add(this, n, fn, false, true); };
    P.prependOnceListener = function (n, fn) { return add(this, n, fn, true, true); };
    P.off = P.removeListener = function (n, fn) {
      const m = listeners(this), l = mapGet(m, n);
      if (!l) return this;
      for (let i = l.length - 1; i >= 0; i--) {
        if (l[i].fn === fn) {
          l.splice(i, 1);
          if (!l.length) mapDelete(m, n);
          if (mapHas(m, "removeListener")) this.emit("removeListener", n, fn);
          break;
        }
      }
      return this;
    };
    P.removeAllListeners = function (n) {
      const m = listeners(this);
      if (n === undefined) m.clear(); else mapDelete(m, n);
      return this;
    };
    P.emit = function (n, ...args) {
      const l = mapGet(listeners(this), n);
      if (!l || !l.length) {
        if (n === "error") {
          const e = args[0];
          if (e instanceof ErrorCtor) throw e;
          const err = new ErrorCtor("Unhandled error. (" + helpers.inspect(e) + ")");
          err.context = e;
          throw err;
        }
        return false;
      }
      const copy = l.slice();
      for (let i = 0; i < copy.length; i++) {
        const entry = copy[i];
        if (entry.once) this.removeListener(n, entry.fn);
        reflectApply(entry.fn, this, args);
      }
      return true;
    };
    P.listeners = function (n) { return (mapGet(listeners(this), n) || []).map((e) => e.fn); };
    P.rawListeners = P.listeners;
    P.listenerCount = function (n) { return (mapGet(listeners(this), n) || []).length; };
    P.eventNames = function () { return [...listeners(this).keys()]; };
    P.setMaxListeners = function (n) { this._maxListeners = n; return this; };
    P.getMaxListeners = function () { return this._maxListeners === undefined ? EventEmitter.defaultMaxListeners : this._maxListeners; };
    EventEmitter.defaultMaxListeners = 10;
    EventEmitter.EventEmitter = EventEmitter;
    EventEmitter.listenerCount = (e, n) => e.listenerCount(n);
    EventEmitter.once = (emitter, name) => new Promise((res, rej) => {
      const onErr = (e) => { emitter.removeListener(name, onEv); rej(e); };
      const onEv = (...a) => { if (name !== "error") emitter.removeListener("error", onErr); res(a); };
      emitter.once(name, onEv);
      if (name !== "error") emitter.once("error", onErr);
    });
    return EventEmitter;
  }

  function makeUtil() {
    const custom = Symbol.for("nodejs.util.promisify.custom");
    function format(f, ...args) {
      let out = "", i = 0;
      if (typeof f === "string") {
        let last = 0;
        for (let p = 0; p < f.length - 1; p++) {
          if (charCodeAt(f, p) !== 37) continue;
          const c = f[p + 1];
          let rep;
          if (c === "%") rep = "%";
          else if (i >= args.length || strIndexOf("sdifjoOc", c) < 0) continue;
          else {
            const a = args[i++];
            switch (c) {
              case "s": rep = typeof a === "string" ? a : typeof a === "bigint" ? a + "n" : helpers.inspect(a); break;
              case "d": rep = typeof a === "bigint" ? a + "n" : typeof a === "symbol" ? "NaN" : Str(Number(a)); break;
              case "i": rep = typeof a === "bigint" ? a + "n" : Str(parseInt(a, 10)); break;
              case "f": rep = typeof a === "symbol" ? "NaN" : Str(parseFloat(a)); break;
              case "j": try { rep = jsonStringify(a); } catch (e) { rep = "[Circular]"; } break;
              case "c": rep = ""; break;
              default: rep = helpers.inspect(a);
            }
          }
          out += strSlice(f, last, p) + rep;
          last = p + 2;
          p++;
        }
        out += strSlice(f, last);
      } else {
        out = helpers.inspect(f);
      }
      for (; i < args.length; i++) out += " " + (typeof args[i] === "string" ? args[i] : helpers.inspect(args[i]));
      return out;
    }
    function promisify(fn) {
      if (typeof fn !== "function") throw new TypeErr("The \"original\" argument must be of type function");
      if (fn[custom]) return fn[custom];
      return function (...args) {
        return new Promise((res, rej) => {
          reflectApply(fn, this, [...args, (err, ...vals) => err ? rej(err) : res(vals.length > 1 ? vals : vals[0])]);
        });
      };
    }
    promisify.custom = custom;
    const util = {
      format,
      inspect: (v) => helpers.inspect(v),
      promisify,
      callbackify(fn) {
        return function (...args) {
          const cb = args.pop();
          reflectApply(fn, this, args).then((v) => cb(null, v), (e) => cb(e || new ErrorCtor("Promise was rejected with a falsy value")));
        };
      },
      inherits(ctor, superCtor) {
        defineProperty(ctor, "super_", { value: superCtor, writable: true, configurable: true });
        O.setPrototypeOf(ctor.prototype, superCtor.prototype);
      },
      deprecate: (fn) => fn,
      isDeepStrictEqual: (a, b) => deepEqual(a, b),
      types: {
        isDate: (v) => v instanceof Date, isRegExp: (v) => v instanceof RegExp,
        isPromise: (v) => v instanceof Promise, isMap: (v) => v instanceof Map, isSet: (v) => v instanceof Set,
        isTypedArray: (v) => ArrayBuffer.isView(v) && !(v instanceof DataView), isUint8Array: (v) => v instanceof U8,
        isArrayBuffer: (v) => v instanceof ArrayBuffer, isNativeError: (v) => v instanceof ErrorCtor,
      },
      isArray, TextEncoder: global.TextEncoder, TextDecoder: global.TextDecoder,
    };
    util.inspect.custom = Symbol.for("nodejs.util.inspect.custom");
    return util;
  }

  function deepEqual(a, b) {
    if (O.is(a, b)) return true;
    if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
    if (O.getPrototypeOf(a) !== O.getPrototypeOf(b)) return false;
    if (a instanceof Date) return a.getTime() === b.getTime();
    if (a instanceof Map || a instanceof Set) {
      if (a.size !== b.size) return false;
      for (const [k, v] of a.entries()) if (!b.has(k) || (a instanceof Map && !deepEqual(v, b.get(k)))) return false;
      return true;
    }
    const ka = keysOf(a), kb = keysOf(b);
    if (ka.length !== kb.length) return false;
    for (const k of ka) if (!hasOwn(b, k) || !deepEqual(a[k], b[k])) return false;
    return true;
  }

  function makeURL() {
    const URLCtor = global.URL;
    return {
      URL: URLCtor, URLSearchParams: global.URLSearchParams,
      fileURLToPath(u) {
        const url = typeof u === "string" ? new URLCtor(u) : u;
        if (url.protocol !== "file:") throw new TypeErr("The URL must be of scheme file");
        return decodeURIComponent(url.pathname);
      },
      pathToFileURL(p) {
        const abs = builtinModule("path").resolve(p);
        return new URLCtor("file://" + arrJoin(strSplit(abs, "/").map(encodeURIComponent), "/"));
      },
    };
  }

  // ---- Buffer: a Uint8Array with Node's encodings ------------------------------

  let BufferClass = null;
  function bufferClass() {
    if (BufferClass !== null) return BufferClass;
    const enc = new global.TextEncoder(), dec = new global.TextDecoder();
    const HEX = "0123456789abcdef";
    function normEnc(e) {
      const s = e === undefined ? "utf8" : strReplace(Str(e).toLowerCase(), "-", "");
      switch (s) {
        case "utf8": case "hex": case "base64": case "base64url": case "latin1": case "ascii": case "utf16le": return s;
        case "binary": return "latin1";
        case "ucs2": return "utf16le";
      }
      throw new TypeErr("Unknown encoding: " + e);
    }
    class Buffer extends U8 {
      static from(v, encOrOffset, length) {
        if (typeof v === "string") return Buffer._fromString(v, normEnc(encOrOffset));
        if (v instanceof ArrayBuffer) return new Buffer(v, encOrOffset || 0, length === undefined ? v.byteLength - (encOrOffset || 0) : length);
        if (ArrayBuffer.isView(v)) { const b = new Buffer(v.byteLength); b.set(new U8(v.buffer, v.byteOffset, v.byteLength)); return b; }
        if (v && typeof v === "object" && v.type === "Buffer" && isArray(v.data)) return Buffer.from(v.data);
        if (v && typeof v.length === "number") { const b = new Buffer(v.length); for (let i = 0; i < v.length; i++) b[i] = v[i] & 255; return b; }
        throw new TypeErr("The first argument must be a string, Buffer, ArrayBuffer, Array, or array-like object");
      }
      static _fromString(s, e) {
        let bytes;
        switch (e) {
          case "utf8": bytes = enc.encode(s); break;
          case "hex": {
            const n = s.length >> 1;
            bytes = new U8(n);
            let i = 0;
            for (; i < n; i++) {
              const h = parseInt(strSlice(s, 2 * i, 2 * i + 2), 16);
              if (h !== h) break;
              bytes[i] = h;
            }
            bytes = bytes.subarray(0, i);
            break;
          }
          case "base64": case "base64url": {
            let t = strReplace(strReplace(s, /-/g, "+"), /_/g, "/").replace(/[^A-Za-z0-9+/]/g, "");
            while (t.length % 4) t += "=";
            const bin = global.atob(t);
            bytes = new U8(bin.length);
            for (let i = 0; i < bin.length; i++) bytes[i] = charCodeAt(bin, i);
            break;
          }
          case "utf16le":
            bytes = new U8(s.length * 2);
            for (let i = 0; i < s.length; i++) { const c = charCodeAt(s, i); bytes[2 * i] = c & 255; bytes[2 * i + 1] = c >> 8; }
            break;
          default: // latin1, ascii
            bytes = new U8(s.length);
            for (let i = 0; i < s.length; i++) bytes[i] = charCodeAt(s, i) & 255;
        }
        const b = new Buffer(bytes.length);
        b.set(bytes);
        return b;
      }
      static alloc(n, fill, e) { const b = new Buffer(n); if (fill !== undefined) b.fill(fill, 0, n, e); return b; }
      static allocUnsafe(n) { return new Buffer(n); }
      static allocUnsafeSlow(n) { return new Buffer(n); }
      static isBuffer(v) { return v instanceof Buffer; }
      static isEncoding(e) { try { normEnc(e); return true; } catch (x) { return false; } }
      static byteLength(v, e) {
        if (typeof v !== "string") return v.byteLength;
        return Buffer._fromString(v, normEnc(e)).length;
      }
      static concat(list, total) {
        if (total === undefined) { total = 0; for (const b of list) total += b.length; }
        const out = Buffer.alloc(total);
        let off = 0;
        for (const b of list) {
          if (off >= total) break;
          const part = b.length > total - off ? b.subarray(0, total - off) : b;
          out.set(part, off);
          off += part.length;
        }
        return out;
      }
      static compare(a, b) { return a.compare(b); }
      toString(e, start, end) {
        const v = this.subarray(start || 0, end === undefined ? this.length : end);
        switch (normEnc(e)) {
          case "utf8": return dec.decode(v);
          case "hex": { let s = ""; for (let i = 0; i < v.length; i++) s += HEX[v[i] >> 4] + HEX[v[i] & 15]; return s; }
          case "base64": case "base64url": {
            let bin = "";
            for (let i = 0; i < v.length; i++) bin += Str.fromCharCode(v[i]);
            const s = global.btoa(bin);
            return normEnc(e) === "base64" ? s : strReplace(strReplace(strReplace(s, /\+/g, "-"), /\//g, "_"), /=+$/, "");
          }
          case "utf16le": { let s = ""; for (let i = 0; i + 1 < v.length; i += 2) s += Str.fromCharCode(v[i] | (v[i + 1] << 8)); return s; }
          case "ascii": { let s = ""; for (let i = 0; i < v.length; i++) s += Str.fromCharCode(v[i] & 127); return s; }
          default: { let s = ""; for (let i = 0; i < v.length; i++) s += Str.fromCharCode(v[i]); return s; }
        }
      }
      toJSON() { return { type: "Buffer", data: Array.from(this) }; }
      equals(o) { return this.compare(o) === 0; }
      compare(o) {
        const n = Math.min(this.length, o.length);
        for (let i = 0; i < n; i++) if (this[i] !== o[i]) return this[i] < o[i] ? -1 : 1;
        return this.length === o.length ? 0 : this.length < o.length ? -1 : 1;
      }
      slice(start, end) { return this.subarray(start, end); }
      subarray(start, end) {
        const v = U8.prototype.subarray.call(this, start, end);
        return new Buffer(v.buffer, v.byteOffset, v.length);
      }
      write(s, offset, length, e) {
        if (typeof offset === "string") { e = offset; offset = 0; length = undefined; }
        const b = Buffer._fromString(s, normEnc(e));
        offset = offset || 0;
        const n = Math.min(b.length, this.length - offset, length === undefined ? Infinity : length);
        this.set(b.subarray(0, n), offset);
        return n;
      }
      fill(v, start, end, e) {
        if (typeof v === "string") {
          const b = Buffer._fromString(v, normEnc(typeof start === "string" ? start : e));
          if (typeof start === "string") start = 0;
          start = start || 0; end = end === undefined ? this.length : end;
          if (!b.length) return U8.prototype.fill.call(this, 0, start, end), this;
          for (let i = start; i < end; i++) this[i] = b[(i - start) % b.length];
          return this;
        }
        U8.prototype.fill.call(this, v, start, end);
        return this;
      }
      copy(target, ts, ss, se) {
        ts = ts || 0; ss = ss || 0; se = se === undefined ? this.length : se;
        const part = this.subarray(ss, Math.min(se, ss + target.length - ts));
        target.set(part, ts);
        return part.length;
      }
      readUInt8(o = 0) { return this[o]; }
      readUInt16BE(o = 0) { return (this[o] << 8) | this[o + 1]; }
      readUInt16LE(o = 0) { return this[o] | (this[o + 1] << 8); }
      readUInt32BE(o = 0) { return ((this[o] << 24) >>> 0) + ((this[o + 1] << 16) | (this[o + 2] << 8) | this[o + 3]); }
      readUInt32LE(o = 0) { return ((this[o + 3] << 24) >>> 0) + ((this[o + 2] << 16) | (this[o + 1] << 8) | this[o]); }
      readInt32BE(o = 0) { return (this[o] << 24) | (this[o + 1] << 16) | (this[o + 2] << 8) | this[o + 3]; }
      readInt32LE(o = 0) { return (this[o + 3] << 24) | (this[o + 2] << 16) | (this[o + 1] << 8) | this[o]; }
      writeUInt8(v, o = 0) { this[o] = v; return o + 1; }
      writeUInt32BE(v, o = 0) { this[o] = v >>> 24; this[o + 1] = v >>> 16; this[o + 2] = v >>> 8; this[o + 3] = v; return o + 4; }
      writeUInt32LE(v, o = 0) { this[o + 3] = v >>> 24; this[o + 2] = v >>> 16; this[o + 1] = v >>> 8; this[o] = v; return o + 4; }
    }
    Buffer.poolSize = 8192;
    BufferClass = Buffer;
    return Buffer;
  }

  // ---- the cells' require ------------------------------------------------------

  const cellRequire = makeRequire(WORKSPACE + "/<cell>");
  defineProperty(global, "require", { value: cellRequire, writable: true, configurable: true });

  return {
    resolve: (spec, base) => resolve(spec, base, "import"),
    source,
  };
})
