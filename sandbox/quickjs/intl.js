// Evaluated once by guest.c at init, after web.js: an Intl for English
// (en-US, Gregorian calendar, UTC or a fixed offset), and toLocaleString,
// toLocaleDateString, toLocaleTimeString and localeCompare built on it.
// Every locale resolves to en-US; what is covered is in the README
// ("What the guests have"). The output follows CLDR's en data as ICU
// prints it (Node, browsers). Like bootstrap.js it runs on intrinsics
// captured now.
(function (native, global, helpers) {
  "use strict";
  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const O = Object, Str = String, N = Number;
  const defineProperty = O.defineProperty, descriptorOf = O.getOwnPropertyDescriptor, hasOwn = O.hasOwn;
  const protoOf = O.getPrototypeOf;
  const TypeErr = TypeError, RangeErr = RangeError;
  const strSlice = uncurry(Str.prototype.slice), strIndexOf = uncurry(Str.prototype.indexOf);
  const charCodeAt = uncurry(Str.prototype.charCodeAt), toLower = uncurry(Str.prototype.toLowerCase);
  const toUpper = uncurry(Str.prototype.toUpperCase), strNormalize = uncurry(Str.prototype.normalize);
  const numToExponential = uncurry(N.prototype.toExponential), numValue = uncurry(N.prototype.valueOf);
  const bigValue = uncurry(BigInt.prototype.valueOf), bigToString = uncurry(BigInt.prototype.toString);
  const dateTime = uncurry(Date.prototype.getTime), dateNow = Date.now, DateCtor = Date;
  const mathFloor = Math.floor, mathAbs = Math.abs, isArray = Array.isArray, objectIs = O.is;
  const dateUTC = {
    year: uncurry(Date.prototype.getUTCFullYear), month: uncurry(Date.prototype.getUTCMonth),
    day: uncurry(Date.prototype.getUTCDate), weekday: uncurry(Date.prototype.getUTCDay),
    hour: uncurry(Date.prototype.getUTCHours), minute: uncurry(Date.prototype.getUTCMinutes),
    second: uncurry(Date.prototype.getUTCSeconds), ms: uncurry(Date.prototype.getUTCMilliseconds),
  };
  const keysOf = O.keys;
  const isLetter = (c) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
  const isDigitC = (c) => c >= 48 && c <= 57;
  const iteratorSym = Symbol.iterator, tagSym = Symbol.toStringTag;
  const LOCALE = "en-US";

  function is(brand, v) {
    try { brand(v); return true; } catch (e) { return false; }
  }
  const methods = helpers.methods; // web.js's

  // ---- locales ------------------------------------------------------------
  // wellFormed(tag): letters, then subtags of letters and digits, split
  // by "-" (the shape of a BCP 47 tag; not its registry).
  function wellFormed(tag) {
    let len = 0, first = true;
    for (let i = 0; i <= tag.length; i++) {
      const c = i < tag.length ? charCodeAt(tag, i) : 45;
      if (c === 45) {
        if (first ? len < 2 || len > 8 : len < 1 || len > 8) return false;
        first = false;
        len = 0;
      } else if (isLetter(c) || (!first && isDigitC(c))) len++;
      else return false;
    }
    return true;
  }
  // canonical(tag): the tag in its canonical case ("en-us" -> "en-US"), or
  // a RangeError for one that is not a well-formed BCP 47 tag.
  function canonical(tag) {
    if (typeof tag !== "string" && (typeof tag !== "object" || tag === null))
      throw new TypeErr("Intl: a locale must be a string");
    tag = Str(tag);
    if (!wellFormed(tag)) throw new RangeErr("Incorrect locale information provided: " + tag);
    let out = "", start = 0, i = 0;
    for (let p = 0; p <= tag.length; p++) {
      if (p < tag.length && tag[p] !== "-" && tag[p] !== "_") continue;
      const sub = strSlice(tag, start, p);
      start = p + 1;
      let c;
      if (i === 0) c = toLower(sub);
      else if (sub.length === 2 && (charCodeAt(sub, 0) | 32) >= 97) c = toUpper(sub); // region
      else if (sub.length === 4 && (charCodeAt(sub, 0) | 32) >= 97) c = toUpper(sub[0]) + toLower(strSlice(sub, 1)); // script
      else c = toLower(sub);
      out += (i++ ? "-" : "") + c;
    }
    return out;
  }
  function localeList(locales) {
    const out = [];
    if (locales === undefined) return out;
    if (typeof locales === "string") { out[0] = canonical(locales); return out; }
    const n = locales.length >>> 0;
    for (let i = 0; i < n; i++) out[out.length] = canonical(locales[i]);
    return out;
  }
  // Every request resolves to en-US (English is all this Intl has).
  const resolveLocale = (locales) => { localeList(locales); return LOCALE; };
  function supportedLocalesOf(locales) {
    const l = localeList(locales), out = [];
    for (let i = 0; i < l.length; i++) if (l[i] === "en" || strSlice(l[i], 0, 3) === "en-") out[out.length] = l[i];
    return out;
  }

  // getOption(options, name, values, fallback): ECMA-402 GetOption.
  function getOption(options, name, values, fallback) {
    let v = options[name];
    if (v === undefined) return fallback;
    if (values === "boolean") return !!v;
    v = Str(v);
    if (values && strIndexOf("|" + values + "|", "|" + v + "|") < 0)
      throw new RangeErr("Value " + v + " out of range for Intl option " + name);
    return v;
  }
  function getNumber(options, name, min, max, fallback) {
    let v = options[name];
    if (v === undefined) return fallback;
    v = N(v);
    if (v !== v || v < min || v > max) throw new RangeErr(name + " value is out of range.");
    return mathFloor(v);
  }
  const toOptions = (o) => (o === undefined ? O.create(null) : o === null ? (() => { throw new TypeErr("Intl: options must be an object"); })() : O(o));

  // ---- decimal arithmetic on digit strings ------------------------------
  // A finite number as {neg, digits, exp}: value = 0.digits * 10^exp, digits
  // without leading zeros ("" for zero). From the shortest decimal form that
  // round-trips, as ICU rounds it (so 1.005 rounds to 1.01).
  function decimalOf(x) {
    if (typeof x === "bigint") {
      let s = bigToString(x), neg = false;
      if (s[0] === "-") { neg = true; s = strSlice(s, 1); }
      return trim({ neg, digits: s, exp: s.length });
    }
    const neg = x < 0 || objectIs(x, -0);
    const e = numToExponential(mathAbs(x)); // "d.ddde+x"
    const at = strIndexOf(e, "e");
    let digits = e[0] + (at > 1 ? strSlice(e, 2, at) : "");
    return trim({ neg, digits, exp: N(strSlice(e, at + 1)) + 1 });
  }
  function trim(d) {
    let a = 0, b = d.digits.length;
    while (a < b && d.digits[a] === "0") a++;
    while (b > a && d.digits[b - 1] === "0") b--;
    d.exp -= a;
    d.digits = strSlice(d.digits, a, b);
    if (d.digits === "") d.exp = 0;
    return d;
  }
  // roundAt(d, keep): d rounded (half away from zero) to keep digits after
  // the leading position 10^d.exp (keep may be negative or beyond).
  function roundAt(d, keep) {
    if (keep >= d.digits.length) return d;
    if (keep < 0) return { neg: d.neg, digits: "", exp: 0 };
    let digits = strSlice(d.digits, 0, keep), exp = d.exp;
    if (charCodeAt(d.digits, keep) >= 53) { // >= '5': carry
      let i = digits.length - 1, out = "";
      while (i >= 0 && digits[i] === "9") { out = "0" + out; i--; }
      if (i < 0) { digits = "1" + out; exp++; }
      else digits = strSlice(digits, 0, i) + Str.fromCharCode(charCodeAt(digits, i) + 1) + out;
    }
    return trim({ neg: d.neg, digits, exp });
  }
  const fractionRound = (d, maxFD) => roundAt(d, d.exp + maxFD);
  const significantRound = (d, maxSD) => roundAt(d, maxSD);
  // intFrac(d): the integer digits ("0" for none) and the fraction digits.
  function intFrac(d) {
    const s = d.digits;
    if (d.exp <= 0) return ["0", repeat("0", -d.exp) + s];
    if (d.exp >= s.length) return [s + repeat("0", d.exp - s.length), ""];
    return [strSlice(s, 0, d.exp), strSlice(s, d.exp)];
  }
  function repeat(s, n) {
    let out = "";
    for (let i = 0; i < n; i++) out += s;
    return out;
  }
  const isZero = (d) => d.digits === "";

  // ---- NumberFormat ---------------------------------------------------------
  // Currencies: [digits, symbol, narrow symbol, singular name, plural name].
  const currencies = {
    USD: [2, "$", "$", "US dollar", "US dollars"], EUR: [2, "€", "€", "euro", "euros"],
    GBP: [2, "£", "£", "British pound", "British pounds"], JPY: [0, "¥", "¥", "Japanese yen", "Japanese yen"],
    CNY: [2, "CN¥", "¥", "Chinese yuan", "Chinese yuan"], CAD: [2, "CA$", "$", "Canadian dollar", "Canadian dollars"],
    AUD: [2, "A$", "$", "Australian dollar", "Australian dollars"], CHF: [2, "CHF", "CHF", "Swiss franc", "Swiss francs"],
    INR: [2, "₹", "₹", "Indian rupee", "Indian rupees"], KRW: [0, "₩", "₩", "South Korean won", "South Korean won"],
    MXN: [2, "MX$", "$", "Mexican peso", "Mexican pesos"], BRL: [2, "R$", "R$", "Brazilian real", "Brazilian reals"],
    HKD: [2, "HK$", "$", "Hong Kong dollar", "Hong Kong dollars"], NZD: [2, "NZ$", "$", "New Zealand dollar", "New Zealand dollars"],
    SEK: [2, "SEK", "kr", "Swedish krona", "Swedish kronor"], NOK: [2, "NOK", "kr", "Norwegian krone", "Norwegian kroner"],
    DKK: [2, "DKK", "kr", "Danish krone", "Danish kroner"], PLN: [2, "PLN", "zł", "Polish zloty", "Polish zlotys"],
    RUB: [2, "RUB", "₽", "Russian ruble", "Russian rubles"], ZAR: [2, "ZAR", "R", "South African rand", "South African rand"],
    SGD: [2, "SGD", "$", "Singapore dollar", "Singapore dollars"], ILS: [2, "₪", "₪", "Israeli new shekel", "Israeli new shekels"],
    TRY: [2, "TRY", "₺", "Turkish lira", "Turkish Lira"],
  };
  const nfSlots = new WeakMap(), wmGet = uncurry(WeakMap.prototype.get), wmSet = uncurry(WeakMap.prototype.set);
  function nfSlot(self) {
    const s = wmGet(nfSlots, self);
    if (!s) throw new TypeErr("Method Intl.NumberFormat.prototype.format called on an incompatible receiver");
    return s;
  }
  function numberOptions(locales, options) {
    options = toOptions(options);
    const o = { locale: resolveLocale(locales), numberingSystem: "latn" };
    o.style = getOption(options, "style", "decimal|percent|currency|unit", "decimal");
    let currency = options.currency;
    if (currency !== undefined) {
      currency = Str(currency);
      if (currency.length !== 3 || !isLetter(charCodeAt(currency, 0)) || !isLetter(charCodeAt(currency, 1)) || !isLetter(charCodeAt(currency, 2))) throw new RangeErr("Invalid currency code : " + currency);
      currency = toUpper(currency);
    }
    const currencyDisplay = getOption(options, "currencyDisplay", "code|symbol|narrowSymbol|name", "symbol");
    const currencySign = getOption(options, "currencySign", "standard|accounting", "standard");
    if (o.style === "currency") {
      if (currency === undefined) throw new TypeErr("Currency code is required with currency style.");
      o.currency = currency;
      o.currencyDisplay = currencyDisplay;
      o.currencySign = currencySign;
    }
    if (o.style === "unit") throw new RangeErr("Intl.NumberFormat: style \"unit\" is not available in this sandbox");
    const notation = getOption(options, "notation", "standard|scientific|engineering|compact", "standard");
    const cur = o.style === "currency" ? (hasOwn(currencies, o.currency) ? currencies[o.currency] : [2, o.currency, o.currency, o.currency, o.currency]) : null;
    const mnfdDefault = o.style === "currency" && notation !== "compact" ? cur[0] : 0;
    const mxfdDefault = o.style === "currency" && notation !== "compact" ? cur[0] : o.style === "percent" ? 0 : notation === "compact" ? 0 : 3;
    o.minimumIntegerDigits = getNumber(options, "minimumIntegerDigits", 1, 21, 1);
    const mnsd = options.minimumSignificantDigits, mxsd = options.maximumSignificantDigits;
    const mnfd = options.minimumFractionDigits, mxfd = options.maximumFractionDigits;
    o.sig = mnsd !== undefined || mxsd !== undefined;
    if (o.sig) {
      o.minimumSignificantDigits = getNumber(options, "minimumSignificantDigits", 1, 21, 1);
      o.maximumSignificantDigits = getNumber(options, "maximumSignificantDigits", o.minimumSignificantDigits, 21, 21);
    }
    if (!o.sig || mnfd !== undefined || mxfd !== undefined) {
      let mn = getNumber(options, "minimumFractionDigits", 0, 100, undefined);
      let mx = getNumber(options, "maximumFractionDigits", 0, 100, undefined);
      if (mn === undefined) mn = mx === undefined ? mnfdDefault : mnfdDefault < mx ? mnfdDefault : mx;
      else if (mx === undefined) mx = mxfdDefault > mn ? mxfdDefault : mn;
      else if (mn > mx) throw new RangeErr("maximumFractionDigits value is out of range.");
      if (mx === undefined) mx = mxfdDefault;
      o.minimumFractionDigits = mn;
      o.maximumFractionDigits = mx;
      if (o.sig) o.sig = false; // fraction digits given too: ES2023 "auto" priority keeps significant digits
    }
    if (mnsd !== undefined || mxsd !== undefined) o.sig = true;
    o.compactRounding = notation === "compact" && mnsd === undefined && mxsd === undefined && mnfd === undefined && mxfd === undefined;
    o.notation = notation;
    if (notation === "compact") o.compactDisplay = getOption(options, "compactDisplay", "short|long", "short");
    let grouping = options.useGrouping;
    const groupDefault = notation === "compact" ? "min2" : "auto";
    if (grouping === undefined) grouping = groupDefault;
    else if (grouping === true || grouping === "true") grouping = "always";
    else if (grouping === false || grouping === "false" || grouping === null || grouping === 0 || grouping === "") grouping = false;
    else {
      grouping = Str(grouping);
      if (grouping !== "always" && grouping !== "auto" && grouping !== "min2") throw new RangeErr("Value " + grouping + " out of range for Intl.NumberFormat options property useGrouping");
    }
    o.useGrouping = grouping;
    o.signDisplay = getOption(options, "signDisplay", "auto|never|always|exceptZero|negative", "auto");
    o.roundingMode = getOption(options, "roundingMode", "halfExpand", "halfExpand");
    o.cur = cur;
    return o;
  }
  // group(int, mode): the integer digits with "," between groups of three.
  function group(int, mode, parts) {
    if (mode === false || int.length <= 3 || (mode === "min2" && int.length < 5)) {
      parts[parts.length] = { type: "integer", value: int };
      return;
    }
    const head = int.length % 3 || 3;
    parts[parts.length] = { type: "integer", value: strSlice(int, 0, head) };
    for (let i = head; i < int.length; i += 3) {
      parts[parts.length] = { type: "group", value: "," };
      parts[parts.length] = { type: "integer", value: strSlice(int, i, i + 3) };
    }
  }
  const compactShort = ["", "K", "M", "B", "T"], compactLong = ["", " thousand", " million", " billion", " trillion"];
  // numberParts(o, x): formatToParts of x (a number or a bigint).
  function numberParts(o, x) {
    const parts = [];
    const push = (type, value) => { parts[parts.length] = { type, value }; };
    let d = null, exponent = 0, compact = 0;
    const nan = typeof x === "number" && x !== x, inf = typeof x === "number" && (x === Infinity || x === -Infinity);
    const negative = typeof x === "bigint" ? x < 0n : x < 0 || objectIs(x, -0);
    if (!nan && !inf) {
      d = decimalOf(x);
      if (o.style === "percent" && !isZero(d)) d.exp += 2;
      if (o.notation === "scientific" || o.notation === "engineering") {
        if (!isZero(d)) {
          exponent = d.exp - 1;
          if (o.notation === "engineering") exponent = mathFloor(exponent / 3) * 3;
          d.exp -= exponent;
        }
      } else if (o.notation === "compact" && !isZero(d)) {
        let e = d.exp - 1;
        if (e >= 3) {
          compact = e >= 12 ? 4 : mathFloor(e / 3);
          d.exp -= compact * 3;
        }
      }
      if (o.compactRounding) d = d.exp <= 1 ? significantRound(d, 2) : fractionRound(d, 0);
      else if (o.sig) d = significantRound(d, o.maximumSignificantDigits);
      else d = fractionRound(d, o.maximumFractionDigits);
      // rounding may carry into a new digit (999.95 -> 1000)
      if ((o.notation === "scientific" || o.notation === "engineering") && !isZero(d) && d.exp > (o.notation === "engineering" ? 3 : 1)) {
        d.exp -= o.notation === "engineering" ? 3 : 1;
        exponent += o.notation === "engineering" ? 3 : 1;
      }
      if (o.notation === "compact" && compact < 4 && d.exp > 3) { d.exp -= 3; compact++; }
    }
    const zero = d !== null && isZero(d);
    let sign = "";
    switch (o.signDisplay) {
      case "auto": sign = negative ? "-" : ""; break;
      case "always": sign = negative ? "-" : "+"; break;
      case "exceptZero": sign = zero || nan ? "" : negative ? "-" : "+"; break;
      case "negative": sign = negative && !zero ? "-" : ""; break;
      case "never": sign = ""; break;
    }
    const accounting = o.style === "currency" && o.currencySign === "accounting" && sign === "-";
    const cur = o.cur;
    let curText = "", curAfter = false;
    if (o.style === "currency") {
      if (o.currencyDisplay === "code") curText = o.currency;
      else if (o.currencyDisplay === "name") curAfter = true;
      else curText = o.currencyDisplay === "narrowSymbol" ? cur[2] : cur[1];
    }
    if (accounting) push("literal", "(");
    else if (sign) push(sign === "-" ? "minusSign" : "plusSign", sign);
    if (curText) {
      push("currency", curText);
      // a space between a symbol that ends in a letter ("CHF", "kr") and the digits
      const last = curText[curText.length - 1];
      if (!nan && !inf && (o.currencyDisplay === "code" || toLower(last) !== toUpper(last))) push("literal", "\u00a0");
    }
    if (nan) push("nan", "NaN");
    else if (inf) push("infinity", "∞");
    else {
      const f = intFrac(d);
      let int = f[0], frac = f[1];
      while (int.length < o.minimumIntegerDigits) int = "0" + int;
      if (o.sig) {
        // the significant digits shown: from the first one that is not zero
        // (zero itself has one)
        let lead = 0;
        if (int === "0") while (lead < frac.length && frac[lead] === "0") lead++;
        let shown = int === "0" ? (lead === frac.length ? 1 : frac.length - lead) : int.length + frac.length;
        if (int === "0" && lead === frac.length) frac = "";
        for (; shown < o.minimumSignificantDigits; shown++) frac += "0";
      } else if (!o.compactRounding) while (frac.length < o.minimumFractionDigits) frac += "0";
      group(int, o.useGrouping, parts);
      if (frac) { push("decimal", "."); push("fraction", frac); }
      if (compact) {
        if (o.compactDisplay === "long") { push("literal", " "); push("compact", strSlice(compactLong[compact], 1)); }
        else push("compact", compactShort[compact]);
      }
      if (o.notation === "scientific" || o.notation === "engineering") {
        push("exponentSeparator", "E");
        if (exponent < 0) push("exponentMinusSign", "-");
        push("exponentInteger", Str(mathAbs(exponent)));
      }
    }
    if (o.style === "percent") push("percentSign", "%");
    if (curAfter) {
      const one = !nan && !inf && d.digits === "1" && d.exp === 1 && !sign;
      push("literal", " ");
      push("currency", one && !intFrac(d)[1] && o.minimumFractionDigits === 0 ? cur[3] : cur[4]);
    }
    if (accounting) push("literal", ")");
    return parts;
  }
  const join = (parts) => {
    let s = "";
    for (let i = 0; i < parts.length; i++) s += parts[i].value;
    return s;
  };
  function toNumeric(x) {
    if (typeof x === "bigint") return x;
    if (typeof x === "object" && x !== null && is(bigValue, x)) return bigValue(x);
    return N(x);
  }

  class NumberFormat {
    constructor(locales = undefined, options = undefined) {
      wmSet(nfSlots, this, numberOptions(locales, options));
    }
    static supportedLocalesOf(locales) { return supportedLocalesOf(locales); }
    get format() {
      const o = nfSlot(this);
      if (!o.bound) o.bound = (x) => join(numberParts(o, toNumeric(x)));
      return o.bound;
    }
    formatToParts(x) { return numberParts(nfSlot(this), toNumeric(x)); }
    resolvedOptions() {
      const o = nfSlot(this), r = { locale: o.locale, numberingSystem: o.numberingSystem, style: o.style };
      if (o.style === "currency") { r.currency = o.currency; r.currencyDisplay = o.currencyDisplay; r.currencySign = o.currencySign; }
      r.minimumIntegerDigits = o.minimumIntegerDigits;
      if (o.minimumFractionDigits !== undefined) { r.minimumFractionDigits = o.minimumFractionDigits; r.maximumFractionDigits = o.maximumFractionDigits; }
      if (o.sig) { r.minimumSignificantDigits = o.minimumSignificantDigits; r.maximumSignificantDigits = o.maximumSignificantDigits; }
      r.useGrouping = o.useGrouping;
      r.notation = o.notation;
      if (o.notation === "compact") r.compactDisplay = o.compactDisplay;
      r.signDisplay = o.signDisplay;
      r.roundingMode = o.roundingMode;
      r.roundingIncrement = 1;
      r.trailingZeroDisplay = "auto";
      r.roundingPriority = "auto";
      return r;
    }
  }
  methods(NumberFormat, "Intl.NumberFormat");

  // ---- PluralRules ------------------------------------------------------------
  const prSlots = new WeakMap();
  class PluralRules {
    constructor(locales = undefined, options = undefined) {
      if (new.target === undefined) throw new TypeErr("Constructor Intl.PluralRules requires 'new'");
      options = toOptions(options);
      const type = getOption(options, "type", "cardinal|ordinal", "cardinal");
      const nf = numberOptions(locales, options);
      wmSet(prSlots, this, { type, nf });
    }
    static supportedLocalesOf(locales) { return supportedLocalesOf(locales); }
    select(n) {
      const s = wmGet(prSlots, this);
      if (!s) throw new TypeErr("Method Intl.PluralRules.prototype.select called on an incompatible receiver");
      n = N(n);
      if (n !== n || n === Infinity || n === -Infinity) return "other";
      // the operands of the number as it would be formatted
      const p = numberParts(s.nf, mathAbs(n));
      let int = "", frac = "";
      for (let i = 0; i < p.length; i++) {
        if (p[i].type === "integer") int += p[i].value;
        else if (p[i].type === "fraction") frac = p[i].value;
      }
      const i = N(int);
      if (s.type === "cardinal") return i === 1 && frac === "" ? "one" : "other";
      if (frac !== "") return "other";
      const m10 = i % 10, m100 = i % 100;
      if (m10 === 1 && m100 !== 11) return "one";
      if (m10 === 2 && m100 !== 12) return "two";
      if (m10 === 3 && m100 !== 13) return "few";
      return "other";
    }
    resolvedOptions() {
      const s = wmGet(prSlots, this);
      if (!s) throw new TypeErr("Method Intl.PluralRules.prototype.resolvedOptions called on an incompatible receiver");
      const r = { locale: LOCALE, type: s.type, minimumIntegerDigits: s.nf.minimumIntegerDigits };
      if (s.nf.sig) { r.minimumSignificantDigits = s.nf.minimumSignificantDigits; r.maximumSignificantDigits = s.nf.maximumSignificantDigits; }
      else { r.minimumFractionDigits = s.nf.minimumFractionDigits; r.maximumFractionDigits = s.nf.maximumFractionDigits; }
      r.pluralCategories = s.type === "cardinal" ? ["one", "other"] : ["few", "one", "two", "other"];
      r.roundingIncrement = 1;
      r.roundingMode = "halfExpand";
      r.roundingPriority = "auto";
      r.trailingZeroDisplay = "auto";
      return r;
    }
  }
  methods(PluralRules, "Intl.PluralRules");

  // ---- ListFormat -----------------------------------------------------------------
  const lfSlots = new WeakMap();
  // [pair, middle, end] separators by type and style
  const listPatterns = {
    "conjunction-long": [" and ", ", ", ", and "], "conjunction-short": [" & ", ", ", ", & "],
    "conjunction-narrow": [", ", ", ", ", "], "disjunction-long": [" or ", ", ", ", or "],
    "disjunction-short": [" or ", ", ", ", or "], "disjunction-narrow": [" or ", ", ", ", or "],
    "unit-long": [", ", ", ", ", "], "unit-short": [", ", ", ", ", "], "unit-narrow": [" ", " ", " "],
  };
  function listParts(s, list) {
    const items = [];
    if (list !== undefined) {
      for (const x of list) { // the argument's own iteration
        if (typeof x !== "string") throw new TypeErr("Iterable yielded " + Str(x) + " which is not a string");
        items[items.length] = x;
      }
    }
    const p = listPatterns[s.type + "-" + s.style], parts = [], n = items.length;
    for (let i = 0; i < n; i++) {
      if (i > 0) parts[parts.length] = { type: "literal", value: n === 2 ? p[0] : i === n - 1 ? p[2] : p[1] };
      parts[parts.length] = { type: "element", value: items[i] };
    }
    return parts;
  }
  class ListFormat {
    constructor(locales = undefined, options = undefined) {
      if (new.target === undefined) throw new TypeErr("Constructor Intl.ListFormat requires 'new'");
      options = toOptions(options);
      const locale = resolveLocale(locales);
      const type = getOption(options, "type", "conjunction|disjunction|unit", "conjunction");
      const style = getOption(options, "style", "long|short|narrow", "long");
      wmSet(lfSlots, this, { locale, type, style });
    }
    static supportedLocalesOf(locales) { return supportedLocalesOf(locales); }
    format(list) { return join(listParts(lfSlot(this), list)); }
    formatToParts(list) { return listParts(lfSlot(this), list); }
    resolvedOptions() { const s = lfSlot(this); return { locale: s.locale, type: s.type, style: s.style }; }
  }
  function lfSlot(self) {
    const s = wmGet(lfSlots, self);
    if (!s) throw new TypeErr("Method Intl.ListFormat.prototype.format called on an incompatible receiver");
    return s;
  }
  methods(ListFormat, "Intl.ListFormat");

  // ---- Collator -----------------------------------------------------------
  // A multi-level comparison in the manner of the Unicode Collation
  // Algorithm's root order for Latin text: first the base characters
  // (case and accents ignored; spaces and punctuation before digits before
  // letters), then the accents, then the case (lower before upper).
  const colSlots = new WeakMap();
  const punctuationOrder = "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
  const isCombining = (c) => (c >= 0x300 && c <= 0x36f) || (c >= 0x1ab0 && c <= 0x1aff) || (c >= 0x1dc0 && c <= 0x1dff) || (c >= 0x20d0 && c <= 0x20ff) || (c >= 0xfe20 && c <= 0xfe2f);
  // keyOf(s, o): [primary weights, secondary weights, tertiary weights].
  function keyOf(s, o) {
    const d = strNormalize(s, "NFD"), p = [], sec = [], ter = [];
    for (let i = 0; i < d.length; i++) {
      const c = charCodeAt(d, i);
      if (isCombining(c)) { // an accent on the previous character
        if (sec.length) sec[sec.length - 1] = sec[sec.length - 1] * 1024 + c;
        continue;
      }
      const lower = toLower(d[i]), lc = charCodeAt(lower, 0);
      const letter = lower !== toUpper(d[i]);
      if (isDigitC(c)) {
        if (o.numeric) { // a run of digits by its value
          let j = i;
          while (j < d.length && isDigitC(charCodeAt(d, j))) j++;
          let k = i;
          while (k < j - 1 && charCodeAt(d, k) === 48) k++;
          p[p.length] = 0x20000 + (j - k); // longer numbers are larger
          for (let x = k; x < j; x++) p[p.length] = 0x20000 + charCodeAt(d, x);
          sec[sec.length] = 0;
          ter[ter.length] = 0;
          i = j - 1;
          continue;
        }
        p[p.length] = 0x20000 + c;
      } else if (letter) p[p.length] = 0x30000 + lc;
      else if (o.ignorePunctuation && (c <= 0x7f || c === 0xa0)) continue;
      else { // spaces, punctuation, symbols: ASCII in the root order, the rest by code point
        const k = strIndexOf(punctuationOrder, d[i]);
        p[p.length] = 0x10000 + (k >= 0 ? k : 0x100 + c);
      }
      sec[sec.length] = 0;
      ter[ter.length] = letter && lower !== d[i] ? (o.caseFirst === "upper" ? 0 : 1) : o.caseFirst === "upper" ? 1 : 0;
    }
    return [p, sec, ter];
  }
  function compareLevel(a, b) {
    const n = a.length < b.length ? a.length : b.length;
    for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
    return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
  }
  function collate(o, x, y) {
    x = Str(x);
    y = Str(y);
    if (x === y) return 0;
    const a = keyOf(x, o), b = keyOf(y, o);
    let r = compareLevel(a[0], b[0]);
    if (r || o.sensitivity === "base") return r;
    if (o.sensitivity !== "case") {
      r = compareLevel(a[1], b[1]);
      if (r || o.sensitivity === "accent") return r;
    }
    return compareLevel(a[2], b[2]);
  }
  class Collator {
    constructor(locales = undefined, options = undefined) {
      options = toOptions(options);
      const o = { locale: resolveLocale(locales) };
      o.usage = getOption(options, "usage", "sort|search", "sort");
      o.sensitivity = getOption(options, "sensitivity", "base|accent|case|variant", "variant");
      o.ignorePunctuation = getOption(options, "ignorePunctuation", "boolean", false);
      o.numeric = getOption(options, "numeric", "boolean", false);
      o.caseFirst = getOption(options, "caseFirst", "upper|lower|false", "false");
      wmSet(colSlots, this, o);
    }
    static supportedLocalesOf(locales) { return supportedLocalesOf(locales); }
    get compare() {
      const o = wmGet(colSlots, this);
      if (!o) throw new TypeErr("Method Intl.Collator.prototype.compare called on an incompatible receiver");
      if (!o.bound) o.bound = (x, y) => collate(o, x, y);
      return o.bound;
    }
    resolvedOptions() {
      const o = wmGet(colSlots, this);
      if (!o) throw new TypeErr("Method Intl.Collator.prototype.resolvedOptions called on an incompatible receiver");
      return { locale: o.locale, usage: o.usage, sensitivity: o.sensitivity, ignorePunctuation: o.ignorePunctuation,
        collation: "default", numeric: o.numeric, caseFirst: o.caseFirst };
    }
  }
  methods(Collator, "Intl.Collator");

  // ---- DateTimeFormat ----------------------------------------------------------
  const dtfSlots = new WeakMap();
  const monthsLong = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
  const monthsShort = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  const daysLong = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
  const daysShort = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  const components = ["weekday", "era", "year", "month", "day", "dayPeriod", "hour", "minute", "second", "fractionalSecondDigits", "timeZoneName"];
  const pad2 = (n) => (n < 10 ? "0" + n : Str(n));
  // timeZoneOffset(name): minutes east of UTC for "UTC" (and its aliases)
  // or an offset "+05:30"; a RangeError for anything else.
  function timeZoneOffset(name) {
    const u = toUpper(name);
    if (u === "UTC" || u === "ETC/UTC" || u === "GMT" || u === "ETC/GMT" || u === "Z" || u === "ETC/UCT" || u === "UCT" || u === "ETC/ZULU" || u === "ZULU" || u === "UNIVERSAL")
      return [0, "UTC"];
    // ±HH, ±HHMM or ±HH:MM
    const sign = name[0], digits = name.length === 6 && name[3] === ":" ? strSlice(name, 1, 3) + strSlice(name, 4) : strSlice(name, 1);
    let ok = (sign === "+" || sign === "-") && (digits.length === 2 || digits.length === 4);
    for (let i = 0; ok && i < digits.length; i++) ok = isDigitC(charCodeAt(digits, i));
    const hh = ok ? N(strSlice(digits, 0, 2)) : 0, mm = ok && digits.length === 4 ? N(strSlice(digits, 2)) : 0;
    if (ok && hh <= 23 && mm <= 59)
      return [(hh * 60 + mm) * (sign === "-" ? -1 : 1), sign + pad2(hh) + ":" + pad2(mm)];
    throw new RangeErr("Invalid time zone specified: " + name + " (this sandbox has no time zone data: use \"UTC\" or an offset such as \"+05:30\")");
  }
  function dateOptions(locales, options, required, defaults) {
    options = toOptions(options);
    const o = { locale: resolveLocale(locales), calendar: "gregory", numberingSystem: "latn" };
    let tz = options.timeZone;
    const z = tz === undefined ? [0, "UTC"] : timeZoneOffset(Str(tz));
    o.offset = z[0];
    o.timeZone = z[1];
    const hour12 = options.hour12;
    let hourCycle = getOption(options, "hourCycle", "h11|h12|h23|h24", undefined);
    if (hour12 !== undefined) hourCycle = hour12 ? "h12" : "h23";
    o.weekday = getOption(options, "weekday", "narrow|short|long", undefined);
    o.era = getOption(options, "era", "narrow|short|long", undefined);
    o.year = getOption(options, "year", "2-digit|numeric", undefined);
    o.month = getOption(options, "month", "2-digit|numeric|narrow|short|long", undefined);
    o.day = getOption(options, "day", "2-digit|numeric", undefined);
    o.dayPeriod = getOption(options, "dayPeriod", "narrow|short|long", undefined);
    o.hour = getOption(options, "hour", "2-digit|numeric", undefined);
    o.minute = getOption(options, "minute", "2-digit|numeric", undefined);
    o.second = getOption(options, "second", "2-digit|numeric", undefined);
    o.fractionalSecondDigits = getNumber(options, "fractionalSecondDigits", 1, 3, undefined);
    o.timeZoneName = getOption(options, "timeZoneName", "short|long|shortOffset|longOffset|shortGeneric|longGeneric", undefined);
    o.dateStyle = getOption(options, "dateStyle", "full|long|medium|short", undefined);
    o.timeStyle = getOption(options, "timeStyle", "full|long|medium|short", undefined);
    let any = false;
    for (let i = 0; i < components.length; i++) if (o[components[i]] !== undefined) any = true;
    if ((o.dateStyle !== undefined || o.timeStyle !== undefined) && any)
      throw new TypeErr("Can't set option " + "dateStyle/timeStyle together with individual date or time fields");
    if (o.dateStyle === undefined && o.timeStyle === undefined) {
      let needDefaults = true;
      if ((required === "date" || required === "any") && (o.weekday || o.year || o.month || o.day)) needDefaults = false;
      if ((required === "time" || required === "any") && (o.hour || o.minute || o.second || o.fractionalSecondDigits)) needDefaults = false;
      if (needDefaults && (defaults === "date" || defaults === "all")) { o.year = o.month = o.day = "numeric"; }
      if (needDefaults && (defaults === "time" || defaults === "all")) { o.hour = o.minute = o.second = "numeric"; }
    }
    const hasHour = o.hour !== undefined || o.timeStyle !== undefined;
    o.hourCycle = hasHour ? hourCycle || "h12" : undefined;
    o.hour12 = hasHour ? o.hourCycle === "h11" || o.hourCycle === "h12" : undefined;
    return o;
  }
  // fields(t, o): the calendar fields of time value t in o's zone.
  function fields(t, o) {
    const d = new DateCtor(t + o.offset * 60000);
    return {
      year: dateUTC.year(d), month: dateUTC.month(d), day: dateUTC.day(d), weekday: dateUTC.weekday(d),
      hour: dateUTC.hour(d), minute: dateUTC.minute(d), second: dateUTC.second(d), ms: dateUTC.ms(d),
    };
  }
  function zoneName(o, style) {
    if (o.timeZone === "UTC") {
      if (style === "long") return "Coordinated Universal Time";
      if (style === "shortOffset" || style === "longOffset" || style === "shortGeneric" || style === "longGeneric") return "GMT";
      return "UTC";
    }
    const sign = o.offset < 0 ? "-" : "+", m = mathAbs(o.offset), h = mathFloor(m / 60), mm = m % 60;
    if (style === "longOffset") return "GMT" + sign + pad2(h) + ":" + pad2(mm);
    return "GMT" + sign + h + (mm ? ":" + pad2(mm) : "");
  }
  // The en-US patterns, in parts. Styles expand to components first.
  const dateStyles = {
    full: { weekday: "long", month: "long", day: "numeric", year: "numeric" },
    long: { month: "long", day: "numeric", year: "numeric" },
    medium: { month: "short", day: "numeric", year: "numeric" },
    short: { month: "numeric", day: "numeric", year: "2-digit" },
  };
  const timeStyles = {
    full: { hour: "numeric", minute: "2-digit", second: "2-digit", timeZoneName: "long" },
    long: { hour: "numeric", minute: "2-digit", second: "2-digit", timeZoneName: "short" },
    medium: { hour: "numeric", minute: "2-digit", second: "2-digit" },
    short: { hour: "numeric", minute: "2-digit" },
  };
  function dateParts(o, t) {
    if (t !== t || t > 8.64e15 || t < -8.64e15) throw new RangeErr("Invalid time value");
    const f = fields(t, o), parts = [];
    const push = (type, value) => { parts[parts.length] = { type, value }; };
    let c = o;
    if (o.dateStyle !== undefined || o.timeStyle !== undefined) {
      c = {};
      const ds = o.dateStyle && dateStyles[o.dateStyle], ts = o.timeStyle && timeStyles[o.timeStyle];
      const dk = ds ? keysOf(ds) : [], tk = ts ? keysOf(ts) : [];
      for (let i = 0; i < dk.length; i++) c[dk[i]] = ds[dk[i]];
      for (let i = 0; i < tk.length; i++) c[tk[i]] = ts[tk[i]];
      c.hourCycle = o.hourCycle;
    }
    const num = (v, style) => (style === "2-digit" ? pad2(v % 100) : Str(v));
    const year = f.year <= 0 && c.era === undefined ? 1 - f.year : f.year;
    // the date
    const hasDate = c.weekday || c.year || c.month || c.day;
    if (hasDate) {
      const textMonth = c.month === "long" || c.month === "short" || c.month === "narrow";
      const yearText = c.year ? (c.year === "2-digit" ? pad2(mathAbs(year) % 100) : Str(f.year <= 0 ? 1 - f.year : year)) : "";
      if (c.weekday) {
        push("weekday", c.weekday === "long" ? daysLong[f.weekday] : c.weekday === "short" ? daysShort[f.weekday] : daysLong[f.weekday][0]);
        if (c.year || c.month || c.day) push("literal", ", ");
      }
      if (textMonth) {
        const m = c.month === "long" ? monthsLong[f.month] : c.month === "short" ? monthsShort[f.month] : monthsLong[f.month][0];
        if (c.month) push("month", m);
        if (c.day) { push("literal", " "); push("day", num(f.day, c.day)); }
        if (c.year) { push("literal", c.day ? ", " : " "); push("year", yearText); }
      } else {
        let first = true;
        const sep = () => { if (!first) push("literal", "/"); first = false; };
        if (c.month) { sep(); push("month", num(f.month + 1, c.month)); }
        if (c.day) { sep(); push("day", num(f.day, c.day)); }
        if (c.year) { sep(); push("year", yearText); }
      }
      if (c.era) {
        push("literal", " ");
        const ad = f.year > 0;
        push("era", c.era === "long" ? (ad ? "Anno Domini" : "Before Christ") : c.era === "narrow" ? (ad ? "A" : "B") : ad ? "AD" : "BC");
      }
    }
    // the time
    const hasTime = c.hour || c.minute || c.second || c.fractionalSecondDigits;
    if (hasTime) {
      // CLDR's "{date} 'at' {time}" for full and long dates (a month by
      // name), "{date}, {time}" for the others
      if (hasDate) push("literal", o.dateStyle === "full" || o.dateStyle === "long" || (o.dateStyle === undefined && c.month === "long") ? " at " : ", ");
      const cycle = c.hourCycle || o.hourCycle || "h12";
      let h = f.hour;
      if (cycle === "h12") h = h % 12 || 12;
      else if (cycle === "h11") h = h % 12;
      else if (cycle === "h24") h = h || 24;
      let sep = false;
      if (c.hour) {
        push("hour", c.hour === "2-digit" || (cycle !== "h12" && cycle !== "h11" && (c.minute || c.second)) ? pad2(h) : Str(h));
        sep = true;
      }
      if (c.minute) {
        if (sep) push("literal", ":");
        push("minute", sep || c.minute === "2-digit" ? pad2(f.minute) : Str(f.minute));
        sep = true;
      }
      if (c.second) {
        if (sep) push("literal", ":");
        push("second", sep || c.second === "2-digit" ? pad2(f.second) : Str(f.second));
        sep = true;
      }
      if (c.fractionalSecondDigits) {
        if (sep) push("literal", ".");
        push("fractionalSecond", strSlice(Str(1000 + f.ms), 1, 1 + c.fractionalSecondDigits));
      }
      if (c.hour && (cycle === "h12" || cycle === "h11")) {
        push("literal", " ");
        push("dayPeriod", f.hour < 12 ? "AM" : "PM");
      }
    }
    if (c.timeZoneName) {
      push("literal", hasTime || !hasDate ? " " : ", ");
      push("timeZoneName", zoneName(o, c.timeZoneName));
    }
    return parts;
  }
  function dtfSlot(self) {
    const s = wmGet(dtfSlots, self);
    if (!s) throw new TypeErr("Method Intl.DateTimeFormat.prototype.format called on an incompatible receiver");
    return s;
  }
  const timeOf = (d) => (d === undefined ? dateNow() : is(dateTime, d) ? dateTime(d) : N(d));
  class DateTimeFormat {
    constructor(locales = undefined, options = undefined) {
      wmSet(dtfSlots, this, dateOptions(locales, options, "any", "date"));
    }
    static supportedLocalesOf(locales) { return supportedLocalesOf(locales); }
    get format() {
      const o = dtfSlot(this);
      if (!o.bound) o.bound = (d) => join(dateParts(o, timeOf(d)));
      return o.bound;
    }
    formatToParts(d) { return dateParts(dtfSlot(this), timeOf(d)); }
    resolvedOptions() {
      const o = dtfSlot(this), r = { locale: o.locale, calendar: o.calendar, numberingSystem: o.numberingSystem, timeZone: o.timeZone };
      if (o.hourCycle !== undefined) { r.hourCycle = o.hourCycle; r.hour12 = o.hour12; }
      for (let i = 0; i < components.length; i++) if (o[components[i]] !== undefined) r[components[i]] = o[components[i]];
      if (o.dateStyle !== undefined) r.dateStyle = o.dateStyle;
      if (o.timeStyle !== undefined) r.timeStyle = o.timeStyle;
      return r;
    }
  }
  methods(DateTimeFormat, "Intl.DateTimeFormat");

  // ---- Intl and the toLocale methods --------------------------------------
  const Intl = {};
  const defineHidden = (o, k, v) => defineProperty(o, k, { value: v, writable: true, configurable: true });
  defineHidden(Intl, "getCanonicalLocales", (locales) => {
    const l = localeList(locales), out = [];
    for (let i = 0; i < l.length; i++) {
      let dup = false;
      for (let j = 0; j < out.length; j++) if (out[j] === l[i]) dup = true;
      if (!dup) out[out.length] = l[i];
    }
    return out;
  });
  defineHidden(Intl, "NumberFormat", NumberFormat);
  defineHidden(Intl, "DateTimeFormat", DateTimeFormat);
  defineHidden(Intl, "Collator", Collator);
  defineHidden(Intl, "PluralRules", PluralRules);
  defineHidden(Intl, "ListFormat", ListFormat);
  defineProperty(Intl, tagSym, { value: "Intl", configurable: true });
  defineProperty(global, "Intl", { value: Intl, writable: true, configurable: true });

  // Formatters made once for the calls without arguments (the common case).
  let defaultNF = null, defaultCollator = null;
  const dateDefaults = O.create(null);
  const thisNumber = (v, what) => {
    if (typeof v === "number") return v;
    if (is(numValue, v)) return numValue(v);
    throw new TypeErr(what + " requires that 'this' be a Number");
  };
  defineHidden(N.prototype, "toLocaleString", function toLocaleString(locales = undefined, options = undefined) {
    const x = thisNumber(this, "Number.prototype.toLocaleString");
    if (locales === undefined && options === undefined) {
      if (defaultNF === null) defaultNF = numberOptions(undefined, undefined);
      return join(numberParts(defaultNF, x));
    }
    return join(numberParts(numberOptions(locales, options), x));
  });
  defineHidden(BigInt.prototype, "toLocaleString", function toLocaleString(locales = undefined, options = undefined) {
    const x = typeof this === "bigint" ? this : bigValue(this);
    return join(numberParts(numberOptions(locales, options), x));
  });
  const dateMethod = (name, required, defaults) =>
    defineHidden(DateCtor.prototype, name, {
      [name](locales = undefined, options = undefined) {
        const t = dateTime(this);
        if (t !== t) return "Invalid Date";
        let o;
        if (locales === undefined && options === undefined) {
          o = dateDefaults[name];
          if (o === undefined) o = dateDefaults[name] = dateOptions(undefined, undefined, required, defaults);
        } else o = dateOptions(locales, options, required, defaults);
        return join(dateParts(o, t));
      },
    }[name]);
  dateMethod("toLocaleString", "any", "all");
  dateMethod("toLocaleDateString", "date", "date");
  dateMethod("toLocaleTimeString", "time", "time");
  defineHidden(Str.prototype, "localeCompare", function localeCompare(that, locales = undefined, options = undefined) {
    if (this === undefined || this === null) throw new TypeErr("String.prototype.localeCompare called on null or undefined");
    if (locales === undefined && options === undefined) {
      if (defaultCollator === null) defaultCollator = new Collator();
      return defaultCollator.compare(this, that);
    }
    return new Collator(locales, options).compare(this, that);
  });

  helpers.uncloneable(NumberFormat.prototype);
  helpers.uncloneable(DateTimeFormat.prototype);
  helpers.uncloneable(Collator.prototype);
  helpers.uncloneable(PluralRules.prototype);
  helpers.uncloneable(ListFormat.prototype);
})
