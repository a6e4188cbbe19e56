package worker

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/config"
)

// engines are shared by the tests of this package: compiling a guest is the
// slow part. Key: strict termination on/off. Every engine of the tests
// shares one compilation cache (testCacheDir), so that only the first
// compiles; base images are cached there too.
var (
	enginesMu    sync.Mutex
	engines      = map[bool]*Engine{}
	testCacheDir string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "execd-worker-cache")
	if err != nil {
		panic(err)
	}
	testCacheDir = dir
	code := m.Run()
	for _, e := range engines {
		e.Close(context.Background())
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// testConfig is the configuration of the tests' engines: the daemon's
// defaults where they matter (Python's preload), the shared cache.
func testConfig(strict bool) Config {
	return Config{StrictTermination: strict, CacheDir: testCacheDir, PythonPreload: config.Default().Sandbox.PythonPreload}
}

// testEngine fails the test (never skips) when the guest is not built.
func testEngine(t testing.TB, strict bool) *Engine {
	t.Helper()
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if e, ok := engines[strict]; ok {
		return e
	}
	e := startEngine(t, testConfig(strict))
	engines[strict] = e
	return e
}

// newTestEngine is an engine of the test's own, closed with it.
func newTestEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e := startEngine(t, cfg)
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// startEngine makes an engine and waits until its guests are ready.
func startEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := NewEngine(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("NewEngine: %v (build the guests first: make guests)", err)
	}
	for _, lang := range e.Languages() {
		if err := e.Wait(context.Background(), lang); err != nil {
			e.Close(context.Background())
			t.Fatalf("guest %s: %v", lang, err)
		}
	}
	return e
}

