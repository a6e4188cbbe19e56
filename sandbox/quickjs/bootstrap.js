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
(function (write, global) {
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
  // helpers.pending mirrors the number of timers so guest.c can skip the
  // timer calls when there is none.
  const helpers = { pending: 0 };
  const count = () => { helpers.pending = mapSize(timers); };
  function addTimer(fn, ms, args, repeat) {
    if (typeof fn !== "function") throw new TypeErr("callback must be a function");
    ms = mathMax(0, N(ms) || 0);
    const id = nextId++;
    mapSet(timers, id, { fn, args, ms, repeat, due: dateNow() + ms, seq: id });
    count();
    return id;
  }
  function clearTimer(id) { mapDelete(timers, N(id)); count(); }
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
      mapDelete(timers, bestId);
      count();
    }
    reflectApply(best.fn, undefined, best.args);
  }
  function clearTimers() { mapClear(timers); count(); }

  const define = (name, value) =>
    defineProperty(global, name, { value, writable: true, configurable: true });
  define("console", console);
  define("print", out);
  define("setTimeout", (fn, ms, ...args) => addTimer(fn, ms, args, false));
  define("setInterval", (fn, ms, ...args) => addTimer(fn, ms, args, true));
  define("clearTimeout", clearTimer);
  define("clearInterval", clearTimer);
  define("queueMicrotask", (fn) => { promiseThen(resolved, () => fn()); });
  helpers.inspect = inspect;
  helpers.nextTimer = nextTimer;
  helpers.runTimer = runTimer;
  helpers.clearTimers = clearTimers;
  return helpers;
})
