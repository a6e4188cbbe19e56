package worker

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Hostile guest code: code that defeats the soft interrupt, the recursion
// guards or the result printer, with the real guests. Each case states what
// a user relies on: a run stopped by its deadline says timeout and keeps the
// state, a recursion is an ordinary error, a value prints as itself.

// runWithTimeout runs code under a deadline of d.
func runWithTimeout(w *Worker, code string, d time.Duration) Result {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return w.Run(ctx, code, RunOptions{})
}

// TestJSTimeoutWhileDrainingJobs: a deadline that fires while the guest runs
// promise jobs (not the cell's own script) is a timeout, and the state
// survives; the stop is not reported as an unhandled rejection.
func TestJSTimeoutWhileDrainingJobs(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, code string }{
		{"queueMicrotask", "function f() { queueMicrotask(f) } f(); 1"},
		{"then chain", "function f() { Promise.resolve().then(f) } f(); 1"},
		{"un-awaited async loop", "(async () => { for (;;) await null })(); 1"},
		{"async busy loop after await", "(async () => { await null; for (;;) {} })(); 1"},
		{"handled rejection goes on", "function f() { Promise.resolve().then(f).catch(() => f()) } f(); 1"},
		{"timer queues jobs", "setTimeout(function f() { Promise.resolve().then(f) }, 1); 1"},
		{"awaited cell", "await new Promise(() => { (function f() { queueMicrotask(f) })() })"},
	}
	for _, strict := range []bool{true, false} {
		w := newWorker(t, testEngine(t, strict), WorkerOptions{})
		mustRun(t, w, "let kept = 'yes'", StatusOK)
		for _, c := range cases {
			r := runWithTimeout(w, c.code, 100*time.Millisecond)
			if r.Status != StatusTimeout || r.Discontinuous() {
				t.Errorf("strict=%v %s: %s; want timeout, state kept", strict, c.name, describe(r))
			}
			if strings.Contains(r.Stderr, "interrupted") {
				t.Errorf("strict=%v %s: the stop shows up on stderr: %q", strict, c.name, r.Stderr)
			}
			if got := value(mustRun(t, w, "kept", StatusOK)); got != `"yes"` {
				t.Errorf("strict=%v after %s: kept = %s", strict, c.name, got)
			}
		}
		// Nothing of the stopped cells runs on in later ones.
		mustRun(t, w, "globalThis.ticks = 0; Promise.resolve().then(() => ticks++); 0", StatusOK)
		if got := value(mustRun(t, w, "ticks", StatusOK)); got != "1" {
			t.Errorf("strict=%v: a stopped cell's jobs ran on: ticks = %s", strict, got)
		}
	}
}