func newWorker(t testing.TB, e *Engine, opts WorkerOptions) *Worker {
	t.Helper()
	w, err := e.NewWorker(context.Background(), "javascript", opts)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func value(r Result) string {
	if r.Value == nil {
		return "<nil>"
	}
	return *r.Value
}

func describe(r Result) string {
	s := string(r.Status) + " value=" + value(r)
	if r.Error != nil {
		s += " error=" + r.Error.Type + ": " + r.Error.Message
		if r.Error.Stack != "" {
			s += "\n" + r.Error.Stack
		}
	}
	if r.Discontinuous() {
		s += " reset"
	}
	return s
}

// mustRun runs code and fails unless the status is want.
func mustRun(t testing.TB, w *Worker, code string, want Status) Result {
	t.Helper()
	r := w.Run(context.Background(), code, RunOptions{})
	if r.Status != want {
		t.Fatalf("Run(%.120q) = %s; want status %s\nstdout: %.300s\nstderr: %.500s", code, describe(r), want, r.Stdout, r.Stderr)
	}
	return r
}

// mustRunFresh runs code that must complete on a new instance: the one
// before was discarded (FreshInstance).
func mustRunFresh(t testing.TB, w *Worker, code string) Result {
	t.Helper()
	r := mustRun(t, w, code, StatusOK)
	if !r.FreshInstance {
		t.Fatalf("Run(%.120q) = %s on the same instance; want a fresh one", code, describe(r))
	}
	return r
}

func TestREPLSemantics(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	tests := []struct {
		code      string
		status    Status
		value     string // "<nil>" for none
		stdout    string
		stderr    string
		errType   string
		errSubstr string
	}{
		{code: "1+1", status: StatusOK, value: "2"},
		{code: "'abc'", status: StatusOK, value: `"abc"`},
		{code: "'a\"b\\n'", status: StatusOK, value: `"a\"b\n"`},
		{code: "undefined", status: StatusOK, value: "<nil>"},
		{code: "null", status: StatusOK, value: "null"},
		{code: "let unused = 1", status: StatusOK, value: "<nil>"},
		{code: "-0", status: StatusOK, value: "-0"},
		{code: "10n ** 20n", status: StatusOK, value: "100000000000000000000n"},
		{code: "[1, 'x', {y: null, 'a-b': true}]", status: StatusOK, value: `[1, "x", {y: null, "a-b": true}]`},
		{code: "new Map([[1, 'one']])", status: StatusOK, value: `Map(1) {1 => "one"}`},
		{code: "new Set([1, 2])", status: StatusOK, value: "Set(2) {1, 2}"},
		{code: "(function foo() {})", status: StatusOK, value: "[Function: foo]"},
		{code: "class K {}; K", status: StatusOK, value: "[class K]"},
		{code: "const cyc = {}; cyc.self = cyc; cyc", status: StatusOK, value: "{self: [Circular]}"},
		{code: "new Uint8Array([1, 2])", status: StatusOK, value: "Uint8Array(2) [1, 2]"},
		{code: "new Date(0)", status: StatusOK, value: "1970-01-01T00:00:00.000Z"},
		{code: "console.log('hi', 1, {a: [2]}); console.error('bad')", status: StatusOK, value: "<nil>", stdout: "hi 1 {a: [2]}\n", stderr: "bad\n"},
		{code: "print('%s=%d', 'n', 42)", status: StatusOK, value: "<nil>", stdout: "n=42\n"},
		{code: "console.warn('w'); 7", status: StatusOK, value: "7", stderr: "w\n"},
		{code: "throw new TypeError('nope')", status: StatusError, value: "<nil>", errType: "TypeError", errSubstr: "nope"},
		{code: "null.x", status: StatusError, value: "<nil>", errType: "TypeError", errSubstr: "null"},
		{code: "throw 'boom'", status: StatusError, value: "<nil>", errType: "Uncaught", errSubstr: `"boom"`},
		{code: "throw 42", status: StatusError, value: "<nil>", errType: "Uncaught", errSubstr: "42"},
		{code: "throw {code: 7}", status: StatusError, value: "<nil>", errType: "Uncaught", errSubstr: "{code: 7}"},
		{code: "throw null", status: StatusError, value: "<nil>", errType: "Uncaught", errSubstr: "null"},
		{code: "throw undefined", status: StatusError, value: "<nil>", errType: "Uncaught", errSubstr: "undefined"},
		{code: "throw Symbol('s')", status: StatusError, value: "<nil>", errType: "Uncaught", errSubstr: "Symbol(s)"},
		{code: "let = ;", status: StatusError, value: "<nil>", errType: "SyntaxError"},
		{code: "await new Promise(r => r(7))", status: StatusOK, value: "7"},
		{code: "const v = await Promise.resolve(3); v * 2", status: StatusOK, value: "6"},
		{code: "await Promise.reject(new RangeError('r'))", status: StatusError, value: "<nil>", errType: "RangeError", errSubstr: "r"},
		{code: "await new Promise(() => {})", status: StatusError, value: "<nil>", errType: "Error", errSubstr: "never settled"},
		{code: "Promise.resolve().then(() => console.log('job')); 1", status: StatusOK, value: "1", stdout: "job\n"},
		{code: "console.log('before'); throw new Error('after')", status: StatusError, value: "<nil>", stdout: "before\n", errType: "Error", errSubstr: "after"},
		{code: "await new Promise(r => setTimeout(r, 5)); 'slept'", status: StatusOK, value: `"slept"`},
		{code: "setTimeout(() => console.log('later'), 1); 'now'", status: StatusOK, value: `"now"`, stdout: "later\n"},
		{code: "let k = 0; await new Promise(r => { const iv = setInterval(() => { if (++k == 3) { clearInterval(iv); r() } }, 1) }); k", status: StatusOK, value: "3"},
		{code: "setTimeout(() => { throw new TypeError('in timer') }, 1); 1", status: StatusError, value: "<nil>", errType: "TypeError", errSubstr: "in timer"},
		{code: "queueMicrotask(() => print('micro')); 2", status: StatusOK, value: "2", stdout: "micro\n"},
		{code: "Promise.reject('nobody'); 5", status: StatusOK, value: "5", stderr: "Uncaught (in promise) \"nobody\"\n"},
		{code: "typeof process + typeof require + typeof fetch", status: StatusOK, value: `"undefinedfunctionfunction"`}, // require: npm packages (modules.js)
	}
	for _, tc := range tests {
		r := w.Run(context.Background(), tc.code, RunOptions{})
		if r.Status != tc.status || value(r) != tc.value || r.Stdout != tc.stdout || r.Stderr != tc.stderr {
			t.Errorf("Run(%q) = %s stdout=%q stderr=%q; want %s value=%s stdout=%q stderr=%q",
				tc.code, describe(r), r.Stdout, r.Stderr, tc.status, tc.value, tc.stdout, tc.stderr)
			continue
		}
		if tc.errType == "" {
			if r.Error != nil {
				t.Errorf("Run(%q): unexpected error %+v", tc.code, *r.Error)
			}
			continue
		}
		if r.Error == nil || r.Error.Type != tc.errType || !strings.Contains(r.Error.Message, tc.errSubstr) {
			t.Errorf("Run(%q) error = %+v; want type %s containing %q", tc.code, r.Error, tc.errType, tc.errSubstr)
		}
		if r.Discontinuous() {
			t.Errorf("Run(%q): Reset set", tc.code)
		}
	}
}

func TestErrorHasStack(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	r := mustRun(t, w, "function inner() { throw new Error('deep') }\ninner()", StatusError)
	if !strings.Contains(r.Error.Stack, "inner") || !strings.Contains(r.Error.Stack, "<cell>") {
		t.Errorf("stack = %q; want frames of inner and <cell>", r.Error.Stack)
	}
}

func TestStateAcrossRuns(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	steps := []struct{ code, value string }{
		{"let x = 1", "<nil>"},
		{"x", "1"},
		{"let x = 2", "<nil>"}, // re-running a cell must not be a redeclaration
		{"x", "2"},
		{"const c = 'a'", "<nil>"},
		{"const c = 'b'; c", `"b"`},
		{"class A { m() { return 1 } }", "<nil>"},
		{"class A { m() { return 2 } }; new A().m()", "2"},
		{"var v = 5; function f() { return v + x }", "<nil>"},
		{"f()", "7"},
		{"let x = 10; f()", "15"}, // closures see the new binding
		{"globalThis.g = [1]; g.push(2); g", "[1, 2]"},
		{"let t = await Promise.resolve('tla')", "<nil>"},
		{"t", `"tla"`},
	}
	for _, s := range steps {
		r := mustRun(t, w, s.code, StatusOK)
		if value(r) != s.value {
			t.Errorf("Run(%q) value = %s; want %s", s.code, value(r), s.value)
		}
	}
	r := mustRun(t, w, "c = 'z'", StatusError) // const stays const
	if r.Error.Type != "TypeError" {
		t.Errorf("assigning a const: %+v", *r.Error)
	}
}

type progressRec struct {
	mu    sync.Mutex
	calls []string
	fn    func()
}

func (p *progressRec) Progress(done, total float64, msg string) {
	p.mu.Lock()
	p.calls = append(p.calls, strings.TrimSpace(strings.Join([]string{ftoa(done), ftoa(total), msg}, " ")))
	fn := p.fn
	p.mu.Unlock()
	if fn != nil {
		fn()
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func TestProgress(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	rec := &progressRec{}
	r := w.Run(context.Background(), "progress(1, 3, 'one'); progress(2, 'two'); progress(2.5); progress(3, 3)", RunOptions{Sink: rec})
	if r.Status != StatusOK {
		t.Fatalf("Run: %s", describe(r))
	}
	want := []string{"1 3 one", "2 0 two", "2.5 0", "3 3"}
	if strings.Join(rec.calls, "|") != strings.Join(want, "|") {
		t.Errorf("progress calls = %q; want %q", rec.calls, want)
	}
	// A nil sink is fine.
	mustRun(t, w, "progress(1, 2, 'x'); 1", StatusOK)
}

// runCancelledInLoop starts code that calls progress() once and then loops;
// the progress call cancels the run's context.
func runCancelledInLoop(t *testing.T, w *Worker, code string) Result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &progressRec{fn: cancel}
	return w.Run(ctx, code, RunOptions{Sink: rec})
}

func TestSoftInterruptKeepsState(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{true, false} {
		w := newWorker(t, testEngine(t, strict), WorkerOptions{})
		mustRun(t, w, "let kept = 'yes'; let n = 0", StatusOK)
		r := runCancelledInLoop(t, w, "progress(1); while (true) { n++ }")
		if r.Status != StatusInterrupted || r.Discontinuous() {
			t.Fatalf("strict=%v: while(true) cancelled: %s; want interrupted without reset", strict, describe(r))
		}
		r = mustRun(t, w, "kept + ' ' + (n > 0)", StatusOK)
		if value(r) != `"yes true"` {
			t.Errorf("strict=%v: state after interrupt = %s", strict, value(r))
		}
		// A timer that never ends is stopped, and does not outlive its cell.
		r = runCancelledInLoop(t, w, "progress(1); globalThis.fired = 0; setInterval(() => fired++, 1)")
		if r.Status != StatusInterrupted || r.Discontinuous() {
			t.Fatalf("strict=%v: endless setInterval cancelled: %s", strict, describe(r))
		}
		mustRun(t, w, "fired = 0", StatusOK)
		mustRun(t, w, "await new Promise(r => setTimeout(r, 20))", StatusOK)
		if r := mustRun(t, w, "fired", StatusOK); value(r) != "0" {
			t.Errorf("strict=%v: interval still firing after its cell was interrupted: %s", strict, value(r))
		}
		// An interrupt cannot be caught by the code.
		r = runCancelledInLoop(t, w, "progress(1); let caught = false; try { for (;;) {} } catch (e) { caught = true; for (;;) {} }")
		if r.Status != StatusInterrupted || r.Discontinuous() {
			t.Fatalf("strict=%v: catch around the loop: %s", strict, describe(r))
		}
	}
}

func TestTimeoutStatus(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := w.Run(ctx, "for (;;) {}", RunOptions{})
	if r.Status != StatusTimeout || r.Error == nil || !strings.Contains(r.Error.Message, "timed out") {
		t.Fatalf("deadline: %s", describe(r))
	}
	mustRun(t, w, "1", StatusOK)

	// A context that is already done runs nothing.
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	r = w.Run(done, "globalThis.ran = true", RunOptions{})
	if r.Status != StatusInterrupted {
		t.Fatalf("cancelled before Run: %s", describe(r))
	}
	if r := mustRun(t, w, "typeof ran", StatusOK); value(r) != `"undefined"` {
		t.Errorf("code ran under a cancelled context")
	}
}

func TestHardKillResets(t *testing.T) {
	t.Parallel()
	// A grace of 1ns leaves no time for the soft interrupt: the kill path.
	cfg := testConfig(true)
	cfg.InterruptGrace = time.Nanosecond
	e := newTestEngine(t, cfg)
	w := newWorker(t, e, WorkerOptions{})
	mustRun(t, w, "let before = 1", StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := w.Run(ctx, "for (;;) {}", RunOptions{})
	if r.Status != StatusTimeout || !r.Discontinuous() || r.Discarded != DiscardKilled || r.FreshInstance {
		t.Fatalf("killed run: %s (discarded %q, fresh %v); want timeout with reset, discarded as killed", describe(r), r.Discarded, r.FreshInstance)
	}
	if n := e.Abandoned(); n != 0 {
		t.Fatalf("the kill switch did not stop the guest: %d call(s) still running", n)
	}
	r = mustRunFresh(t, w, "typeof before")
	if !r.Discontinuous() || value(r) != `"undefined"` || !r.FreshInstance || r.Discarded != "" {
		t.Errorf("after kill: %s (fresh %v, discarded %q)", describe(r), r.FreshInstance, r.Discarded)
	}
	r = mustRun(t, w, "1", StatusOK)
	if r.Discontinuous() || r.FreshInstance {
		t.Errorf("reset reported twice")
	}
}

func TestCrashReplacesInstance(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "let s = 1", StatusOK)
	// Simulate a trap: the instance is gone under the worker.
	w.inst.mod.Close(context.Background())
	r := w.Run(context.Background(), "s", RunOptions{})
	if r.Status != StatusError || !r.Discontinuous() || r.Error == nil || r.Error.Type != "SandboxCrash" || r.Discarded != DiscardCrashed {
		t.Fatalf("crashed run: %s (discarded %q)", describe(r), r.Discarded)
	}
	if r.Error.Stack != "" || strings.Contains(r.Error.Message, "\n") || !strings.Contains(r.Error.Message, "next call starts a new interpreter") {
		t.Errorf("the crash is not told in one line the user can act on: %q, stack %q", r.Error.Message, r.Error.Stack)
	}
	r = mustRunFresh(t, w, "typeof s")
	if value(r) != `"undefined"` {
		t.Errorf("after crash: %s", describe(r))
	}
}

func TestDeepRecursion(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "let alive = 'still'", StatusOK)
	r := mustRun(t, w, "function f(n) { return f(n + 1) + 1 }; f(0)", StatusError)
	if r.Error.Type != "InternalError" && r.Error.Type != "RangeError" {
		t.Errorf("recursion error = %+v", *r.Error)
	}
	for _, code := range []string{
		"let nest = []; for (let i = 0; i < 200000; i++) nest = [nest]; JSON.stringify(nest).length",
		"let on = {}; for (let i = 0; i < 200000; i++) on = {on}; String(on.on.on === undefined)",
		"const p = new Proxy({}, {get(t, k, r) { return r[k] }}); p.x",
		"function g(n) { return [1].map(() => g(n + 1)) }; g(0)",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r := w.Run(ctx, code, RunOptions{})
		cancel()
		if r.Discontinuous() {
			t.Logf("%.40q reset the instance: %s", code, describe(r))
			continue
		}
		if r.Status != StatusOK && r.Status != StatusError && r.Status != StatusTimeout {
			t.Errorf("%.40q: %s", code, describe(r))
		}
	}
	r = w.Run(context.Background(), "typeof alive", RunOptions{})
	if r.Status != StatusOK {
		t.Fatalf("after recursion: %s", describe(r))
	}
}

func TestOutOfMemory(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "let keep = 'kept'", StatusOK)
	for _, code := range []string{
		"new ArrayBuffer(1024 ** 3)",                                 // 1 GB at once
		"const big = []; for (;;) big.push(new Uint8Array(1 << 20))", // piecewise
		"let objs = []; for (;;) objs.push({n: objs.length})",        // many small objects, kept
		"objs.length > 0",  // the heap is still full of objs: this must still run
		"objs = null; 'x'", // and freeing must work
		"let strs = []; for (;;) strs.push('abc'.repeat(1000) + strs.length)",
		"strs = null",
		"const bigs = []; for (;;) bigs.push(new Array(1e6).fill(0))",
	} {
		r := w.Run(context.Background(), code, RunOptions{})
		if r.Discontinuous() {
			t.Fatalf("%.40q: instance reset: %s", code, describe(r))
		}
		if r.Status == StatusOOM && (r.Error == nil || !strings.Contains(r.Error.Message, "out of memory")) {
			t.Errorf("%.40q: oom without message: %s", code, describe(r))
		}
		if strings.Contains(code, "for (;;)") || strings.Contains(code, "1024 ** 3") {
			if r.Status != StatusOOM {
				t.Errorf("%.40q: %s; want oom", code, describe(r))
			}
		} else if r.Status != StatusOK {
			t.Errorf("%.40q after oom: %s; want ok", code, describe(r))
		}
	}
	r := mustRun(t, w, "try { new ArrayBuffer(1024 ** 3) } catch (e) { 'caught ' + e.message }", StatusOK)
	if value(r) != `"caught out of memory"` {
		t.Errorf("caught oom = %s", value(r))
	}
	if r := mustRun(t, w, "keep", StatusOK); value(r) != `"kept"` {
		t.Errorf("state after oom = %s", value(r))
	}
}

