// Evaluated once by guest.c at init. It receives the native write(fd, s)
// and the global object, installs console/print, and returns the helpers the
// guest keeps for itself (user code may replace console; it cannot reach
// these).
(function (write, global) {
  "use strict";
  const MAX_ITEMS = 100, MAX_DEPTH = 3, MAX_STRING = 10000;
  const objToString = Object.prototype.toString;
  const ident = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

  function quote(s) {
    if (s.length > MAX_STRING)
      return JSON.stringify(s.slice(0, MAX_STRING)) + "... (" + (s.length - MAX_STRING) + " more characters)";
    return JSON.stringify(s);
  }

  function key(k) {
    return ident.test(k) ? k : JSON.stringify(k);
  }

  function fnName(f) {
    let src = "";
    try { src = Function.prototype.toString.call(f); } catch (e) { }
    const n = f.name;
    if (/^class\b/.test(src)) return "[class " + (n || "(anonymous)") + "]";
    return "[Function: " + (n || "(anonymous)") + "]";
  }

  function ctorName(o) {
    try {
      const p = Object.getPrototypeOf(o);
      if (p === null) return "[Object: null prototype]";
      const c = p.constructor;
      return typeof c === "function" && c.name ? c.name : "";
    } catch (e) {
      return "";
    }
  }

  function list(items, more) {
    if (more > 0) items.push("... " + more + " more item" + (more > 1 ? "s" : ""));
    return items.join(", ");
  }

  function fmt(v, depth, seen) {
    switch (typeof v) {
      case "string": return quote(v);
      case "number": return Object.is(v, -0) ? "-0" : String(v);
      case "bigint": return v + "n";
      case "boolean": return String(v);
      case "undefined": return "undefined";
      case "symbol": return v.toString();
      case "function": return fnName(v);
    }
    if (v === null) return "null";
    if (seen.includes(v)) return "[Circular]";
    const tag = objToString.call(v);
    if (v instanceof Error) {
      const head = String(v);
      return v.stack ? head + "\n" + String(v.stack).trimEnd() : head;
    }
    if (tag === "[object Date]") return isNaN(v) ? "Invalid Date" : v.toISOString();
    if (tag === "[object RegExp]") return String(v);
    if (tag === "[object Promise]") return "Promise {}";
    if (v instanceof ArrayBuffer) return "ArrayBuffer { byteLength: " + v.byteLength + " }";
    if (depth > MAX_DEPTH) {
      if (Array.isArray(v)) return "[Array]";
      const n = ctorName(v);
      return "[" + (n && n[0] !== "[" ? n : "Object") + "]";
    }
    seen.push(v);
    try {
      if (Array.isArray(v)) {
        const n = Math.min(v.length, MAX_ITEMS), items = [];
        for (let i = 0; i < n; i++) items.push(i in v ? fmt(v[i], depth + 1, seen) : "<empty>");
        return "[" + list(items, v.length - n) + "]";
      }
      if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
        const n = Math.min(v.length, MAX_ITEMS), items = [];
        for (let i = 0; i < n; i++) items.push(fmt(v[i], depth + 1, seen));
        return ctorName(v) + "(" + v.length + ") [" + list(items, v.length - n) + "]";
      }
      if (v instanceof Map) {
        const items = [];
        let i = 0;
        for (const [k, x] of v) {
          if (i++ >= MAX_ITEMS) break;
          items.push(fmt(k, depth + 1, seen) + " => " + fmt(x, depth + 1, seen));
        }
        return "Map(" + v.size + ") {" + list(items, v.size - items.length) + "}";
      }
      if (v instanceof Set) {
        const items = [];
        let i = 0;
        for (const x of v) {
          if (i++ >= MAX_ITEMS) break;
          items.push(fmt(x, depth + 1, seen));
        }
        return "Set(" + v.size + ") {" + list(items, v.size - items.length) + "}";
      }
      const keys = Object.keys(v), n = Math.min(keys.length, MAX_ITEMS), items = [];
      for (let i = 0; i < n; i++) {
        const k = keys[i], d = Object.getOwnPropertyDescriptor(v, k);
        let s;
        if (d && (d.get || d.set)) s = d.get && d.set ? "[Getter/Setter]" : d.get ? "[Getter]" : "[Setter]";
        else s = fmt(d ? d.value : v[k], depth + 1, seen);
        items.push(key(k) + ": " + s);
      }
      let name = ctorName(v);
      if (name === "Object") name = "";
      const body = items.length ? "{" + list(items, keys.length - n) + "}" : "{}";
      return name ? name + " " + body : body;
    } finally {
      seen.pop();
    }
  }

  function inspect(v) {
    return fmt(v, 0, []);
  }

  // console.log("%s is %d", ...) substitutions, then the rest joined by spaces.
  function format(args) {
    const out = [];
    let i = 0;
    if (typeof args[0] === "string" && args.length > 1 && args[0].includes("%")) {
      i = 1;
      out.push(args[0].replace(/%[sdifjoOc%]/g, (m) => {
        if (m === "%%") return "%";
        if (i >= args.length) return m;
        const a = args[i++];
        switch (m) {
          case "%s": return typeof a === "string" ? a : fmt(a, 1, []);
          case "%d": case "%i": return typeof a === "bigint" ? a + "n" : String(m === "%i" ? parseInt(a) : Number(a));
          case "%f": return String(parseFloat(a));
          case "%j": try { return JSON.stringify(a); } catch (e) { return "[Circular]"; }
          case "%c": return "";
          default: return fmt(a, 0, []);
        }
      }));
    }
    for (; i < args.length; i++) out.push(typeof args[i] === "string" ? args[i] : fmt(args[i], 0, []));
    return out.join(" ") + "\n";
  }

  const out = (...args) => write(1, format(args));
  const err = (...args) => write(2, format(args));
  const timers = new Map(), counts = new Map();
  const console = {
    log: out, info: out, debug: out, trace: out,
    error: err, warn: err,
    dir: (v) => write(1, fmt(v, 0, []) + "\n"),
    assert: (cond, ...args) => { if (!cond) err("Assertion failed" + (args.length ? ":" : ""), ...args); },
    time: (label = "default") => { timers.set(label, Date.now()); },
    timeEnd: (label = "default") => {
      if (timers.has(label)) { out(label + ": " + (Date.now() - timers.get(label)) + "ms"); timers.delete(label); }
    },
    count: (label = "default") => { const n = (counts.get(label) || 0) + 1; counts.set(label, n); out(label + ": " + n); },
  };
  // Timers. A cell runs until its promise jobs and its timers are done
  // (guest.c sleeps until the next one is due), so
  // `await new Promise(r => setTimeout(r, 100))` works; a setInterval that
  // is never cleared runs until the run is interrupted.
  const timers_ = new Map();
  let nextId = 1;
  // helpers.pending mirrors timers_.size so guest.c can skip the timer
  // calls when there is none.
  const helpers = { pending: 0 };
  const count = () => { helpers.pending = timers_.size; };
  function addTimer(fn, ms, args, repeat) {
    if (typeof fn !== "function") throw new TypeError("callback must be a function");
    ms = Math.max(0, Number(ms) || 0);
    const id = nextId++;
    timers_.set(id, { fn, args, ms, repeat, due: Date.now() + ms, seq: id });
    count();
    return id;
  }
  function clearTimer(id) { timers_.delete(Number(id)); count(); }
  // ms until the next timer is due, or -1 if there is none.
  function nextTimer() {
    let min = Infinity;
    for (const t of timers_.values()) min = Math.min(min, t.due);
    return min === Infinity ? -1 : Math.max(0, min - Date.now());
  }
  // Runs the earliest due timer (one per call, so promise jobs it queues
  // run before the next timer, as in browsers and Node).
  function runTimer() {
    const now = Date.now();
    let best = null, bestId = 0;
    for (const [id, t] of timers_) {
      if (t.due <= now && (best === null || t.due < best.due || (t.due === best.due && t.seq < best.seq))) {
        best = t;
        bestId = id;
      }
    }
    if (best === null) return;
    if (best.repeat) {
      best.due = now + Math.max(1, best.ms);
      best.seq = nextId++;
    } else {
      timers_.delete(bestId);
      count();
    }
    best.fn(...best.args);
  }
  function clearTimers() { timers_.clear(); count(); }

  const define = (name, value) =>
    Object.defineProperty(global, name, { value, writable: true, configurable: true });
  define("console", console);
  define("print", out);
  define("setTimeout", (fn, ms, ...args) => addTimer(fn, ms, args, false));
  define("setInterval", (fn, ms, ...args) => addTimer(fn, ms, args, true));
  define("clearTimeout", clearTimer);
  define("clearInterval", clearTimer);
  define("queueMicrotask", (fn) => { Promise.resolve().then(() => fn()); });
  return Object.assign(helpers, { inspect, nextTimer, runTimer, clearTimers });
})