// TestJSValuePrinterUsesIntrinsics: code that replaces built-ins (their
// prototypes, or the global names) cannot change how values print, nor
// break console.log or the timers.
func TestJSValuePrinterUsesIntrinsics(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	// Values made before the built-ins are spoiled.
	mustRun(t, w, `globalThis.made = {map: new Map([["k", 1]]), set: new Set([1, 2]), date: new Date(0),
		u8: new Uint8Array([7, 8]), err: new TypeError("t"), re: /a+/g}`, StatusOK)
	mustRun(t, w, `
		Array.prototype.push = function () { return 0 };
		Array.prototype.join = function () { return "JOINED" };
		Array.prototype.includes = function () { return true };
		Array.prototype.map = function () { return [] };
		Array.prototype.slice = function () { return [] };
		Array.prototype.pop = function () {};
		Array.prototype[Symbol.iterator] = function* () {};
		Object.keys = function () { return [] };
		Object.getOwnPropertyDescriptor = function () { return undefined };
		Object.getPrototypeOf = function () { return null };
		Object.is = function () { return false };
		Object.prototype.toString = function () { return "[object Nope]" };
		Function.prototype.call = function () { return "CALLED" };
		Function.prototype.apply = function () { return "APPLIED" };
		Function.prototype.bind = function () { return null };
		Function.prototype.toString = function () { return "class X {}" };
		String.prototype.slice = function () { return "" };
		String.prototype.includes = function () { return false };
		String.prototype.replace = function () { return "" };
		String.prototype.trimEnd = function () { return "" };
		RegExp.prototype.exec = function () { return null };
		RegExp.prototype.test = function () { return false };
		RegExp.prototype.toString = function () { return "/nope/" };
		Map.prototype.entries = function () { return [][Symbol.iterator]() };
		Map.prototype.set = function () { return this };
		Map.prototype.get = function () { return undefined };
		Map.prototype.has = function () { return false };
		Map.prototype.delete = function () { return false };
		Map.prototype.values = function* () {};
		Map.prototype[Symbol.iterator] = function* () {};
		Set.prototype.values = function* () {};
		Set.prototype[Symbol.iterator] = function* () {};
		Date.prototype.toISOString = function () { return "never" };
		Date.prototype.getTime = function () { return NaN };
		Date.now = function () { return 0 };
		JSON.stringify = function () { return "JSON" };
		Math.min = function () { return 0 };
		Math.max = function () { return 0 };
		Promise.prototype.then = function () { return this };
		Promise.resolve = function () { return null };
		Symbol.prototype.toString = function () { return "nope" };
		globalThis.Object = null; globalThis.Array = null; globalThis.JSON = null;
		globalThis.String = null; globalThis.Map = null; globalThis.Set = null;
		globalThis.Error = null; globalThis.Math = null; globalThis.Date = null;
		globalThis.ArrayBuffer = null; globalThis.Promise = null; globalThis.Reflect = null;
		globalThis.isNaN = null; globalThis.Number = null; globalThis.parseInt = null;
		globalThis.parseFloat = null; globalThis.Symbol = null;
	`, StatusOK)
	cases := []struct{ code, want string }{
		{"[1, 2, [3]]", "[1, 2, [3]]"},
		{"({a: 1, 'b-c': 'x', d: [true], e: undefined})", `{a: 1, "b-c": "x", d: [true], e: undefined}`},
		{"'str'", `"str"`},
		{"(function f() {})", "[Function: f]"},
		{"made.u8", "Uint8Array(2) [7, 8]"},
		{"made.date", "1970-01-01T00:00:00.000Z"},
		{"made.set", "Set(2) {1, 2}"},
		{"made.map", `Map(1) {"k" => 1}`},
		{"made.re", "/a+/g"},
		{"let cyc = {n: 1}; cyc.self = cyc; cyc", "{n: 1, self: [Circular]}"},
		{"[-0, 10n, true, null]", "[-0, 10n, true, null]"},
		{"[, 1]", "[<empty>, 1]"},
	}
	for _, c := range cases {
		if got := value(mustRun(t, w, c.code, StatusOK)); got != c.want {
			t.Errorf("%s printed as %s; want %s", c.code, got, c.want)
		}
	}
	if got := value(mustRun(t, w, "made.err", StatusOK)); !strings.HasPrefix(got, `TypeError: t`) {
		t.Errorf("an error printed as %s", got)
	}
	r := mustRun(t, w, "console.log('%s=%d', 'n', 42, [1, 2], {k: 'v'}); print('p')", StatusOK)
	if r.Stdout != "n=42 [1, 2] {k: \"v\"}\np\n" {
		t.Errorf("console.log after replaced built-ins: %q", r.Stdout)
	}
	r = mustRun(t, w, "let fired = 0; setTimeout(() => { fired++; print('t', fired) }, 1); 'set'", StatusOK)
	if r.Stdout != "t 1\n" {
		t.Errorf("setTimeout after replaced built-ins: stdout %q", r.Stdout)
	}
	r = mustRun(t, w, "queueMicrotask(() => print('m')); 1", StatusOK)
	if r.Stdout != "m\n" {
		t.Errorf("queueMicrotask after replaced built-ins: stdout %q", r.Stdout)
	}
}