func TestOutputFlood(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	w := newWorker(t, e, WorkerOptions{})
	r := mustRun(t, w, "const line = 'x'.repeat(1 << 20); for (let i = 0; i < 100; i++) console.log(line); console.log('END'); console.error('e'.repeat(1 << 20))", StatusOK)
	max := e.cfg.MaxOutputBytes
	if !r.Truncated {
		t.Errorf("100 MB of output not marked truncated")
	}
	if len(r.Stdout) > max+100 || len(r.Stderr) > max+100 {
		t.Errorf("kept %d/%d bytes; cap %d", len(r.Stdout), len(r.Stderr), max)
	}
	if !strings.Contains(r.Stdout, "bytes truncated") || !strings.HasSuffix(r.Stdout, "END\n") || !strings.HasPrefix(r.Stdout, "xxxx") {
		t.Errorf("stdout head/tail wrong: %.40q ... %.40q", r.Stdout[:40], r.Stdout[len(r.Stdout)-40:])
	}
	// A long value is truncated too.
	r = mustRun(t, w, "Array(100).fill('y'.repeat(5000))", StatusOK)
	if !r.Truncated || len(value(r)) > max+100 {
		t.Errorf("long value: truncated=%v len=%d", r.Truncated, len(value(r)))
	}
	r = mustRun(t, w, "'small'", StatusOK)
	if r.Truncated || r.Stdout != "" {
		t.Errorf("output leaked into the next run: %+v", r)
	}
}

