// Evaluated once by guest.c at init. It receives the native write(fd, s)
// and the global object, installs console/print and the timers, and returns
// the helpers the guest keeps for itself (user code may replace console; it
// cannot reach these).
//
// Everything here runs on intrinsics captured now, before any user code:
// code may later replace a built-in (Array.prototype.push, Object.keys, a
// Map iterator, the global name JSON...), and that must change neither how
// values print nor how console and the timers work. So: no global name is
// looked up after init, methods are called through uncurried copies, lists
// are built by string concatenation (an array's push could meet a setter on
// Array.prototype), and nothing iterates with for-of or spread (both go
// through replaceable iterators).
(function (write, global, loopCounts) {
  "use strict";
  const MAX_ITEMS = 100, MAX_DEPTH = 3, MAX_STRING = 10000;

  // uncurry(f)(self, ...args) calls f with this = self; the bound function
  // keeps the original call even if Function.prototype.call is replaced.
  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const O = Object, N = Number, Str = String;
  const reflectApply = Reflect.apply;
  const keysOf = O.keys, descriptorOf = O.getOwnPropertyDescriptor, protoOf = O.getPrototypeOf;
  const defineProperty = O.defineProperty, hasOwn = O.hasOwn, objectIs = O.is;
  const getter = (o, k) => uncurry(descriptorOf(o, k).get);
  const objToString = uncurry(O.prototype.toString);
  const isPrototypeOf = uncurry(O.prototype.isPrototypeOf);
  const fnToString = uncurry(Function.prototype.toString);
  const isArray = Array.isArray;
  const strSlice = uncurry(Str.prototype.slice), strIndexOf = uncurry(Str.prototype.indexOf);
  const charCodeAt = uncurry(Str.prototype.charCodeAt), trimEnd = uncurry(Str.prototype.trimEnd);
  const jsonStringify = JSON.stringify, mathMin = Math.min, mathMax = Math.max;
  const toInt = parseInt, toFloat = parseFloat;
  const TypeErr = TypeError, ErrorProto = Error.prototype, errorToString = uncurry(ErrorProto.toString);
  const dateTime = uncurry(Date.prototype.getTime), dateISO = uncurry(Date.prototype.toISOString);
  const dateNow = Date.now;
  const regexpSource = getter(RegExp.prototype, "source"), regexpFlags = getter(RegExp.prototype, "flags");
  const bufferByteLength = getter(ArrayBuffer.prototype, "byteLength"), isView = ArrayBuffer.isView;
  const typedLength = getter(protoOf(Uint8Array.prototype), "length");
  const MapCtor = Map, mapSize = getter(Map.prototype, "size");
  const mapSet = uncurry(Map.prototype.set), mapGet = uncurry(Map.prototype.get);
  const mapHas = uncurry(Map.prototype.has), mapDelete = uncurry(Map.prototype.delete);
  const mapClear = uncurry(Map.prototype.clear), mapEntries = uncurry(Map.prototype.entries);
  const mapNext = uncurry(protoOf(new Map().entries()).next);
  const SetCtor = Set, setSize = getter(Set.prototype, "size");
  const setAdd = uncurry(Set.prototype.add), setHas = uncurry(Set.prototype.has);
  const setDelete = uncurry(Set.prototype.delete), setValues = uncurry(Set.prototype.values);
  const setNext = uncurry(protoOf(new Set().values()).next);
  const PromiseCtor = Promise, promiseThen = uncurry(Promise.prototype.then);
  // A resolved promise whose own constructor property pins what `then`
  // looks up (the species of Promise.prototype.constructor otherwise).
  const resolved = PromiseCtor.resolve();
  defineProperty(resolved, "constructor", { value: PromiseCtor });

  // is(brandGetter, v): v has the internal slots the getter needs.
  function is(brand, v) {
    try { brand(v); return true; } catch (e) { return false; }
  }

  function quote(s) {
    if (s.length > MAX_STRING)
      return jsonStringify(strSlice(s, 0, MAX_STRING)) + "... (" + (s.length - MAX_STRING) + " more characters)";
    return jsonStringify(s);
  }

  function identChar(c, first) {
    return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 36 || (!first && c >= 48 && c <= 57);
  }

  function key(k) {
    if (k.length === 0) return '""';
    for (let i = 0; i < k.length; i++)
      if (!identChar(charCodeAt(k, i), i === 0)) return jsonStringify(k);
    return k;
  }

  // own(o, k): the value of o's own data property k, or undefined.
  function own(o, k) {
    const d = descriptorOf(o, k);
    return d && hasOwn(d, "value") ? d.value : undefined;
  }

  function fnName(f) {
    let src = "";
    try { src = fnToString(f); } catch (e) { }
    const n = own(f, "name"), name = typeof n === "string" && n ? n : "(anonymous)";
    if (strSlice(src, 0, 5) === "class" && !identChar(charCodeAt(src, 5), false)) return "[class " + name + "]";
    return "[Function: " + name + "]";
  }

  function ctorName(o) {
    try {
      const p = protoOf(o);
      if (p === null) return "[Object: null prototype]";
      const c = own(p, "constructor");
      const n = typeof c === "function" ? own(c, "name") : undefined;
      return typeof n === "string" ? n : "";
    } catch (e) {
      return "";
    }
  }

  // list(items, n, more): "a, b" for n items, and a count of the rest.
  function list(items, n, more) {
    if (more > 0) items += (n ? ", " : "") + "... " + more + " more item" + (more > 1 ? "s" : "");
    return items;
  }

  // seen: the containers being printed, for [Circular].
  const seen = new SetCtor();
  // printers: how objects of execd's own classes print (web.js registers
  // URL and URLSearchParams), by prototype; fn(v, fmt) gives the text.
  const printers = new MapCtor();

  function fmt(v, depth) {
    switch (typeof v) {
      case "string": return quote(v);
      case "number": return objectIs(v, -0) ? "-0" : Str(v);
      case "bigint": return Str(v) + "n";
      case "boolean": return v ? "true" : "false";
      case "undefined": return "undefined";
      case "symbol": return Str(v);
      case "function": return fnName(v);
    }
    if (v === null) return "null";
    if (setHas(seen, v)) return "[Circular]";
    if (mapSize(printers) > 0) {
      let p = null;
      try { p = protoOf(v); } catch (e) { }
      const pr = p !== null && mapGet(printers, p);
      if (pr) {
        setAdd(seen, v);
        try { return pr(v, (x) => fmt(x, depth + 1)); } catch (e) { } finally { setDelete(seen, v); }
      }
    }
    if (isPrototypeOf(ErrorProto, v)) {
      const head = errorToString(v), stack = own(v, "stack");
      return stack ? head + "\n" + trimEnd(Str(stack)) : head;
    }
    if (is(dateTime, v)) {
      const t = dateTime(v);
      return t !== t ? "Invalid Date" : dateISO(v);
    }
    if (is(regexpSource, v)) return "/" + regexpSource(v) + "/" + regexpFlags(v);
    if (objToString(v) === "[object Promise]") return "Promise {}";
    if (is(bufferByteLength, v)) return "ArrayBuffer { byteLength: " + bufferByteLength(v) + " }";
    const arr = isArray(v), typed = isView(v) && is(typedLength, v);
    const map = !arr && is(mapSize, v), set = !arr && !map && is(setSize, v);
    if (depth > MAX_DEPTH) {
      if (arr) return "[Array]";
      const n = ctorName(v);
      return "[" + (n && n[0] !== "[" ? n : "Object") + "]";
    }
    setAdd(seen, v);
    try {
      let items = "", i = 0;
      if (arr || typed) {
        const len = arr ? v.length : typedLength(v), n = mathMin(len, MAX_ITEMS);
        for (; i < n; i++) items += (i ? ", " : "") + (typed || hasOwn(v, i) ? fmt(v[i], depth + 1) : "<empty>");
        items = "[" + list(items, n, len - n) + "]";
        return typed ? ctorName(v) + "(" + len + ") " + items : items;
      }
      if (map || set) {
        const size = map ? mapSize(v) : setSize(v), it = map ? mapEntries(v) : setValues(v), next = map ? mapNext : setNext;
        for (let r = next(it); !r.done && i < MAX_ITEMS; r = next(it), i++) {
          const x = r.value;
          items += (i ? ", " : "") + (map ? fmt(x[0], depth + 1) + " => " + fmt(x[1], depth + 1) : fmt(x, depth + 1));
        }
        return (map ? "Map(" : "Set(") + size + ") {" + list(items, i, size - i) + "}";
      }
      const keys = keysOf(v), n = mathMin(keys.length, MAX_ITEMS);
      for (; i < n; i++) {
        const k = keys[i], d = descriptorOf(v, k);
        let s;
        if (d && !hasOwn(d, "value") && (hasOwn(d, "get") || hasOwn(d, "set")))
          s = d.get && d.set ? "[Getter/Setter]" : d.get ? "[Getter]" : "[Setter]";
        else s = fmt(d ? d.value : undefined, depth + 1);
        items += (i ? ", " : "") + key(k) + ": " + s;
      }
      let name = ctorName(v);
      if (name === "Object") name = "";
      const body = n ? "{" + list(items, n, keys.length - n) + "}" : "{}";
      return name ? name + " " + body : body;
    } finally {
      setDelete(seen, v);
    }
  }

  function inspect(v) {
    return fmt(v, 0);
  }

  // One %-directive of console.log's format string.
  function directive(c, a) {
    switch (c) {
      case "s": return typeof a === "string" ? a : fmt(a, 1);
      case "d": case "i": return typeof a === "bigint" ? Str(a) + "n" : Str(c === "i" ? toInt(a) : N(a));
      case "f": return Str(toFloat(a));
      case "j": try { return jsonStringify(a); } catch (e) { return "[Circular]"; }
      case "c": return "";
      default: return fmt(a, 0); // o, O
    }
  }

  // console.log("%s is %d", ...) substitutions, then the rest joined by spaces.
  function format(args) {
    let out = "", i = 0;
    const first = args[0];
    if (typeof first === "string" && args.length > 1 && strIndexOf(first, "%") >= 0) {
      let last = 0;
      i = 1;
      for (let p = 0; p < first.length - 1; p++) {
        if (charCodeAt(first, p) !== 37) continue; // '%'
        const c = strSlice(first, p + 1, p + 2);
        let rep;
        if (c === "%") rep = "%";
        else if (strIndexOf("sdifjoOc", c) >= 0 && i < args.length) rep = directive(c, args[i++]);
        else continue;
        out += strSlice(first, last, p) + rep;
        last = p + 2;
        p++;
      }
      out += strSlice(first, last);
    }
    for (let j = i; j < args.length; j++)
      out += (j ? " " : "") + (typeof args[j] === "string" ? args[j] : fmt(args[j], 0));
    return out + "\n";
  }

  const out = (...args) => write(1, format(args));
  const err = (...args) => write(2, format(args));
  const labels = new MapCtor(), counts = new MapCtor();
  const console = {
    log: out, info: out, debug: out, trace: out,
    error: err, warn: err,
    dir: (v) => write(1, fmt(v, 0) + "\n"),
    assert: (cond, ...args) => {
      if (!cond) {
        const rest = format(args);
        write(2, "Assertion failed" + (args.length ? ": " + rest : "\n"));
      }
    },
    time: (label = "default") => { mapSet(labels, Str(label), dateNow()); },
    timeEnd: (label = "default") => {
      label = Str(label);
      if (mapHas(labels, label)) {
        out(label + ": " + (dateNow() - mapGet(labels, label)) + "ms");
        mapDelete(labels, label);
      }
    },
    count: (label = "default") => {
      label = Str(label);
      const n = (mapGet(counts, label) || 0) + 1;
      mapSet(counts, label, n);
      out(label + ": " + n);
    },
  };

  // Timers. A cell runs until its promise jobs and its timers are done
  // (guest.c sleeps until the next one is due), so
  // `await new Promise(r => setTimeout(r, 100))` works; a setInterval that
  // is never cleared runs until the run is interrupted.
  const timers = new MapCtor();
  let nextId = 1;
  // helpers.counts (an Int32Array over guest.c's loop_counts, which its
  // event loop reads after every job without a property lookup): [0] the
  // timers that keep the cell going, so guest.c can skip the timer calls
  // when there is none; [1] the unref'd timers (fetch.js's
  // AbortSignal.timeout), which run when due while the cell waits for
  // something else but do not keep it going by themselves; [2] fetch.js's
  // fetches and [3] tools.js's calls in flight.
  const helpers = { counts: loopCounts };
  let unrefd = 0;
  const count = () => { loopCounts[0] = mapSize(timers) - unrefd; loopCounts[1] = unrefd; };
  function addTimer(fn, ms, args, repeat, unref) {
    if (typeof fn !== "function") throw new TypeErr("callback must be a function");
    ms = mathMax(0, N(ms) || 0);
    const id = nextId++;
    mapSet(timers, id, { fn, args, ms, repeat, due: dateNow() + ms, seq: id, unref: !!unref });
    if (unref) unrefd++;
    count();
    return id;
  }
  function clearTimer(id) {
    const t = mapGet(timers, N(id));
    if (t !== undefined && t.unref) unrefd--;
    mapDelete(timers, N(id));
    count();
  }
  // ms until the next timer is due, or -1 if there is none.
  function nextTimer() {
    let min = Infinity;
    const it = mapEntries(timers);
    for (let r = mapNext(it); !r.done; r = mapNext(it)) min = mathMin(min, r.value[1].due);
    return min === Infinity ? -1 : mathMax(0, min - dateNow());
  }
  // Runs the earliest due timer (one per call, so promise jobs it queues
  // run before the next timer, as in browsers and Node).
  function runTimer() {
    const now = dateNow();
    let best = null, bestId = 0;
    const it = mapEntries(timers);
    for (let r = mapNext(it); !r.done; r = mapNext(it)) {
      const id = r.value[0], t = r.value[1];
      if (t.due <= now && (best === null || t.due < best.due || (t.due === best.due && t.seq < best.seq))) {
        best = t;
        bestId = id;
      }
    }
    if (best === null) return;
    if (best.repeat) {
      best.due = now + mathMax(1, best.ms);
      best.seq = nextId++;
    } else {
      clearTimer(bestId);
    }
    reflectApply(best.fn, undefined, best.args);
  }
  function clearTimers() { mapClear(timers); unrefd = 0; count(); }

  const define = (name, value) =>
    defineProperty(global, name, { value, writable: true, configurable: true });
  define("console", console);
  define("print", out);
  define("setTimeout", (fn, ms, ...args) => addTimer(fn, ms, args, false));
  define("setInterval", (fn, ms, ...args) => addTimer(fn, ms, args, true));
  define("clearTimeout", clearTimer);
  define("clearInterval", clearTimer);
  define("queueMicrotask", (fn) => { promiseThen(resolved, () => fn()); });
  // ---- static imports in a cell ------------------------------------------
  // rewriteImports(src): the cell with each top-level import declaration
  // made a call of import(), as the Node REPL does:
  //   import x, { a, b as c } from "m"  ->  const { default: x, a, b: c } = await import("m");
  //   import * as ns from "m"           ->  const ns = await import("m");
  //   import "m"                        ->  await import("m");
  // An import attribute (with { type: "json" }) is dropped: the loader knows
  // a .json file by its name. Only declarations outside every bracket are
  // touched: in a script they are syntax errors, so no valid code changes
  // meaning. Each declaration keeps its line breaks, so later lines keep
  // their numbers. guest.c calls this only for a cell that says "import".
  const isSpace = (c) => c === 32 || c === 9 || c === 10 || c === 13 || c === 11 || c === 12 || c === 0xa0 || c === 0xfeff || c === 0x2028 || c === 0x2029;
  const isIdent = (c, first) => identChar(c, first) || c >= 0x80 || c === 92; // letters beyond ASCII, escapes
  const regexAfter = "(,=:[!&|?{};+-*%<>~^";
  const regexWords = new SetCtor();
  setAdd(regexWords, "return"); setAdd(regexWords, "typeof"); setAdd(regexWords, "case");
  setAdd(regexWords, "do"); setAdd(regexWords, "else"); setAdd(regexWords, "in");
  setAdd(regexWords, "of"); setAdd(regexWords, "new"); setAdd(regexWords, "delete");
  setAdd(regexWords, "void"); setAdd(regexWords, "throw"); setAdd(regexWords, "await"); setAdd(regexWords, "yield");

  function rewriteImports(src) {
    const n = src.length;
    let i = 0, depth = 0, out = "", last = 0, prev = "", changed = false;
    const stack = []; // per open brace: true when it opened a template's ${
    let sp = 0;

    // skip(j): the index of the next significant character from j.
    function skip(j) {
      for (;;) {
        while (j < n && isSpace(charCodeAt(src, j))) j++;
        if (charCodeAt(src, j) === 47 && charCodeAt(src, j + 1) === 47) {
          while (j < n && charCodeAt(src, j) !== 10) j++;
        } else if (charCodeAt(src, j) === 47 && charCodeAt(src, j + 1) === 42) {
          const e = strIndexOf(src, "*/", j + 2);
          j = e < 0 ? n : e + 2;
        } else return j;
      }
    }
    function ident(j) {
      let k = j;
      while (k < n && isIdent(charCodeAt(src, k), k === j)) k++;
      return k;
    }
    // quoted(j): the end of the string literal starting at j, or -1.
    function quoted(j) {
      const q = charCodeAt(src, j);
      for (let k = j + 1; k < n; k++) {
        const c = charCodeAt(src, k);
        if (c === 92) k++;
        else if (c === q) return k + 1;
        else if (c === 10) return -1;
      }
      return -1;
    }
    // template(j): from inside a template at j, the index after its end (a
    // backquote) or after a "${" (then the brace is pushed), or n.
    function template(j) {
      for (; j < n; j++) {
        const c = charCodeAt(src, j);
        if (c === 92) j++;
        else if (c === 96) return j + 1;
        else if (c === 36 && charCodeAt(src, j + 1) === 123) {
          stack[sp++] = true;
          depth++;
          return j + 2;
        }
      }
      return n;
    }
    // word(k, w): the keyword w is at k.
    function word(k, w) {
      return strSlice(src, k, k + w.length) === w && !isIdent(charCodeAt(src, k + w.length), false);
    }
    // declaration(j): from after "import" at j, the declaration's rewrite
    // and its end, or null when it is not one this can rewrite (the
    // engine's syntax error then says what is wrong).
    function declaration(j) {
      let k = skip(j), binds = "", ns = "", c = charCodeAt(src, k);
      if (c !== 34 && c !== 39) { // not import "m"
        let more = true;
        if (isIdent(c, true)) { // default binding
          const e = ident(k);
          binds = "default: " + strSlice(src, k, e);
          k = skip(e);
          more = charCodeAt(src, k) === 44;
          if (more) k = skip(k + 1);
        }
        if (more) {
          c = charCodeAt(src, k);
          if (c === 42) { // * as ns
            k = skip(k + 1);
            if (!word(k, "as")) return null;
            k = skip(k + 2);
            const e = ident(k);
            if (e === k) return null;
            ns = strSlice(src, k, e);
            k = skip(e);
          } else if (c === 123) { // { a, b as c, "d" as e }
            k = skip(k + 1);
            while (charCodeAt(src, k) !== 125) {
              const q = charCodeAt(src, k), str = q === 34 || q === 39;
              const e = str ? quoted(k) : ident(k);
              if (e <= k) return null;
              const name = strSlice(src, k, e);
              let local = name;
              k = skip(e);
              if (word(k, "as")) {
                k = skip(k + 2);
                const f = ident(k);
                if (f === k) return null;
                local = strSlice(src, k, f);
                k = skip(f);
              } else if (str) return null;
              binds += (binds ? ", " : "") + (local === name ? name : name + ": " + local);
              if (charCodeAt(src, k) === 44) k = skip(k + 1);
              else if (charCodeAt(src, k) !== 125) return null;
            }
            k = skip(k + 1);
          } else return null;
        }
        if (!word(k, "from")) return null;
        k = skip(k + 4);
        c = charCodeAt(src, k);
        if (c !== 34 && c !== 39) return null;
      }
      const m1 = quoted(k);
      if (m1 < 0) return null;
      const call = "await import(" + strSlice(src, k, m1) + ")";
      let end = m1, t = skip(m1);
      if (word(t, "with") || word(t, "assert")) { // an import attribute: dropped
        const b = skip(t + (word(t, "with") ? 4 : 6));
        const e = charCodeAt(src, b) === 123 ? strIndexOf(src, "}", b) : -1;
        if (e < 0) return null;
        end = e + 1;
        t = skip(end);
      }
      if (charCodeAt(src, t) === 59) end = t + 1; // ;
      let text;
      if (ns && binds) text = "const " + ns + " = " + call + ", { " + binds + " } = " + ns + ";";
      else if (ns) text = "const " + ns + " = " + call + ";";
      else if (binds) text = "const { " + binds + " } = " + call + ";";
      else text = call + ";";
      for (let x = j; x < end; x++) if (charCodeAt(src, x) === 10) text += "\n";
      return { text, end };
    }

    while (i < n) {
      const c = charCodeAt(src, i);
      if (isSpace(c)) { i++; continue; }
      if (c === 47 && (charCodeAt(src, i + 1) === 47 || charCodeAt(src, i + 1) === 42)) { i = skip(i); continue; }
      if (c === 34 || c === 39) { const e = quoted(i); i = e < 0 ? n : e; prev = "x"; continue; }
      if (c === 96) { i = template(i + 1); prev = "x"; continue; }
      if (c === 47) {
        if (prev === "" || prev === "w" || (prev.length === 1 && strIndexOf(regexAfter, prev) >= 0)) {
          let k = i + 1, cls = false;
          for (; k < n; k++) {
            const d = charCodeAt(src, k);
            if (d === 92) k++;
            else if (d === 91) cls = true;
            else if (d === 93) cls = false;
            else if (d === 47 && !cls) break;
            else if (d === 10) break;
          }
          i = ident(k + 1);
          prev = "x";
        } else {
          i++;
          prev = "/";
        }
        continue;
      }
      if (isIdent(c, true)) {
        const e = ident(i), word = strSlice(src, i, e);
        if (word === "import" && depth === 0 && prev !== ".") {
          const d = charCodeAt(src, skip(e));
          if (d !== 40 && d !== 46) { // not import( or import.meta
            const r = declaration(e);
            if (r !== null) {
              out += strSlice(src, last, i) + r.text;
              i = last = r.end;
              prev = ";";
              changed = true;
              continue;
            }
          }
        }
        prev = setHas(regexWords, word) ? "w" : "x";
        i = e;
        continue;
      }
      if (c >= 48 && c <= 57) { // a number, up to its last digit, letter or dot
        i++;
        while (i < n && (isIdent(charCodeAt(src, i), false) || charCodeAt(src, i) === 46)) i++;
        prev = "x";
        continue;
      }
      if (c === 123 || c === 40 || c === 91) {
        if (c === 123) stack[sp++] = false;
        depth++;
      } else if (c === 125 || c === 41 || c === 93) {
        if (depth > 0) depth--;
        if (c === 125 && sp > 0 && stack[--sp]) { i = template(i + 1); prev = "x"; continue; }
      }
      prev = c === 41 || c === 93 ? "x" : strSlice(src, i, i + 1);
      i++;
    }
    return changed ? out + strSlice(src, last) : src;
  }

  helpers.inspect = inspect;
  helpers.rewriteImports = rewriteImports;
  helpers.setPrinter = (proto, fn) => { mapSet(printers, proto, fn); };
  helpers.nextTimer = nextTimer;
  helpers.runTimer = runTimer;
  helpers.clearTimers = clearTimers;
  helpers.unrefTimer = (fn, ms) => addTimer(fn, ms, [], false, true);
  helpers.clearTimer = clearTimer;
  // dropUnrefd(): the unref'd timers left when a cell is done go with it.
  helpers.dropUnrefd = () => {
    const it = mapEntries(timers), ids = [];
    for (let r = mapNext(it); !r.done; r = mapNext(it)) if (r.value[1].unref) ids[ids.length] = r.value[0];
    for (let i = 0; i < ids.length; i++) clearTimer(ids[i]);
  };
  return helpers;
})