// TestPythonStopIgnoresSignalHandlers: execd's stop request is not the
// user's SIGINT. Code that ignores SIGINT or installs its own handler is
// still stopped by its deadline, as a timeout, with its state kept, and its
// handler is never called for it.
func TestPythonStopIgnoresSignalHandlers(t *testing.T) {
	for _, c := range []struct{ name, setup string }{
		{"SIG_IGN", "signal.signal(signal.SIGINT, signal.SIG_IGN)"},
		{"handler that returns", "signal.signal(signal.SIGINT, lambda *a: None)"},
		{"handler that records", "signal.signal(signal.SIGINT, lambda *a: calls.append(a[0]))"},
		{"handler that loops", "def h(*a):\n    while True: pass\nsignal.signal(signal.SIGINT, h)"},
		{"handler that raises", "def h(*a):\n    raise ValueError('mine')\nsignal.signal(signal.SIGINT, h)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newPyWorker(t, WorkerOptions{})
			mustRun(t, w, "import signal\nkept = [1, 2]\ncalls = []\n"+c.setup+"\nmine = signal.getsignal(signal.SIGINT)", StatusOK)
			for _, loop := range []string{"while True: pass", "import time\ntime.sleep(3600)", "try:\n    while True: pass\nexcept KeyboardInterrupt:\n    while True: pass"} {
				r := runWithTimeout(w, loop, 100*time.Millisecond)
				if r.Status != StatusTimeout || r.Discontinuous() {
					t.Fatalf("%q: %s; want timeout, state kept", loop, firstLines(describe(r), 8))
				}
				if strings.Contains(r.Stderr, "Signal") || strings.Contains(r.Stderr, "Traceback") {
					t.Errorf("%q: stderr %q", loop, r.Stderr)
				}
			}
			if got := pyValue(t, w, "kept, calls"); got != "([1, 2], [])" {
				t.Fatalf("after the timeouts: %s; want the state kept and the handler never called", got)
			}
			// The code's own signal setting is left as it made it.
			if got := pyValue(t, w, "signal.getsignal(signal.SIGINT) is mine"); got != "True" {
				t.Errorf("SIGINT disposition changed: %s", got)
			}
		})
	}
}

