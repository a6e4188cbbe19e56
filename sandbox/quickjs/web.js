// Evaluated once by guest.c at init, after bootstrap.js: the basics of the
// web platform that code written for browsers and Node expects. It gets
// the guest's natives (UTF-8, base64, entropy from WASI random_get, the
// monotonic clock), the global object and bootstrap.js's helpers (to say
// how URL and URLSearchParams print). Like bootstrap.js it runs on
// intrinsics captured now: code that later replaces a built-in changes its
// own calls, not how these work.
//
// Globals: DOMException, TextEncoder, TextDecoder (UTF-8), atob, btoa,
// structuredClone, crypto.getRandomValues, crypto.randomUUID, performance
// (now, timeOrigin), URL, URLSearchParams (WHATWG URL Standard).
(function (native, global, helpers) {
  "use strict";
  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const O = Object, Str = String, N = Number;
  const defineProperty = O.defineProperty, keysOf = O.keys, freeze = O.freeze;
  const descriptorOf = O.getOwnPropertyDescriptor, protoOf = O.getPrototypeOf, hasOwn = O.hasOwn;
  const getter = (o, k) => uncurry(descriptorOf(o, k).get);
  const TypeErr = TypeError, RangeErr = RangeError, ErrorCtor = Error;
  const objToString = uncurry(O.prototype.toString), isProtoOf = uncurry(O.prototype.isPrototypeOf);
  const strSlice = uncurry(Str.prototype.slice), strIndexOf = uncurry(Str.prototype.indexOf);
  const charCodeAt = uncurry(Str.prototype.charCodeAt), codePointAt = uncurry(Str.prototype.codePointAt);
  const toLower = uncurry(Str.prototype.toLowerCase), strNormalize = uncurry(Str.prototype.normalize);
  const fromCharCode = Str.fromCharCode, fromCodePoint = Str.fromCodePoint;
  const numToString = uncurry(N.prototype.toString);
  const mathFloor = Math.floor, mathPow = Math.pow, dateNow = Date.now;
  const AB = ArrayBuffer, U8 = Uint8Array, isView = AB.isView;
  const TypedArrayProto = protoOf(U8.prototype);
  const typedBuffer = getter(TypedArrayProto, "buffer"), typedOffset = getter(TypedArrayProto, "byteOffset");
  const typedByteLength = getter(TypedArrayProto, "byteLength"), typedLength = getter(TypedArrayProto, "length");
  const typedTag = getter(TypedArrayProto, Symbol.toStringTag), typedSet = uncurry(TypedArrayProto.set);
  const abByteLength = getter(AB.prototype, "byteLength");
  const dvBuffer = getter(DataView.prototype, "buffer"), dvOffset = getter(DataView.prototype, "byteOffset");
  const dvByteLength = getter(DataView.prototype, "byteLength");
  const MapCtor = Map, mapGet = uncurry(Map.prototype.get), mapSet = uncurry(Map.prototype.set);
  const mapHas = uncurry(Map.prototype.has), mapEntries = uncurry(Map.prototype.entries);
  const mapNext = uncurry(protoOf(new Map().entries()).next), mapSize = getter(Map.prototype, "size");
  const SetCtor = Set, setAdd = uncurry(Set.prototype.add), setValues = uncurry(Set.prototype.values);
  const setNext = uncurry(protoOf(new Set().values()).next), setSize = getter(Set.prototype, "size");
  const dateTime = uncurry(Date.prototype.getTime), DateCtor = Date;
  const regexpSource = getter(RegExp.prototype, "source"), regexpFlags = getter(RegExp.prototype, "flags");
  const RegExpCtor = RegExp;
  const boolValue = uncurry(Boolean.prototype.valueOf), numValue = uncurry(N.prototype.valueOf);
  const strValue = uncurry(Str.prototype.valueOf), bigValue = uncurry(BigInt.prototype.valueOf);
  const isArray = Array.isArray, ArrayCtor = Array;
  const iteratorSym = Symbol.iterator, tagSym = Symbol.toStringTag;
  const errorCtors = { Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError };
  const typedCtors = {
    Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
    Float32Array, Float64Array, BigInt64Array, BigUint64Array,
  };
  if (typeof Float16Array === "function") typedCtors.Float16Array = Float16Array;

  function is(brand, v) {
    try { brand(v); return true; } catch (e) { return false; }
  }
  // isTyped(v): v is a typed array (the tag getter answers undefined for
  // anything else, without throwing).
  const isTyped = (v) => typedTag(v) !== undefined;
  const define = (name, value) =>
    defineProperty(global, name, { value, writable: true, configurable: true });
  // methods(C, tag): C's prototype methods non-enumerable, as for built-ins.
  function methods(C, tag) {
    const p = C.prototype, names = O.getOwnPropertyNames(p);
    for (let i = 0; i < names.length; i++) {
      const d = descriptorOf(p, names[i]);
      d.enumerable = false;
      defineProperty(p, names[i], d);
    }
    if (tag) defineProperty(p, tagSym, { value: tag, configurable: true });
  }
  // bytesOf(source): the bytes of a BufferSource (an ArrayBuffer or a view)
  // as a Uint8Array over the same memory.
  function bytesOf(source, what) {
    if (isView(source)) {
      if (isTyped(source)) return new U8(typedBuffer(source), typedOffset(source), typedByteLength(source));
      return new U8(dvBuffer(source), dvOffset(source), dvByteLength(source));
    }
    if (is(abByteLength, source)) return new U8(source);
    throw new TypeErr(what + ": argument must be an ArrayBuffer or an ArrayBuffer view");
  }
  function domString(v) {
    if (typeof v === "symbol") throw new TypeErr("Cannot convert a Symbol value to a string");
    return Str(v);
  }

  // ---- DOMException ---------------------------------------------------
  const legacyCodes = {
    IndexSizeError: 1, HierarchyRequestError: 3, WrongDocumentError: 4, InvalidCharacterError: 5,
    NoModificationAllowedError: 7, NotFoundError: 8, NotSupportedError: 9, InvalidStateError: 11,
    SyntaxError: 12, InvalidModificationError: 13, NamespaceError: 14, InvalidAccessError: 15,
    TypeMismatchError: 17, SecurityError: 18, NetworkError: 19, AbortError: 20, URLMismatchError: 21,
    QuotaExceededError: 22, TimeoutError: 23, InvalidNodeTypeError: 24, DataCloneError: 25,
  };
  class DOMException extends ErrorCtor {
    constructor(message = "", name = "Error") {
      super(domString(message));
      defineProperty(this, "name", { value: domString(name), writable: true, configurable: true });
    }
    get code() {
      return hasOwn(legacyCodes, this.name) ? legacyCodes[this.name] : 0;
    }
  }
  methods(DOMException);
  const keys = keysOf(legacyCodes);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i], c = legacyCodes[k];
    let constName = "";
    for (let j = 0; j < k.length - 5; j++) { // "IndexSizeError" -> "INDEX_SIZE_ERR"
      const ch = charCodeAt(k, j);
      constName += (j && ch >= 65 && ch <= 90 ? "_" : "") + fromCharCode(ch >= 97 ? ch - 32 : ch);
    }
    constName += "_ERR";
    defineProperty(DOMException, constName, { value: c, enumerable: true });
    defineProperty(DOMException.prototype, constName, { value: c, enumerable: true });
  }
  define("DOMException", DOMException);

  // ---- TextEncoder / TextDecoder (Encoding Standard, UTF-8 only) -------
  class TextEncoder {
    get encoding() { return "utf-8"; }
    encode(input = "") { return native.utf8Encode(domString(input)); }
    encodeInto(source, destination) {
      if (typedTag(destination) !== "Uint8Array")
        throw new TypeErr("TextEncoder.encodeInto: the destination must be a Uint8Array");
      const bytes = native.utf8Encode(domString(source)), n = typedLength(bytes);
      const room = typedLength(destination);
      let written = 0, read = 0;
      while (written < n) {
        const b = bytes[written], size = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
        if (written + size > room) break;
        written += size;
        read += size === 4 ? 2 : 1;
      }
      typedSet(destination, new U8(typedBuffer(bytes), 0, written));
      return { read, written };
    }
  }
  methods(TextEncoder, "TextEncoder");

  const utf8Labels = new SetCtor();
  setAdd(utf8Labels, "utf-8"); setAdd(utf8Labels, "utf8"); setAdd(utf8Labels, "unicode-1-1-utf-8");
  setAdd(utf8Labels, "unicode11utf8"); setAdd(utf8Labels, "unicode20utf8"); setAdd(utf8Labels, "x-unicode20utf8");
  const setHas = uncurry(Set.prototype.has);
  const trimAscii = (s) => {
    let a = 0, b = s.length;
    while (a < b && strIndexOf(" \t\n\f\r", s[a]) >= 0) a++;
    while (b > a && strIndexOf(" \t\n\f\r", s[b - 1]) >= 0) b--;
    return strSlice(s, a, b);
  };
  // incompleteTail(u8, n): how many of the last bytes start a UTF-8
  // sequence that the next chunk may complete.
  function incompleteTail(u8, n) {
    for (let k = 1; k <= 3 && k <= n; k++) {
      const b = u8[n - k];
      if (b >= 0x80 && b < 0xc0) continue; // a continuation: look further back
      if (b >= 0xc2 && b <= 0xf4 && (b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2) > k) return k;
      return 0;
    }
    return 0;
  }
  class TextDecoder {
    #fatal; #ignoreBOM; #pending = null; #bomSeen = false;
    constructor(label = "utf-8", options = undefined) {
      const l = toLower(trimAscii(domString(label)));
      if (!setHas(utf8Labels, l))
        throw new RangeErr("TextDecoder: the encoding '" + label + "' is not supported (this sandbox decodes UTF-8 only)");
      this.#fatal = !!(options && options.fatal);
      this.#ignoreBOM = !!(options && options.ignoreBOM);
    }
    get encoding() { return "utf-8"; }
    get fatal() { return this.#fatal; }
    get ignoreBOM() { return this.#ignoreBOM; }
    decode(input = undefined, options = undefined) {
      const stream = !!(options && options.stream);
      let bytes = input === undefined ? new U8(0) : bytesOf(input, "TextDecoder.decode");
      if (this.#pending !== null) {
        const p = this.#pending, all = new U8(typedLength(p) + typedLength(bytes));
        typedSet(all, p);
        typedSet(all, bytes, typedLength(p));
        bytes = all;
        this.#pending = null;
      }
      let n = typedLength(bytes);
      if (stream) {
        const t = incompleteTail(bytes, n);
        if (t) {
          this.#pending = new U8(t);
          typedSet(this.#pending, new U8(typedBuffer(bytes), typedOffset(bytes) + n - t, t));
          n -= t;
          bytes = new U8(typedBuffer(bytes), typedOffset(bytes), n);
        }
      }
      let s = native.utf8Decode(bytes, this.#fatal);
      if (!this.#ignoreBOM && !this.#bomSeen && s.length > 0) {
        this.#bomSeen = true;
        if (charCodeAt(s, 0) === 0xfeff) s = strSlice(s, 1);
      }
      if (!stream) this.#bomSeen = false;
      return s;
    }
  }
  methods(TextDecoder, "TextDecoder");
  define("TextEncoder", TextEncoder);
  define("TextDecoder", TextDecoder);

  // ---- atob / btoa (HTML, forgiving-base64) ----------------------------
  define("btoa", function btoa(data) {
    if (arguments.length < 1) throw new TypeErr("btoa: 1 argument required");
    const r = native.btoa(domString(data));
    if (r === null) throw new DOMException("btoa: the string contains characters outside of the Latin1 range", "InvalidCharacterError");
    return r;
  });
  define("atob", function atob(data) {
    if (arguments.length < 1) throw new TypeErr("atob: 1 argument required");
    const r = native.atob(domString(data));
    if (r === null) throw new DOMException("atob: the string is not correctly encoded", "InvalidCharacterError");
    return r;
  });

  // ---- crypto ------------------------------------------------------------
  const hex = "0123456789abcdef";
  const crypto = {
    getRandomValues(array) {
      if (!isTyped(array)) throw new TypeErr("crypto.getRandomValues: argument must be an integer TypedArray");
      const tag = typedTag(array);
      if (tag === "Float32Array" || tag === "Float64Array" || tag === "Float16Array")
        throw new DOMException("crypto.getRandomValues: the array must be of an integer type", "TypeMismatchError");
      const n = typedByteLength(array);
      if (n > 65536)
        throw new DOMException("crypto.getRandomValues: the array is " + n + " bytes, more than 65536", "QuotaExceededError");
      native.randomFill(new U8(typedBuffer(array), typedOffset(array), n));
      return array;
    },
    randomUUID() {
      const b = new U8(16);
      native.randomFill(b);
      b[6] = (b[6] & 0x0f) | 0x40; // version 4
      b[8] = (b[8] & 0x3f) | 0x80; // variant 10
      let s = "";
      for (let i = 0; i < 16; i++) {
        if (i === 4 || i === 6 || i === 8 || i === 10) s += "-";
        s += hex[b[i] >> 4] + hex[b[i] & 15];
      }
      return s;
    },
  };
  defineProperty(crypto, tagSym, { value: "Crypto", configurable: true });
  define("crypto", crypto);

  // ---- performance -------------------------------------------------------
  const nativeNow = native.now, origin = nativeNow();
  const performance = {
    now() { return nativeNow() - origin; },
    get timeOrigin() { return dateNow() - (nativeNow() - origin); },
    toJSON() { return { timeOrigin: this.timeOrigin }; },
  };
  defineProperty(performance, tagSym, { value: "Performance", configurable: true });
  define("performance", performance);

  // ---- structuredClone (HTML, StructuredSerialize) -----------------------
  function cloneError(what) {
    return new DOMException(what + " could not be cloned.", "DataCloneError");
  }
  // Objects of execd's own classes that, like their platform originals,
  // cannot be cloned.
  const uncloneable = new SetCtor();

  function structuredClone(value, options = undefined) {
    if (arguments.length < 1) throw new TypeErr("structuredClone: 1 argument required");
    const memory = new MapCtor();
    let transfer = [];
    if (options !== undefined && options !== null && options.transfer !== undefined) {
      const list = options.transfer, n = list.length >>> 0;
      for (let i = 0; i < n; i++) {
        const b = list[i];
        if (!is(abByteLength, b)) throw cloneError("A value in the transfer list");
        transfer[i] = b;
      }
    }
    function copyBuffer(b) {
      if (mapHas(memory, b)) return mapGet(memory, b);
      const n = abByteLength(b), c = new AB(n);
      typedSet(new U8(c), new U8(b));
      mapSet(memory, b, c);
      return c;
    }
    function clone(v) {
      const t = typeof v;
      if (t === "symbol") throw cloneError("Symbol()");
      if (t === "function") throw cloneError(Str(v.name || "function") + "()");
      if (t !== "object" || v === null) return v;
      if (mapHas(memory, v)) return mapGet(memory, v);
      let c;
      if (is(boolValue, v)) c = new Boolean(boolValue(v));
      else if (is(numValue, v)) c = new Number(numValue(v));
      else if (is(strValue, v)) c = new String(strValue(v));
      else if (is(bigValue, v)) c = O(bigValue(v));
      else if (is(dateTime, v)) c = new DateCtor(dateTime(v));
      else if (is(regexpSource, v)) c = new RegExpCtor(regexpSource(v), regexpFlags(v));
      else if (is(abByteLength, v)) return copyBuffer(v);
      else if (isView(v)) {
        if (isTyped(v)) {
          const C = typedCtors[typedTag(v)];
          c = new C(copyBuffer(typedBuffer(v)), typedOffset(v), typedLength(v));
        } else c = new DataView(copyBuffer(dvBuffer(v)), dvOffset(v), dvByteLength(v));
      } else if (is(mapSize, v)) {
        c = new MapCtor();
        mapSet(memory, v, c);
        const pairs = [], it = mapEntries(v);
        let n = 0;
        for (let r = mapNext(it); !r.done; r = mapNext(it)) pairs[n++] = r.value;
        for (let i = 0; i < n; i++) mapSet(c, clone(pairs[i][0]), clone(pairs[i][1]));
        return c;
      } else if (is(setSize, v)) {
        c = new SetCtor();
        mapSet(memory, v, c);
        const items = [], it = setValues(v);
        let n = 0;
        for (let r = setNext(it); !r.done; r = setNext(it)) items[n++] = r.value;
        for (let i = 0; i < n; i++) setAdd(c, clone(items[i]));
        return c;
      } else if (isProtoOf(ErrorCtor.prototype, v) && !isProtoOf(DOMException.prototype, v)) {
        const name = v.name, C = typeof name === "string" && hasOwn(errorCtors, name) ? errorCtors[name] : ErrorCtor;
        const d = descriptorOf(v, "message");
        c = d && hasOwn(d, "value") ? new C(Str(d.value)) : new C();
        const st = descriptorOf(v, "stack");
        if (st && hasOwn(st, "value")) defineProperty(c, "stack", { value: st.value, writable: true, configurable: true });
        const cause = descriptorOf(v, "cause");
        mapSet(memory, v, c);
        if (cause && hasOwn(cause, "value"))
          defineProperty(c, "cause", { value: clone(cause.value), writable: true, configurable: true });
        return c;
      } else {
        const tag = objToString(v);
        if (tag === "[object Promise]" || tag === "[object WeakMap]" || tag === "[object WeakSet]" ||
          tag === "[object WeakRef]" || tag === "[object Symbol]" || tag === "[object Generator]" ||
          setHas(uncloneable, protoOf(v)))
          throw cloneError(tag === "[object Object]" ? "#<" + (v.constructor && v.constructor.name || "Object") + ">" : tag);
        c = isArray(v) ? new ArrayCtor(v.length) : {};
        mapSet(memory, v, c);
        const ks = keysOf(v);
        for (let i = 0; i < ks.length; i++) {
          const k = ks[i];
          defineProperty(c, k, { value: clone(v[k]), writable: true, enumerable: true, configurable: true });
        }
        return c;
      }
      mapSet(memory, v, c);
      return c;
    }
    const result = clone(value);
    // A transferred buffer moves: the clone has its bytes, the original
    // is detached.
    for (let i = 0; i < transfer.length; i++) native.detach(transfer[i]);
    return result;
  }
  define("structuredClone", structuredClone);

  // ---- URL and URLSearchParams (WHATWG URL Standard) ----------------------
  const special = { "ftp:": 21, "file:": null, "http:": 80, "https:": 443, "ws:": 80, "wss:": 443 };
  const isSpecialScheme = (s) => hasOwn(special, s + ":");
  const isAlpha = (c) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
  const isDigit = (c) => c >= 48 && c <= 57;
  const isHex = (c) => isDigit(c) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
  const hexVal = (c) => (c <= 57 ? c - 48 : (c | 32) - 87);

  // Percent-encode sets, as predicates on a code point.
  const c0 = (c) => c < 0x20 || c > 0x7e;
  const fragmentSet = (c) => c0(c) || c === 32 || c === 34 || c === 60 || c === 62 || c === 96;
  const querySet = (c) => c0(c) || c === 32 || c === 34 || c === 35 || c === 60 || c === 62;
  const specialQuerySet = (c) => querySet(c) || c === 39;
  // (without ^, which the Standard's latest text adds but Node and browsers
  // do not encode yet)
  const pathSet = (c) => querySet(c) || c === 63 || c === 96 || c === 123 || c === 125;
  const userinfoSet = (c) => pathSet(c) || c === 47 || c === 58 || c === 59 || c === 61 || c === 64 ||
    (c >= 91 && c <= 93) || c === 124;
  const componentSet = (c) => userinfoSet(c) || (c >= 36 && c <= 38) || c === 43 || c === 44;
  const formSet = (c) => componentSet(c) || c === 33 || (c >= 39 && c <= 41) || c === 126;

  const HEX = "0123456789ABCDEF";
  const pct = (b) => "%" + HEX[b >> 4] + HEX[b & 15];
  // utf8Pct(cp): the percent-encoded UTF-8 bytes of code point cp.
  function utf8Pct(cp) {
    if (cp < 0x80) return pct(cp);
    if (cp < 0x800) return pct(0xc0 | (cp >> 6)) + pct(0x80 | (cp & 63));
    if (cp < 0x10000) return pct(0xe0 | (cp >> 12)) + pct(0x80 | ((cp >> 6) & 63)) + pct(0x80 | (cp & 63));
    return pct(0xf0 | (cp >> 18)) + pct(0x80 | ((cp >> 12) & 63)) + pct(0x80 | ((cp >> 6) & 63)) + pct(0x80 | (cp & 63));
  }
  // encodeSet(s, set, spaceAsPlus): s with the code points in set
  // percent-encoded as UTF-8 (lone surrogates as U+FFFD).
  function encodeSet(s, set, spaceAsPlus) {
    let out = "", i = 0;
    const n = s.length;
    while (i < n) {
      let cp = codePointAt(s, i);
      const w = cp > 0xffff ? 2 : 1;
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
      if (spaceAsPlus && cp === 32) out += "+";
      else if (set(cp)) out += utf8Pct(cp);
      else out += s[i];
      i += w;
    }
    return out;
  }
  // percentDecode(s): s with %XX sequences decoded as UTF-8 (invalid bytes
  // as U+FFFD).
  function percentDecode(s) {
    if (strIndexOf(s, "%") < 0) return s;
    const b = native.utf8Encode(s), n = typedLength(b), out = new U8(n);
    let o = 0;
    for (let i = 0; i < n; i++) {
      const c = b[i];
      if (c === 37 && i + 2 < n && isHex(b[i + 1]) && isHex(b[i + 2])) {
        out[o++] = hexVal(b[i + 1]) * 16 + hexVal(b[i + 2]);
        i += 2;
      } else out[o++] = c;
    }
    return native.utf8Decode(new U8(typedBuffer(out), 0, o), false);
  }

  // ---- hosts ----
  const forbiddenHost = (c) => c === 0 || c === 9 || c === 10 || c === 13 || c === 32 || c === 35 || c === 47 ||
    c === 58 || c === 60 || c === 62 || c === 63 || c === 64 || c === 91 || c === 92 || c === 93 || c === 94 || c === 124;
  const forbiddenDomain = (c) => forbiddenHost(c) || c <= 0x1f || c === 37 || c === 0x7f;

  function parseIPv4Number(s) {
    if (s === "") return NaN;
    let radix = 10;
    if (s.length >= 2 && s[0] === "0" && (s[1] === "x" || s[1] === "X")) { s = strSlice(s, 2); radix = 16; }
    else if (s.length >= 2 && s[0] === "0") { s = strSlice(s, 1); radix = 8; }
    if (s === "") return 0;
    let v = 0;
    for (let i = 0; i < s.length; i++) {
      const c = charCodeAt(s, i);
      const d = radix === 16 && isHex(c) ? hexVal(c) : isDigit(c) && c - 48 < radix ? c - 48 : -1;
      if (d < 0) return NaN;
      v = v * radix + d;
    }
    return v;
  }
  function splitDots(s) {
    const parts = [];
    let start = 0, n = 0;
    for (let i = 0; i <= s.length; i++) {
      if (i === s.length || s[i] === ".") { parts[n++] = strSlice(s, start, i); start = i + 1; }
    }
    return parts;
  }
  function endsInNumber(s) {
    const parts = splitDots(s);
    let n = parts.length;
    if (parts[n - 1] === "") { if (n === 1) return false; n--; }
    const last = parts[n - 1];
    if (last !== "") {
      let digits = true;
      for (let i = 0; i < last.length; i++) if (!isDigit(charCodeAt(last, i))) digits = false;
      if (digits) return true;
    }
    return parseIPv4Number(last) === parseIPv4Number(last); // not NaN
  }
  // parseIPv4(s): the address as a number, or null.
  function parseIPv4(s) {
    const parts = splitDots(s);
    let n = parts.length;
    if (parts[n - 1] === "" && n > 1) n--;
    if (n > 4) return null;
    const nums = [];
    for (let i = 0; i < n; i++) {
      const v = parseIPv4Number(parts[i]);
      if (v !== v) return null;
      nums[i] = v;
    }
    for (let i = 0; i < n - 1; i++) if (nums[i] > 255) return null;
    if (nums[n - 1] >= mathPow(256, 5 - n)) return null;
    let v = nums[n - 1];
    for (let i = 0; i < n - 1; i++) v += nums[i] * mathPow(256, 3 - i);
    return v;
  }
  function serializeIPv4(v) {
    let out = "";
    for (let i = 0; i < 4; i++) {
      out = Str(v % 256) + (i ? "." + out : "");
      v = mathFloor(v / 256);
    }
    return out;
  }
  // parseIPv6(s): the eight 16-bit pieces, or null.
  function parseIPv6(s) {
    const a = [0, 0, 0, 0, 0, 0, 0, 0];
    let piece = 0, compress = -1, p = 0;
    const n = s.length, at = (i) => (i < n ? charCodeAt(s, i) : -1);
    if (at(p) === 58) {
      if (at(p + 1) !== 58) return null;
      p += 2;
      compress = ++piece;
    }
    while (at(p) !== -1) {
      if (piece === 8) return null;
      if (at(p) === 58) {
        if (compress !== -1) return null;
        p++;
        compress = ++piece;
        continue;
      }
      let value = 0, length = 0;
      while (length < 4 && isHex(at(p))) { value = value * 16 + hexVal(at(p)); p++; length++; }
      if (at(p) === 46) { // an IPv4 address in the last two pieces
        if (length === 0) return null;
        p -= length;
        if (piece > 6) return null;
        let seen = 0;
        while (at(p) !== -1) {
          let v4 = null;
          if (seen > 0) {
            if (at(p) === 46 && seen < 4) p++;
            else return null;
          }
          if (!isDigit(at(p))) return null;
          while (isDigit(at(p))) {
            const d = at(p) - 48;
            if (v4 === null) v4 = d;
            else if (v4 === 0) return null;
            else v4 = v4 * 10 + d;
            if (v4 > 255) return null;
            p++;
          }
          a[piece] = a[piece] * 256 + v4;
          seen++;
          if (seen === 2 || seen === 4) piece++;
        }
        if (seen !== 4) return null;
        break;
      } else if (at(p) === 58) {
        p++;
        if (at(p) === -1) return null;
      } else if (at(p) !== -1) return null;
      a[piece++] = value;
    }
    if (compress !== -1) {
      let swaps = piece - compress;
      piece = 7;
      while (piece !== 0 && swaps > 0) {
        const t = a[compress + swaps - 1];
        a[compress + swaps - 1] = a[piece];
        a[piece] = t;
        piece--;
        swaps--;
      }
    } else if (piece !== 8) return null;
    return a;
  }
  function serializeIPv6(a) {
    let best = -1, bestLen = 1;
    for (let i = 0; i < 8;) {
      if (a[i] !== 0) { i++; continue; }
      let j = i;
      while (j < 8 && a[j] === 0) j++;
      if (j - i > bestLen) { best = i; bestLen = j - i; }
      i = j;
    }
    let out = "";
    for (let i = 0; i < 8; i++) {
      if (i === best) {
        out += i === 0 ? "::" : ":";
        i += bestLen - 1;
        continue;
      }
      out += numToString(a[i], 16) + (i < 7 ? ":" : "");
    }
    return out;
  }
  // Punycode (RFC 3492), for the labels of a domain beyond ASCII.
  function punycode(label) {
    const cps = [];
    let n = 0;
    for (let i = 0; i < label.length;) {
      const cp = codePointAt(label, i);
      cps[n++] = cp;
      i += cp > 0xffff ? 2 : 1;
    }
    let out = "", basic = 0;
    for (let i = 0; i < n; i++) if (cps[i] < 0x80) { out += fromCharCode(cps[i]); basic++; }
    let h = basic, bias = 72, delta = 0, next = 128;
    if (basic) out += "-";
    const digit = (d) => fromCharCode(d < 26 ? d + 97 : d + 22);
    const adapt = (d, count, first) => {
      d = first ? mathFloor(d / 700) : d >> 1;
      d += mathFloor(d / count);
      let k = 0;
      while (d > 455) { d = mathFloor(d / 35); k += 36; }
      return k + mathFloor((36 * d) / (d + 38));
    };
    while (h < n) {
      let m = 0x7fffffff;
      for (let i = 0; i < n; i++) if (cps[i] >= next && cps[i] < m) m = cps[i];
      delta += (m - next) * (h + 1);
      next = m;
      for (let i = 0; i < n; i++) {
        if (cps[i] < next) delta++;
        if (cps[i] === next) {
          let q = delta;
          for (let k = 36; ; k += 36) {
            const t = k <= bias ? 1 : k >= bias + 26 ? 26 : k - bias;
            if (q < t) break;
            out += digit(t + ((q - t) % (36 - t)));
            q = mathFloor((q - t) / (36 - t));
          }
          out += digit(q);
          bias = adapt(delta, h + 1, h === basic);
          delta = 0;
          h++;
        }
      }
      delta++;
      next++;
    }
    return "xn--" + out;
  }
  // domainToASCII(d): lower case, full stops of other scripts as ".",
  // labels beyond ASCII in Punycode. A subset of UTS #46: no mapping table
  // beyond case folding and NFC (see the README). null on failure.
  function domainToASCII(d) {
    let s = toLower(strNormalize(d, "NFC")), ascii = true;
    let t = "";
    for (let i = 0; i < s.length; i++) {
      const c = charCodeAt(s, i);
      if (c === 0x3002 || c === 0xff0e || c === 0xff61) t += ".";
      else t += s[i];
      if (c >= 0x80) ascii = false;
    }
    if (ascii) return t;
    const labels = splitDots(t);
    let out = "";
    for (let i = 0; i < labels.length; i++) {
      let asciiLabel = true;
      for (let j = 0; j < labels[i].length; j++) if (charCodeAt(labels[i], j) >= 0x80) asciiLabel = false;
      out += (i ? "." : "") + (asciiLabel ? labels[i] : punycode(labels[i]));
    }
    return out;
  }
  // parseHost(s, notSpecial): the serialized host, or null on failure.
  function parseHost(s, notSpecial) {
    if (s[0] === "[") {
      if (s[s.length - 1] !== "]") return null;
      const a = parseIPv6(strSlice(s, 1, -1));
      return a === null ? null : "[" + serializeIPv6(a) + "]";
    }
    if (notSpecial) {
      for (let i = 0; i < s.length; i++) if (forbiddenHost(charCodeAt(s, i))) return null;
      return encodeSet(s, c0, false);
    }
    const domain = percentDecode(s), ascii = domainToASCII(domain);
    if (ascii === null || ascii === "") return null;
    for (let i = 0; i < ascii.length; i++) if (forbiddenDomain(charCodeAt(ascii, i))) return null;
    if (endsInNumber(ascii)) {
      const v = parseIPv4(ascii);
      return v === null ? null : serializeIPv4(v);
    }
    return ascii;
  }

  // ---- the basic URL parser ----
  const isSingleDot = (s) => s === "." || toLower(s) === "%2e";
  const isDoubleDot = (s) => {
    s = toLower(s);
    return s === ".." || s === ".%2e" || s === "%2e." || s === "%2e%2e";
  };
  const isWindowsDrive = (s) => s.length === 2 && isAlpha(charCodeAt(s, 0)) && (s[1] === ":" || s[1] === "|");
  const isNormalizedDrive = (s) => s.length === 2 && isAlpha(charCodeAt(s, 0)) && s[1] === ":";
  const startsWithDrive = (s, p) => {
    if (s.length - p < 2 || !isWindowsDrive(strSlice(s, p, p + 2))) return false;
    if (s.length - p === 2) return true;
    const c = s[p + 2];
    return c === "/" || c === "\\" || c === "?" || c === "#";
  };
  function newRecord() {
    return { scheme: "", username: "", password: "", host: null, port: null, path: [], opaque: null, query: null, fragment: null };
  }
  function copyRecord(r) {
    const c = newRecord();
    c.scheme = r.scheme; c.username = r.username; c.password = r.password; c.host = r.host;
    c.port = r.port; c.opaque = r.opaque; c.query = r.query; c.fragment = r.fragment;
    for (let i = 0; i < r.path.length; i++) c.path[i] = r.path[i];
    return c;
  }
  function shortenPath(u) {
    const p = u.path;
    if (u.scheme === "file" && p.length === 1 && isNormalizedDrive(p[0])) return;
    if (p.length) p.length--;
  }
  const SCHEME_START = 1, SCHEME = 2, NO_SCHEME = 3, SPECIAL_RELATIVE_OR_AUTHORITY = 4, PATH_OR_AUTHORITY = 5,
    RELATIVE = 6, RELATIVE_SLASH = 7, SPECIAL_AUTHORITY_SLASHES = 8, SPECIAL_AUTHORITY_IGNORE_SLASHES = 9,
    AUTHORITY = 10, HOST = 11, HOSTNAME = 12, PORT = 13, FILE = 14, FILE_SLASH = 15, FILE_HOST = 16,
    PATH_START = 17, PATH = 18, OPAQUE_PATH = 19, QUERY = 20, FRAGMENT = 21;

  // parse(input, base, url, override): the basic URL parser (URL Standard,
  // section 4.4). Without url it returns a new record or null on failure;
  // with url and a state override it changes url in place (a setter) and
  // returns false when it gave up.
  function parse(input, base, url, override) {
    if (!url) {
      url = newRecord();
      // strip leading and trailing C0 controls and spaces
      let a = 0, b = input.length;
      while (a < b && charCodeAt(input, a) <= 32) a++;
      while (b > a && charCodeAt(input, b - 1) <= 32) b--;
      input = strSlice(input, a, b);
    }
    let s = "";
    for (let i = 0; i < input.length; i++) { // drop tabs and newlines
      const c = charCodeAt(input, i);
      if (c !== 9 && c !== 10 && c !== 13) s += input[i];
    }
    input = s;
    let state = override || SCHEME_START, buffer = "", atSign = false, insideBrackets = false, passwordToken = false;
    const n = input.length;
    // astral(p): the code point at p as a string, and p past its low
    // surrogate (for the states that percent-encode what they read).
    let at = 0;
    const astral = (p) => {
      const w = codePointAt(input, p) > 0xffff ? 2 : 1;
      at = p + w - 1;
      return strSlice(input, p, p + w);
    };
    for (let p = 0; p <= n; p++) {
      const c = p < n ? charCodeAt(input, p) : -1, ch = p < n ? input[p] : "";
      switch (state) {
        case SCHEME_START:
          if (c !== -1 && isAlpha(c)) { buffer += toLower(ch); state = SCHEME; }
          else if (!override) { state = NO_SCHEME; p--; }
          else return false;
          break;
        case SCHEME:
          if (c !== -1 && (isAlpha(c) || isDigit(c) || c === 43 || c === 45 || c === 46)) buffer += toLower(ch);
          else if (c === 58) {
            if (override) {
              if (isSpecialScheme(url.scheme) !== isSpecialScheme(buffer)) return false;
              if ((url.username !== "" || url.password !== "" || url.port !== null) && buffer === "file") return false;
              if (url.scheme === "file" && url.host === "") return false;
            }
            url.scheme = buffer;
            if (override) {
              if (url.port === special[url.scheme + ":"]) url.port = null;
              return true;
            }
            buffer = "";
            if (url.scheme === "file") state = FILE;
            else if (isSpecialScheme(url.scheme) && base && base.scheme === url.scheme) state = SPECIAL_RELATIVE_OR_AUTHORITY;
            else if (isSpecialScheme(url.scheme)) state = SPECIAL_AUTHORITY_SLASHES;
            else if (input[p + 1] === "/") { state = PATH_OR_AUTHORITY; p++; }
            else { url.opaque = ""; state = OPAQUE_PATH; }
          } else if (!override) { buffer = ""; state = NO_SCHEME; p = -1; }
          else return false;
          break;
        case NO_SCHEME:
          if (!base || (base.opaque !== null && c !== 35)) return null;
          if (base.opaque !== null && c === 35) {
            url.scheme = base.scheme; url.opaque = base.opaque; url.query = base.query;
            url.fragment = ""; state = FRAGMENT;
          } else if (base.scheme !== "file") { state = RELATIVE; p--; }
          else { state = FILE; p--; }
          break;
        case SPECIAL_RELATIVE_OR_AUTHORITY:
          if (c === 47 && input[p + 1] === "/") { state = SPECIAL_AUTHORITY_IGNORE_SLASHES; p++; }
          else { state = RELATIVE; p--; }
          break;
        case PATH_OR_AUTHORITY:
          if (c === 47) state = AUTHORITY;
          else { state = PATH; p--; }
          break;
        case RELATIVE:
          url.scheme = base.scheme;
          if (c === 47) state = RELATIVE_SLASH;
          else if (isSpecialScheme(url.scheme) && c === 92) state = RELATIVE_SLASH;
          else {
            url.username = base.username; url.password = base.password; url.host = base.host;
            url.port = base.port; url.path = copyRecord(base).path; url.query = base.query;
            if (c === 63) { url.query = ""; state = QUERY; }
            else if (c === 35) { url.fragment = ""; state = FRAGMENT; }
            else if (c !== -1) { url.query = null; shortenPath(url); state = PATH; p--; }
          }
          break;
        case RELATIVE_SLASH:
          if (isSpecialScheme(url.scheme) && (c === 47 || c === 92)) state = SPECIAL_AUTHORITY_IGNORE_SLASHES;
          else if (c === 47) state = AUTHORITY;
          else {
            url.username = base.username; url.password = base.password; url.host = base.host;
            url.port = base.port; state = PATH; p--;
          }
          break;
        case SPECIAL_AUTHORITY_SLASHES:
          if (c === 47 && input[p + 1] === "/") { state = SPECIAL_AUTHORITY_IGNORE_SLASHES; p++; }
          else { state = SPECIAL_AUTHORITY_IGNORE_SLASHES; p--; }
          break;
        case SPECIAL_AUTHORITY_IGNORE_SLASHES:
          if (c !== 47 && c !== 92) { state = AUTHORITY; p--; }
          break;
        case AUTHORITY:
          if (c === 64) {
            if (atSign) buffer = "%40" + buffer;
            atSign = true;
            for (let i = 0; i < buffer.length; i++) {
              if (buffer[i] === ":" && !passwordToken) { passwordToken = true; continue; }
              const w = codePointAt(buffer, i) > 0xffff ? 2 : 1;
              const e = encodeSet(strSlice(buffer, i, i + w), userinfoSet, false);
              i += w - 1;
              if (passwordToken) url.password += e;
              else url.username += e;
            }
            buffer = "";
          } else if (c === -1 || c === 47 || c === 63 || c === 35 || (isSpecialScheme(url.scheme) && c === 92)) {
            if (atSign && buffer === "") return null;
            p -= buffer.length + 1;
            buffer = "";
            state = HOST;
          } else buffer += ch;
          break;
        case HOST:
        case HOSTNAME:
          if (override && url.scheme === "file") { p--; state = FILE_HOST; }
          else if (c === 58 && !insideBrackets) {
            if (buffer === "") return override ? false : null;
            if (override === HOSTNAME) return false;
            const h = parseHost(buffer, !isSpecialScheme(url.scheme));
            if (h === null) return override ? false : null;
            url.host = h; buffer = ""; state = PORT;
          } else if (c === -1 || c === 47 || c === 63 || c === 35 || (isSpecialScheme(url.scheme) && c === 92)) {
            p--;
            if (isSpecialScheme(url.scheme) && buffer === "") return override ? false : null;
            if (override && buffer === "" && (url.username !== "" || url.password !== "" || url.port !== null)) return false;
            const h = parseHost(buffer, !isSpecialScheme(url.scheme));
            if (h === null) return override ? false : null;
            url.host = h; buffer = ""; state = PATH_START;
            if (override) return true;
          } else {
            if (c === 91) insideBrackets = true;
            if (c === 93) insideBrackets = false;
            buffer += ch;
          }
          break;
        case PORT:
          if (c !== -1 && isDigit(c)) buffer += ch;
          else if (c === -1 || c === 47 || c === 63 || c === 35 || (isSpecialScheme(url.scheme) && c === 92) || override) {
            if (buffer !== "") {
              const port = N(buffer);
              if (port > 65535) return override ? false : null;
              url.port = special[url.scheme + ":"] === port ? null : port;
              buffer = "";
              if (override) return true;
            }
            if (override) return false;
            state = PATH_START; p--;
          } else return override ? false : null;
          break;
        case FILE:
          url.scheme = "file";
          url.host = "";
          if (c === 47 || c === 92) state = FILE_SLASH;
          else if (base && base.scheme === "file") {
            url.host = base.host; url.path = copyRecord(base).path; url.query = base.query;
            if (c === 63) { url.query = ""; state = QUERY; }
            else if (c === 35) { url.fragment = ""; state = FRAGMENT; }
            else if (c !== -1) {
              url.query = null;
              if (!startsWithDrive(input, p)) shortenPath(url);
              else url.path = [];
              state = PATH; p--;
            }
          } else { state = PATH; p--; }
          break;
        case FILE_SLASH:
          if (c === 47 || c === 92) state = FILE_HOST;
          else {
            if (base && base.scheme === "file") {
              url.host = base.host;
              if (!startsWithDrive(input, p) && base.path.length && isNormalizedDrive(base.path[0]))
                url.path[url.path.length] = base.path[0];
            }
            state = PATH; p--;
          }
          break;
        case FILE_HOST:
          if (c === -1 || c === 47 || c === 92 || c === 63 || c === 35) {
            p--;
            if (!override && isWindowsDrive(buffer)) state = PATH;
            else if (buffer === "") {
              url.host = "";
              if (override) return true;
              state = PATH_START;
            } else {
              let h = parseHost(buffer, false);
              if (h === null) return override ? false : null;
              if (h === "localhost") h = "";
              url.host = h;
              if (override) return true;
              buffer = ""; state = PATH_START;
            }
          } else buffer += ch;
          break;
        case PATH_START:
          if (isSpecialScheme(url.scheme)) { state = PATH; if (c !== 47 && c !== 92) p--; }
          else if (!override && c === 63) { url.query = ""; state = QUERY; }
          else if (!override && c === 35) { url.fragment = ""; state = FRAGMENT; }
          else if (c !== -1) { state = PATH; if (c !== 47) p--; }
          else if (override && url.host === null) url.path[url.path.length] = "";
          break;
        case PATH: {
          const slash = c === 47 || (isSpecialScheme(url.scheme) && c === 92);
          if (c === -1 || slash || (!override && (c === 63 || c === 35))) {
            if (isDoubleDot(buffer)) {
              shortenPath(url);
              if (!slash) url.path[url.path.length] = "";
            } else if (isSingleDot(buffer) && !slash) url.path[url.path.length] = "";
            else if (!isSingleDot(buffer)) {
              if (url.scheme === "file" && url.path.length === 0 && isWindowsDrive(buffer))
                buffer = buffer[0] + ":";
              url.path[url.path.length] = buffer;
            }
            buffer = "";
            if (c === 63) { url.query = ""; state = QUERY; }
            if (c === 35) { url.fragment = ""; state = FRAGMENT; }
          } else { buffer += encodeSet(astral(p), pathSet, false); p = at; }
          break;
        }
        case OPAQUE_PATH:
          if (c === 63) { url.query = ""; state = QUERY; }
          else if (c === 35) { url.fragment = ""; state = FRAGMENT; }
          else if (c === 32 && (input[p + 1] === "?" || input[p + 1] === "#")) url.opaque += "%20";
          else if (c !== -1) { url.opaque += encodeSet(astral(p), c0, false); p = at; }
          break;
        case QUERY:
          if ((!override && c === 35) || c === -1) {
            url.query += encodeSet(buffer, isSpecialScheme(url.scheme) ? specialQuerySet : querySet, false);
            buffer = "";
            if (c === 35) { url.fragment = ""; state = FRAGMENT; }
          } else buffer += ch;
          break;
        case FRAGMENT:
          if (c !== -1) { url.fragment += encodeSet(astral(p), fragmentSet, false); p = at; }
          break;
      }
    }
    return override ? true : url;
  }
  function serializePath(u) {
    if (u.opaque !== null) return u.opaque;
    let out = "";
    for (let i = 0; i < u.path.length; i++) out += "/" + u.path[i];
    return out;
  }
  function serialize(u, noFragment) {
    let out = u.scheme + ":";
    if (u.host !== null) {
      out += "//";
      if (u.username !== "" || u.password !== "") {
        out += u.username;
        if (u.password !== "") out += ":" + u.password;
        out += "@";
      }
      out += u.host;
      if (u.port !== null) out += ":" + u.port;
    } else if (u.opaque === null && u.path.length > 1 && u.path[0] === "") out += "/.";
    out += serializePath(u);
    if (u.query !== null) out += "?" + u.query;
    if (!noFragment && u.fragment !== null) out += "#" + u.fragment;
    return out;
  }

  // application/x-www-form-urlencoded
  function parseForm(s) {
    const list = [];
    let n = 0, start = 0;
    for (let i = 0; i <= s.length; i++) {
      if (i < s.length && s[i] !== "&") continue;
      const seq = strSlice(s, start, i);
      start = i + 1;
      if (seq === "") continue;
      const eq = strIndexOf(seq, "=");
      let name = eq < 0 ? seq : strSlice(seq, 0, eq), value = eq < 0 ? "" : strSlice(seq, eq + 1);
      name = percentDecode(plusToSpace(name));
      value = percentDecode(plusToSpace(value));
      list[n++] = [name, value];
    }
    return list;
  }
  function plusToSpace(s) {
    if (strIndexOf(s, "+") < 0) return s;
    let out = "";
    for (let i = 0; i < s.length; i++) out += s[i] === "+" ? " " : s[i];
    return out;
  }
  function serializeForm(list) {
    let out = "";
    for (let i = 0; i < list.length; i++)
      out += (i ? "&" : "") + encodeSet(list[i][0], formSet, true) + "=" + encodeSet(list[i][1], formSet, true);
    return out;
  }

  const records = new WeakMap(), wmGet = uncurry(WeakMap.prototype.get), wmSet = uncurry(WeakMap.prototype.set);
  const paramsOf = new WeakMap(); // URL -> its URLSearchParams
  function rec(self) {
    const r = wmGet(records, self);
    if (r === undefined || r.url === undefined) throw new TypeErr("Illegal invocation: not a URL");
    return r.url;
  }
  function parseWithBase(url, base) {
    let b = null;
    if (base !== undefined) {
      b = parse(domString(base), null);
      if (b === null) return null;
    }
    return parse(domString(url), b);
  }

  class URL {
    constructor(url, base = undefined) {
      if (arguments.length < 1) throw new TypeErr("URL: 1 argument required");
      const u = parseWithBase(url, base);
      if (u === null) throw new TypeErr("Invalid URL: " + domString(url) + (base !== undefined ? " (base: " + domString(base) + ")" : ""));
      wmSet(records, this, { url: u });
      const params = new URLSearchParams(u.query === null ? "" : u.query);
      wmGet(records, params).owner = this;
      wmSet(paramsOf, this, params);
    }
    static canParse(url, base = undefined) {
      if (arguments.length < 1) throw new TypeErr("URL.canParse: 1 argument required");
      return parseWithBase(url, base) !== null;
    }
    static parse(url, base = undefined) {
      if (arguments.length < 1) throw new TypeErr("URL.parse: 1 argument required");
      try { return new URL(url, base); } catch (e) { return null; }
    }
    get href() { return serialize(rec(this)); }
    set href(v) {
      const u = parse(domString(v), null);
      if (u === null) throw new TypeErr("Invalid URL: " + domString(v));
      wmGet(records, this).url = u;
      setList(wmGet(paramsOf, this), u.query === null ? [] : parseForm(u.query));
    }
    get origin() {
      const u = rec(this);
      if (u.scheme === "blob") {
        const inner = parse(serializePath(u), null);
        if (inner !== null && (inner.scheme === "http" || inner.scheme === "https"))
          return inner.scheme + "://" + inner.host + (inner.port !== null ? ":" + inner.port : "");
        return "null";
      }
      if (u.scheme === "file" || !isSpecialScheme(u.scheme)) return "null";
      return u.scheme + "://" + u.host + (u.port !== null ? ":" + u.port : "");
    }
    get protocol() { return rec(this).scheme + ":"; }
    set protocol(v) { parse(domString(v) + ":", null, rec(this), SCHEME_START); }
    get username() { return rec(this).username; }
    set username(v) {
      const u = rec(this);
      if (u.host === null || u.host === "" || u.scheme === "file") return;
      u.username = encodeSet(domString(v), userinfoSet, false);
    }
    get password() { return rec(this).password; }
    set password(v) {
      const u = rec(this);
      if (u.host === null || u.host === "" || u.scheme === "file") return;
      u.password = encodeSet(domString(v), userinfoSet, false);
    }
    get host() {
      const u = rec(this);
      return u.host === null ? "" : u.port === null ? u.host : u.host + ":" + u.port;
    }
    set host(v) {
      const u = rec(this);
      if (u.opaque !== null) return;
      const c = copyRecord(u);
      if (parse(domString(v), null, c, HOST)) wmGet(records, this).url = c;
    }
    get hostname() { const h = rec(this).host; return h === null ? "" : h; }
    set hostname(v) {
      const u = rec(this);
      if (u.opaque !== null) return;
      const c = copyRecord(u);
      if (parse(domString(v), null, c, HOSTNAME)) wmGet(records, this).url = c;
    }
    get port() { const p = rec(this).port; return p === null ? "" : Str(p); }
    set port(v) {
      const u = rec(this);
      if (u.host === null || u.host === "" || u.scheme === "file") return;
      v = domString(v);
      if (v === "") { u.port = null; return; }
      const c = copyRecord(u);
      if (parse(v, null, c, PORT)) wmGet(records, this).url = c;
    }
    get pathname() { return serializePath(rec(this)); }
    set pathname(v) {
      const u = rec(this);
      if (u.opaque !== null) return;
      const c = copyRecord(u);
      c.path = [];
      if (parse(domString(v), null, c, PATH_START)) wmGet(records, this).url = c;
    }
    get search() { const q = rec(this).query; return q === null || q === "" ? "" : "?" + q; }
    set search(v) {
      const u = rec(this);
      v = domString(v);
      if (v === "") { u.query = null; setList(wmGet(paramsOf, this), []); return; }
      if (v[0] === "?") v = strSlice(v, 1);
      u.query = "";
      parse(v, null, u, QUERY);
      setList(wmGet(paramsOf, this), parseForm(v));
    }
    get searchParams() { rec(this); return wmGet(paramsOf, this); }
    get hash() { const f = rec(this).fragment; return f === null || f === "" ? "" : "#" + f; }
    set hash(v) {
      const u = rec(this);
      v = domString(v);
      if (v === "") { u.fragment = null; return; }
      if (v[0] === "#") v = strSlice(v, 1);
      u.fragment = "";
      parse(v, null, u, FRAGMENT);
    }
    toString() { return serialize(rec(this)); }
    toJSON() { return serialize(rec(this)); }
  }
  methods(URL, "URL");
  for (const k of ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "searchParams", "hash"]) {
    const d = descriptorOf(URL.prototype, k);
    d.enumerable = true;
    defineProperty(URL.prototype, k, d);
  }

  function list(self) {
    const r = wmGet(records, self);
    if (r === undefined || r.list === undefined) throw new TypeErr("Illegal invocation: not a URLSearchParams");
    return r.list;
  }
  function setList(params, l) { wmGet(records, params).list = l; }
  // update(self): the owning URL's query follows the list.
  function update(self) {
    const r = wmGet(records, self);
    if (!r.owner) return;
    const u = wmGet(records, r.owner).url, s = serializeForm(r.list);
    u.query = s === "" ? null : s;
  }
  class URLSearchParams {
    constructor(init = undefined) {
      let l = [];
      if (init !== undefined && init !== null && (typeof init === "object" || typeof init === "function")) {
        const src = wmGet(records, init);
        if (src !== undefined && src.list !== undefined) {
          for (let i = 0; i < src.list.length; i++) l[i] = [src.list[i][0], src.list[i][1]];
        } else if (typeof init[iteratorSym] === "function") {
          let n = 0;
          for (const pair of init) { // the argument's own iteration, as WebIDL says
            const p = [];
            let k = 0;
            for (const x of pair) p[k++] = domString(x);
            if (k !== 2) throw new TypeErr("URLSearchParams: each pair must have exactly two items");
            l[n++] = p;
          }
        } else {
          const ks = keysOf(init);
          for (let i = 0; i < ks.length; i++) l[i] = [ks[i], domString(init[ks[i]])];
        }
      } else if (init !== undefined) {
        let s = domString(init);
        if (s[0] === "?") s = strSlice(s, 1);
        l = parseForm(s);
      }
      wmSet(records, this, { list: l, owner: null });
    }
    get size() { return list(this).length; }
    append(name, value) {
      const l = list(this);
      l[l.length] = [domString(name), domString(value)];
      update(this);
    }
    delete(name, value = undefined) {
      const l = list(this), out = [];
      name = domString(name);
      if (value !== undefined) value = domString(value);
      let n = 0;
      for (let i = 0; i < l.length; i++)
        if (l[i][0] !== name || (value !== undefined && l[i][1] !== value)) out[n++] = l[i];
      wmGet(records, this).list = out;
      update(this);
    }
    get(name) {
      const l = list(this);
      name = domString(name);
      for (let i = 0; i < l.length; i++) if (l[i][0] === name) return l[i][1];
      return null;
    }
    getAll(name) {
      const l = list(this), out = [];
      name = domString(name);
      let n = 0;
      for (let i = 0; i < l.length; i++) if (l[i][0] === name) out[n++] = l[i][1];
      return out;
    }
    has(name, value = undefined) {
      const l = list(this);
      name = domString(name);
      if (value !== undefined) value = domString(value);
      for (let i = 0; i < l.length; i++) if (l[i][0] === name && (value === undefined || l[i][1] === value)) return true;
      return false;
    }
    set(name, value) {
      const l = list(this), out = [];
      name = domString(name);
      value = domString(value);
      let n = 0, found = false;
      for (let i = 0; i < l.length; i++) {
        if (l[i][0] !== name) out[n++] = l[i];
        else if (!found) { out[n++] = [name, value]; found = true; }
      }
      if (!found) out[n++] = [name, value];
      wmGet(records, this).list = out;
      update(this);
    }
    sort() {
      const l = list(this);
      for (let i = 1; i < l.length; i++) { // stable insertion sort by code units
        const x = l[i];
        let j = i - 1;
        while (j >= 0 && l[j][0] > x[0]) { l[j + 1] = l[j]; j--; }
        l[j + 1] = x;
      }
      update(this);
    }
    forEach(callback, thisArg = undefined) {
      if (typeof callback !== "function") throw new TypeErr("URLSearchParams.forEach: callback must be a function");
      const l = list(this);
      for (let i = 0; i < l.length; i++) callback.call(thisArg, l[i][1], l[i][0], this);
    }
    *entries() { const self = this; for (let i = 0; i < list(self).length; i++) yield [list(self)[i][0], list(self)[i][1]]; }
    *keys() { const self = this; for (let i = 0; i < list(self).length; i++) yield list(self)[i][0]; }
    *values() { const self = this; for (let i = 0; i < list(self).length; i++) yield list(self)[i][1]; }
    toString() { return serializeForm(list(this)); }
  }
  URLSearchParams.prototype[iteratorSym] = URLSearchParams.prototype.entries;
  methods(URLSearchParams, "URLSearchParams");
  define("URL", URL);
  define("URLSearchParams", URLSearchParams);

  setAdd(uncloneable, URL.prototype);
  setAdd(uncloneable, URLSearchParams.prototype);
  setAdd(uncloneable, TextEncoder.prototype);
  setAdd(uncloneable, TextDecoder.prototype);
  helpers.setPrinter(URL.prototype, (u, fmt) => "URL {href: " + fmt(serialize(rec(u))) + "}");
  helpers.setPrinter(URLSearchParams.prototype, (p, fmt) => {
    const l = list(p);
    let s = "";
    for (let i = 0; i < l.length && i < 100; i++) s += (i ? ", " : "") + fmt(l[i][0]) + " => " + fmt(l[i][1]);
    return "URLSearchParams {" + s + (l.length > 100 ? ", ..." : "") + "}";
  });
  // For intl.js: the uncloneable set, for its own classes, and how to
  // define them.
  helpers.uncloneable = (proto) => { setAdd(uncloneable, proto); };
  helpers.methods = methods;
})