func TestHostileCode(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{true, false} {
		w := newWorker(t, testEngine(t, strict), WorkerOptions{})
		mustRun(t, w, "let mark = 42", StatusOK)
		cases := []struct {
			name, code string
			ok         []Status
		}{
			{"job flood", "for (;;) Promise.resolve().then(() => {})", []Status{StatusTimeout, StatusOOM}},
			{"catastrophic regex", "/^(a+)+$/.test('a'.repeat(40) + 'b')", []Status{StatusTimeout}},
			{"huge JSON.parse", "JSON.parse('[' + '1,'.repeat(5e6) + '1]').length", []Status{StatusOK, StatusOOM, StatusTimeout}},
			{"huge JSON string", "JSON.parse('\"' + 'x'.repeat(2 ** 27) + '\"').length", []Status{StatusOK, StatusOOM, StatusError, StatusTimeout}},
			{"string doubling", "let s = 'x'; for (;;) s += s", []Status{StatusError, StatusOOM}},
			{"sort with throwing comparator", "[3, 2, 1].sort(() => { throw 'cmp' })", []Status{StatusError}},
			{"getter bomb in value", "({get a() { for (;;) {} }})", []Status{StatusOK, StatusTimeout}},
			{"toString bomb in error", "throw {toString() { for (;;) {} }}", []Status{StatusError, StatusTimeout}},
		}
		for _, c := range cases {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			r := w.Run(ctx, c.code, RunOptions{})
			cancel()
			good := false
			for _, s := range c.ok {
				good = good || r.Status == s
			}
			if !good {
				t.Errorf("strict=%v %s: %s; want one of %v", strict, c.name, describe(r), c.ok)
			}
			if r.Discontinuous() {
				t.Logf("strict=%v %s: instance was reset", strict, c.name)
				mustRunFresh(t, w, "let mark = 42")
			}
			if r := mustRun(t, w, "mark", StatusOK); value(r) != "42" {
				t.Errorf("strict=%v after %s: mark = %s", strict, c.name, value(r))
			}
		}
	}
}