// TestPythonRecursionLimitClamped: a recursion limit raised beyond what the
// guest's stacks hold is clamped, so deep recursion, in Python or through C,
// ends at once in RecursionError and the namespace survives.
func TestPythonRecursionLimitClamped(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	mustRun(t, w, "import sys\nkept = 'yes'", StatusOK)
	r := mustRun(t, w, "sys.setrecursionlimit(10**6)\nsys.getrecursionlimit()", StatusOK)
	limit, err := strconv.Atoi(value(r))
	if err != nil || limit >= 1_000_000 || limit < 1000 {
		t.Errorf("recursion limit after setrecursionlimit(10**6) = %s; want clamped, at least the default 1000", value(r))
	}
	if !strings.Contains(r.Stderr, "RuntimeWarning") {
		t.Errorf("no warning for the clamped limit: stderr %q", r.Stderr)
	}
	deep := []struct{ name, code string }{
		{"python", "def f(n):\n    return f(n + 1)\nf(0)"},
		{"repr of nested list", "l = []\nfor _ in range(200000):\n    l = [l]\nrepr(l)"},
		{"repr of nested dict", "d = {}\nfor _ in range(200000):\n    d = {1: d}\nrepr(d)"},
		{"str of nested tuple", "x = ()\nfor _ in range(200000):\n    x = (x,)\nstr(x)"},
		{"nested list ==", "a, b = [], []\nfor _ in range(200000):\n    a, b = [a], [b]\na == b"},
		{"json.dumps", "import json\nl = []\nfor _ in range(200000):\n    l = [l]\njson.dumps(l)"},
		{"pickle.dumps", "import pickle\nl = []\nfor _ in range(200000):\n    l = [l]\npickle.dumps(l)"},
		{"copy.deepcopy", "import copy\nl = []\nfor _ in range(200000):\n    l = [l]\ncopy.deepcopy(l)"},
		{"user __repr__", "class R:\n    def __init__(self, n): self.n = n\n    def __repr__(self): return repr(R(self.n + 1))\nrepr(R(0))"},
		{"__init__ chain", "class C:\n    def __init__(self, n): C(n + 1)\nC(0)"},
		{"__getattr__ chain", "class G:\n    def __getattr__(self, k): return getattr(self, k + 'x')\nG().a"},
		{"map through C", "def m(n): return list(map(m, [n + 1]))\nm(0)"},
		{"sorted key through C", "def s(n): return sorted([n], key=lambda v: s(v + 1))\ns(0)"},
		{"generator chain", "def g(n):\n    yield from g(n + 1)\nnext(g(0))"},
		{"nested isinstance", "class M(type):\n    def __instancecheck__(cls, o): return isinstance(o, M2)\nclass M2(metaclass=M): pass\nisinstance(1, M2)"},
	}
	for _, c := range deep {
		// The deadline only bounds a failure: RecursionError comes long before.
		r := runWithTimeout(w, c.code, 30*time.Second)
		if r.Status != StatusError || r.Error == nil || r.Error.Type != "RecursionError" || r.Discontinuous() {
			t.Errorf("%s: %s; want RecursionError, state kept", c.name, firstLines(describe(r), 6))
			if r.Discontinuous() {
				mustRunFresh(t, w, "import sys\nkept = 'yes'\nsys.setrecursionlimit(10**6)")
			}
			continue
		}
		// The traceback keeps its two ends, not thousands of frames.
		if n := strings.Count(r.Error.Stack, "  File \""); n > 100 || !strings.Contains(r.Error.Stack, "<cell-") {
			t.Errorf("%s: the traceback shows %d frames:\n%s", c.name, n, firstLines(r.Error.Stack, 10))
		}
	}
	if got := pyValue(t, w, "kept"); got != "'yes'" {
		t.Fatalf("after deep recursion: kept = %s", got)
	}
	// Within the clamped limit, deep Python recursion works, and so does
	// C recursion as deep as the stack holds.
	if got := pyValue(t, w, "def d(n): return n if n == 0 else d(n - 1) + 1\nd(sys.getrecursionlimit() - 50)"); got != strconv.Itoa(limit-50) {
		t.Errorf("recursion just inside the limit = %s", got)
	}
	if got := pyValue(t, w, "l = []\nfor _ in range(10000):\n    l = [l]\nlen(repr(l))"); got != "20002" {
		t.Errorf("repr of a list nested 10000 deep = %s", got)
	}
	// Deep source and deep syntax trees compile or fail cleanly (the parser
	// says MemoryError when source is too deeply nested).
	for _, code := range []string{
		"compile('(' * 10**5 + ')' * 10**5, 's', 'eval')",
		"compile('-' * 10**5 + '1', 's', 'eval')",
		"compile('[' * 5000 + ']' * 5000, 's', 'eval')",
		"compile('not ' * 10**5 + 'x', 's', 'eval')",
		"import ast\ne = ast.Constant(1)\nfor _ in range(10**5):\n    e = ast.UnaryOp(ast.USub(), e)\ncompile(ast.fix_missing_locations(ast.Expression(e)), 's', 'eval')",
		"import ast\ne = ast.Constant(1)\nfor _ in range(6000):\n    e = ast.Call(ast.Name('f', ast.Load()), [e], [])\ncompile(ast.fix_missing_locations(ast.Expression(e)), 's', 'eval')",
	} {
		r := w.Run(context.Background(), code, RunOptions{})
		if r.Discontinuous() || (r.Status != StatusOK && r.Status != StatusError && r.Status != StatusOOM) {
			t.Errorf("%s: %s", code, firstLines(describe(r), 6))
		}
		if r.Discontinuous() {
			mustRunFresh(t, w, "import sys\nkept = 'yes'\nsys.setrecursionlimit(10**6)")
		}
	}
	// A limit below the clamp is honoured exactly.
	if got := pyValue(t, w, "sys.setrecursionlimit(1500)\nsys.getrecursionlimit()"); got != "1500" {
		t.Errorf("setrecursionlimit(1500) gave %s", got)
	}
	mustRun(t, w, "sys.setrecursionlimit(0)", StatusError)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

// TestPythonStdioRestoredEachRun: code that replaces or closes sys.stdout
// and sys.stderr loses only its own cell's output: the next run prints to
// the capture again.
func TestPythonStdioRestoredEachRun(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	for _, spoil := range []string{
		"import sys\nsys.stdout = None\nsys.stderr = None",
		"import sys, io\nsys.stdout = io.StringIO()\nsys.stderr = io.StringIO()",
		"import sys\nsys.stdout.close()\nsys.stderr.close()",
		"import sys\nsys.stdout = sys.__stdout__ = None\nsys.stderr = sys.__stderr__ = None",
	} {
		mustRun(t, w, spoil, StatusOK)
		r := mustRun(t, w, "import sys\nprint('out')\nprint('err', file=sys.stderr)\n1", StatusOK)
		if r.Stdout != "out\n" || r.Stderr != "err\n" {
			t.Errorf("after %q: stdout %q stderr %q", spoil, r.Stdout, r.Stderr)
		}
		// An error's traceback is reported, and the value printed, too.
		r = mustRun(t, w, spoil+"\nraise ValueError('v')", StatusError)
		if r.Error.Type != "ValueError" {
			t.Errorf("error after %q: %s", spoil, describe(r))
		}
	}
}

// TestPythonPrinterUsesOwnBuiltins: replacing builtins (repr, len, ...)
// changes the code's own calls, not how the cell's value is printed.
func TestPythonPrinterUsesOwnBuiltins(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	mustRun(t, w, "import builtins\nfor n in ('repr', 'len', 'isinstance', 'compile', 'eval', 'str', 'type', 'next', 'iter'):\n    setattr(builtins, n, None)", StatusOK)
	if got := pyValue(t, w, "[1, 'a']"); got != "[1, 'a']" {
		t.Errorf("value = %s", got)
	}
	r := mustRun(t, w, "raise KeyError('k')", StatusError)
	if r.Error.Type != "KeyError" || !strings.Contains(r.Error.Stack, "KeyError") {
		t.Errorf("error = %s", describe(r))
	}
}

// TestPythonSmallObjectBombLeavesWorkspaceUsable: a memory bomb made of
// small objects (each its own malloc: CPython for WASI has no pymalloc)
// meets the guest's heap cap, not the end of linear memory, so the
// workspace answers afterwards and its memory can be freed and reused.
func TestPythonSmallObjectBombLeavesWorkspaceUsable(t *testing.T) {
	e := heapCapEngine(t) // the shared compilation cache: no compilation of its own
	for _, bomb := range []string{
		"x = []\nwhile True: x.append(str(len(x)))",
		"x = {}\nwhile True: x[len(x)] = [len(x)]",
		"x = []\nwhile True: x.append(bytearray(1 << 20))",
	} {
		w, err := e.NewWorker(context.Background(), "python", WorkerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mustRun(t, w, "keep = 'kept'", StatusOK)
		if r := mustRun(t, w, bomb, StatusOOM); r.Error == nil || r.Error.Type != "MemoryError" {
			t.Errorf("%q: %s", bomb, describe(r))
		}
		if got := pyValue(t, w, "keep, len(x) > 0"); got != "('kept', True)" {
			t.Errorf("after %q: %s", bomb, got)
		}
		mustRun(t, w, "del x\nimport gc\ngc.collect()", StatusOK)
		if got := pyValue(t, w, "len(bytearray(20 << 20))"); got != "20971520" {
			t.Errorf("memory not reusable after %q: %s", bomb, got)
		}
		w.Close()
	}
}
