package worker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Python guest's tests run the real python.wasm with its standard
// library; like the JavaScript ones they fail (never skip) when it is not
// built.

// pyEngine is the engine of the Python tests: the package's shared strict
// engine (the daemon's default), which must have the Python guest.
func pyEngine(t testing.TB) *Engine {
	t.Helper()
	e := testEngine(t, true)
	if !contains(e.Languages(), "python") {
		t.Fatalf("python guest not built (languages: %v): run make guests", e.Languages())
	}
	return e
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func newPyWorker(t testing.TB, opts WorkerOptions) *Worker {
	t.Helper()
	w, err := pyEngine(t).NewWorker(context.Background(), "python", opts)
	if err != nil {
		t.Fatalf("NewWorker(python): %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// pyValue runs code, expects ok, and returns the value ("<nil>" for none).
func pyValue(t *testing.T, w *Worker, code string) string {
	t.Helper()
	return value(mustRun(t, w, code, StatusOK))
}

// TestPythonBattery runs snippets typical of agent code, each in a fresh
// cell of one worker.
func TestPythonBattery(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{Dir: t.TempDir()})
	cases := []struct{ name, code, want string }{
		{"arith", "1+1", "2"},
		{"json", "import json\njson.dumps({'a': [1, 2, {'b': None}]}, sort_keys=True)", `'{"a": [1, 2, {"b": null}]}'`},
		{"json-loads", "json.loads('[1, 2.5, \"x\", true]')", "[1, 2.5, 'x', True]"},
		{"re", "import re\nre.findall(r'(\\w+)@(\\w+)\\.com', 'a@b.com, c@d.com')", "[('a', 'b'), ('c', 'd')]"},
		{"datetime", "import datetime\n(datetime.date(2024, 3, 1) - datetime.timedelta(days=1)).isoformat()", "'2024-02-29'"},
		{"datetime-now", "datetime.datetime.now().year >= 2024", "True"},
		{"collections", "from collections import Counter, defaultdict, deque\nCounter('abracadabra').most_common(2)", "[('a', 5), ('b', 2)]"},
		{"deque", "d = deque([1, 2, 3], maxlen=2)\nd", "deque([2, 3], maxlen=2)"},
		{"dataclasses", "from dataclasses import dataclass, field\n@dataclass(order=True)\nclass P:\n    x: int\n    y: int = 0\n    tags: list = field(default_factory=list)\nsorted([P(2), P(1, 5)])", "[P(x=1, y=5, tags=[]), P(x=2, y=0, tags=[])]"},
		{"decimal", "from decimal import Decimal, getcontext\ngetcontext().prec = 30\nDecimal(1) / Decimal(7)", "Decimal('0.142857142857142857142857142857')"},
		{"fractions", "from fractions import Fraction\nFraction(1, 3) + Fraction(1, 6)", "Fraction(1, 2)"},
		{"statistics", "import statistics\n(statistics.mean([1, 2, 3, 4]), statistics.median([3, 1, 2]), round(statistics.stdev([1, 2, 3, 4]), 4))", "(2.5, 2, 1.291)"},
		{"math", "import math\n(math.isqrt(10**20), round(math.pi, 5))", "(10000000000, 3.14159)"},
		{"itertools", "import itertools\nlist(itertools.islice(itertools.permutations('abc'), 3))", "[('a', 'b', 'c'), ('a', 'c', 'b'), ('b', 'a', 'c')]"},
		{"functools", "import functools\n@functools.lru_cache\ndef fib(n): return n if n < 2 else fib(n-1) + fib(n-2)\nfib(90)", "2880067194370816120"},
		{"hashlib", "import hashlib\nhashlib.sha256(b'abc').hexdigest()", "'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'"},
		{"hashlib-md5", "hashlib.md5(b'').hexdigest()", "'d41d8cd98f00b204e9800998ecf8427e'"},
		{"csv-io", "import csv, io\nbuf = io.StringIO()\ncsv.writer(buf).writerows([['a', 'b'], [1, 'x,y']])\nlist(csv.reader(io.StringIO(buf.getvalue())))", "[['a', 'b'], ['1', 'x,y']]"},
		{"fstring", "name, n = 'world', 3.14159\nf'{name!r:>10} {n:.2f} {n=}'", `"   'world' 3.14 n=3.14159"`},
		{"classes", "class A:\n    def __init__(self, v): self.v = v\n    def __repr__(self): return f'A({self.v})'\nclass B(A):\n    def __add__(self, o): return B(self.v + o.v)\nB(1) + B(2)", "A(3)"},
		{"comprehension", "{k: [i * i for i in range(k)] for k in range(3)}", "{0: [], 1: [0], 2: [0, 1]}"},
		{"zlib", "import zlib\ndata = b'hello ' * 1000\nc = zlib.compress(data)\n(len(c) < 100, zlib.decompress(c) == data, zlib.crc32(b'abc'))", "(True, True, 891568578)"},
		{"gzip", "import gzip\ngzip.decompress(gzip.compress(b'payload'))", "b'payload'"},
		{"zipfile", "import zipfile, io\nb = io.BytesIO()\nwith zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as z: z.writestr('a.txt', 'x' * 100)\nzipfile.ZipFile(b).read('a.txt') == b'x' * 100", "True"},
		{"base64-struct", "import base64, struct\n(base64.b64encode(b'hi'), struct.unpack('<I', b'\\x01\\x00\\x00\\x00'))", "(b'aGk=', (1,))"},
		{"random", "import random\nr = random.Random(42)\nr.randint(1, 100)", "82"},
		{"textwrap-string", "import textwrap, string\ntextwrap.shorten('the quick brown fox jumps', 15) + string.ascii_lowercase[:3]", "'the quick [...]abc'"},
		{"typing-enum", "from typing import NamedTuple\nimport enum\nclass C(enum.Enum):\n    RED = 1\nclass T(NamedTuple):\n    a: int\n(C.RED, T(1))", "(<C.RED: 1>, T(a=1))"},
		{"sleep", "import time\nt = time.monotonic()\ntime.sleep(0.05)\ntime.monotonic() - t >= 0.05", "True"},
		{"unicode", "'héllo wörld ✓'.upper()", "'HÉLLO WÖRLD ✓'"},
		{"generator-none", "def g():\n    yield 1\nnext(g())\nNone", "<nil>"},
		{"statement", "x = 5", "<nil>"},
		{"print-none", "print('hi')", "<nil>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := pyValue(t, w, c.code); got != c.want {
				t.Fatalf("value = %s; want %s", got, c.want)
			}
		})
	}
}

func TestPythonOutputAndState(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	r := mustRun(t, w, "import sys\nprint('out', 1)\nprint('err', file=sys.stderr)\nx = 41", StatusOK)
	if r.Stdout != "out 1\n" || r.Stderr != "err\n" || r.Value != nil {
		t.Fatalf("stdout %q stderr %q value %v", r.Stdout, r.Stderr, r.Value)
	}
	mustRun(t, w, "def inc(v):\n    return v + 1", StatusOK)
	if got := pyValue(t, w, "inc(x)"); got != "42" {
		t.Fatalf("state across calls: %s", got)
	}
	if got := pyValue(t, w, "_ + 1"); got != "43" {
		t.Fatalf("_ holds the last value: %s", got)
	}
	if got := pyValue(t, w, "__name__"); got != "'__main__'" {
		t.Fatalf("__name__ = %s", got)
	}
}

func TestPythonErrors(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	mustRun(t, w, "def f(a):\n    return g(a)\n\ndef g(a):\n    raise ValueError(f'bad {a}')", StatusOK)
	r := mustRun(t, w, "y = 1\nf(3)", StatusError)
	e := r.Error
	if e == nil || e.Type != "ValueError" || e.Message != "bad 3" {
		t.Fatalf("error = %+v", e)
	}
	for _, want := range []string{"Traceback (most recent call last)", `File "<cell-2>", line 2, in <module>`,
		`File "<cell-1>", line 5, in g`, "raise ValueError(f'bad {a}')", "ValueError: bad 3"} {
		if !strings.Contains(e.Stack, want) {
			t.Errorf("stack lacks %q:\n%s", want, e.Stack)
		}
	}
	if strings.Contains(e.Stack, "<execd>") {
		t.Errorf("stack shows the driver:\n%s", e.Stack)
	}
	if got := pyValue(t, w, "y"); got != "1" {
		t.Fatalf("statements before the error ran: y = %s", got)
	}

	r = mustRun(t, w, "x = (1,\nprint(x", StatusError)
	if r.Error.Type != "SyntaxError" || !strings.Contains(r.Error.Stack, "<cell-") {
		t.Fatalf("syntax error = %+v", r.Error)
	}
	r = mustRun(t, w, "import json\njson.loads('{bad')", StatusError)
	if r.Error.Type != "JSONDecodeError" {
		t.Fatalf("json error = %+v", r.Error)
	}
	r = mustRun(t, w, "raise SystemExit(3)", StatusError)
	if r.Error.Type != "SystemExit" {
		t.Fatalf("exit = %+v", r.Error)
	}
	r = mustRun(t, w, "class E(Exception):\n    def __str__(self): raise RuntimeError('no')\nraise E()", StatusError)
	if r.Error.Type != "E" {
		t.Fatalf("unprintable = %+v", r.Error)
	}
	r = mustRun(t, w, "input()", StatusError)
	if r.Error.Type != "EOFError" {
		t.Fatalf("input() = %+v", r.Error)
	}
	if got := pyValue(t, w, "1+1"); got != "2" {
		t.Fatalf("after errors: %s", got)
	}
}

func TestPythonProgress(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	sink := &recordSink{}
	r := w.Run(context.Background(), "from execd import progress\nfor i in range(1, 4):\n    progress(i, 3, f'step {i}')\nprogress(4, 'no total')\n'done'", RunOptions{Sink: sink})
	if r.Status != StatusOK {
		t.Fatalf("run: %s", describe(r))
	}
	got := sink.get()
	want := []string{"1/3 step 1", "2/3 step 2", "3/3 step 3", "4/0 no total"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("progress = %q; want %q", got, want)
	}
}

type recordSink struct {
	mu  sync.Mutex
	got []string
}

func (s *recordSink) Progress(done, total float64, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, strings.TrimSpace(pyFtoa(done)+"/"+pyFtoa(total)+" "+msg))
}

func (s *recordSink) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func pyFtoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func TestPythonWorkspaceFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.csv"), []byte("a,b\n1,2\n3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newPyWorker(t, WorkerOptions{Dir: dir})
	code := `import csv, os, pathlib
rows = list(csv.DictReader(open('/workspace/in.csv')))
total = sum(int(r['b']) for r in rows)
pathlib.Path('/workspace/out').mkdir(exist_ok=True)
with open('out/total.txt', 'w') as f:
    f.write(str(total))
(os.getcwd(), sorted(os.listdir('/workspace')), total)`
	if got := pyValue(t, w, code); got != "('/workspace', ['in.csv', 'out'], 6)" {
		t.Fatalf("value = %s", got)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "total.txt"))
	if err != nil || string(b) != "6" {
		t.Fatalf("host file: %q %v", b, err)
	}
	if got := pyValue(t, w, "open('out/total.txt').read()"); got != "'6'" {
		t.Fatalf("read back: %s", got)
	}
}

// TestPythonInterruptKeepsState cancels a busy loop: the soft interrupt
// raises KeyboardInterrupt inside the guest and every variable survives.
func TestPythonInterruptKeepsState(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	mustRun(t, w, "n = 0\ndata = {'k': [1, 2, 3]}", StatusOK)
	for _, loop := range []string{
		"while True:\n    n += 1",
		"def spin():\n    global n\n    while True:\n        n += 1\nspin()",
		"try:\n    while True: n += 1\nexcept ValueError:\n    pass",
		"import time\nn += 1\ntime.sleep(3600)",
	} {
		// The cancel comes once the cell has begun: its progress() call is
		// the last thing before the loop.
		ctx, cancel := context.WithCancel(context.Background())
		r := w.Run(ctx, "from execd import progress\nprogress(1)\n"+loop, RunOptions{Sink: &progressRec{fn: cancel}})
		cancel()
		if r.Status != StatusInterrupted || r.Discontinuous() {
			t.Fatalf("interrupted run = %s", describe(r))
		}
	}
	if got := pyValue(t, w, "n > 0, data"); got != "(True, {'k': [1, 2, 3]})" {
		t.Fatalf("state after interrupts: %s", got)
	}
	// A deadline is a timeout; state is kept too.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	r := w.Run(ctx, "while True: pass", RunOptions{})
	if r.Status != StatusTimeout || r.Discontinuous() {
		t.Fatalf("timed-out run = %s", describe(r))
	}
	// The next cell is not hit by a stale interrupt.
	if got := pyValue(t, w, "sum(i for i in range(100000))"); got != "4999950000" {
		t.Fatalf("after timeout: %s", got)
	}
	// KeyboardInterrupt raised by the code itself is an ordinary error.
	r = mustRun(t, w, "raise KeyboardInterrupt", StatusError)
	if r.Error.Type != "KeyboardInterrupt" {
		t.Fatalf("own KeyboardInterrupt = %+v", r.Error)
	}
}

// TestPythonHardKill: a loop inside C never reaches the eval breaker; the
// hard kill stops it and the worker comes back fresh.
func TestPythonHardKill(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	mustRun(t, w, "x = 1", StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := w.Run(ctx, "sum(range(10**15))", RunOptions{})
	if r.Status != StatusTimeout || !r.Discontinuous() {
		t.Fatalf("C loop = %s", describe(r))
	}
	if n := w.e.Abandoned(); n != 0 {
		t.Fatalf("the kill switch did not stop the C loop: %d call(s) still running", n)
	}
	r = mustRunFresh(t, w, "'x' in globals()")
	if r.Value == nil || *r.Value != "False" {
		t.Fatalf("after reset: %s", describe(r))
	}
	if got := pyValue(t, w, "2*21"); got != "42" {
		t.Fatalf("fresh worker: %s", got)
	}
}

func TestPythonMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	w := newPyWorker(t, WorkerOptions{Dir: dir})
	mustRun(t, w, "keep = list(range(1000))", StatusOK)
	r := mustRun(t, w, "bomb = []\nwhile True:\n    bomb.append(bytearray(1 << 20))", StatusOOM)
	if r.Error == nil || r.Error.Type != "MemoryError" || r.Discontinuous() {
		t.Fatalf("memory bomb = %s", describe(r))
	}
	// The heap is full (bomb is still referenced) but the workspace works.
	if got := pyValue(t, w, "len(bomb) > 100, len(keep)"); got != "(True, 1000)" {
		t.Fatalf("after oom: %s", got)
	}
	mustRun(t, w, "del bomb\nimport gc\ngc.collect()", StatusOK)
	r = mustRun(t, w, "big = bytearray(2**30)", StatusOOM)
	if r.Error.Type != "MemoryError" {
		t.Fatalf("huge alloc = %s", describe(r))
	}
	r = mustRun(t, w, "s = 'x' * (10**8)\nt = s * 10", StatusOOM)
	if r.Error.Type != "MemoryError" {
		t.Fatalf("string bomb = %s", describe(r))
	}
	mustRun(t, w, "del s", StatusOK)
	if got := pyValue(t, w, "open('/workspace/after.txt', 'w').write('ok'), sum(keep)"); got != "(2, 499500)" {
		t.Fatalf("workspace after oom: %s", got)
	}
	if got := pyValue(t, w, "len(bytearray(50 << 20))"); got != "52428800" {
		t.Fatalf("memory reusable after oom: %s", got)
	}
}

func TestPythonRecursion(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	r := mustRun(t, w, "def f(n):\n    return f(n + 1)\nf(0)", StatusError)
	if r.Error.Type != "RecursionError" || r.Discontinuous() {
		t.Fatalf("recursion = %s", describe(r))
	}
	// Recursion through C (repr of a deeply nested list).
	r = w.Run(context.Background(), "l = []\nfor _ in range(100000):\n    l = [l]\nrepr(l)", RunOptions{})
	if r.Status != StatusError || r.Error.Type != "RecursionError" || r.Discontinuous() {
		t.Fatalf("nested repr = %s", describe(r))
	}
	mustRun(t, w, "import sys\nsys.setrecursionlimit(100000)", StatusOK)
	r = w.Run(context.Background(), "def g(n):\n    return g(n + 1) if n < 50000 else n\ng(0)", RunOptions{})
	if r.Status != StatusOK && (r.Error == nil || r.Error.Type != "RecursionError") && !r.Discontinuous() {
		t.Fatalf("raised limit = %s", describe(r))
	}
	if got := pyValue(t, w, "sys.setrecursionlimit(1000)\n1+1"); got != "2" {
		t.Fatalf("after deep recursion: %s", got)
	}
	// C recursion at the default limit fits the guest's stack.
	if got := pyValue(t, w, "import json, pickle\nd = []\nfor _ in range(400):\n    d = [d]\nlen(json.dumps(d)), len(pickle.loads(pickle.dumps(d)))"); got != "(802, 1)" {
		t.Fatalf("deep json/pickle: %s", got)
	}
}

func TestPythonOutputFlood(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	r := mustRun(t, w, "import sys\nline = 'x' * 1023 + '\\n'\nfor _ in range(100 * 1024):\n    sys.stdout.write(line)\n'done'", StatusOK)
	if !r.Truncated || len(r.Stdout) > 2*defaultMaxOutput || !strings.HasPrefix(r.Stdout, "xxx") {
		t.Fatalf("flood: truncated=%v len=%d", r.Truncated, len(r.Stdout))
	}
	r = mustRun(t, w, "'y' * (10 << 20)", StatusOK)
	if !r.Truncated || r.Value == nil || len(*r.Value) > 2*defaultMaxOutput {
		t.Fatalf("huge value: truncated=%v", r.Truncated)
	}
}

// TestPythonConfinement: nothing but /workspace and the read-only standard
// library is reachable, and process or network calls fail cleanly.
func TestPythonConfinement(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{Dir: t.TempDir()})
	checks := []struct{ name, code, want string }{
		{"os.system", "import os\nhasattr(os, 'system') and os.system('ls')", "False"},
		{"subprocess", "try:\n    import subprocess\n    subprocess.run(['ls'])\n    r = 'ran'\nexcept Exception as e:\n    r = 'failed'\nr", "'failed'"},
		{"fork", "import os\nhasattr(os, 'fork')", "False"},
		{"socket", "try:\n    import socket\n    socket.create_connection(('127.0.0.1', 80), timeout=1)\n    r = 'connected'\nexcept Exception as e:\n    r = 'failed'\nr", "'failed'"},
		{"etc", "try:\n    open('/etc/passwd').read()\n    r = 'read'\nexcept OSError:\n    r = 'denied'\nr", "'denied'"},
		{"root", "import os\ntry:\n    r = sorted(os.listdir('/'))\nexcept OSError:\n    r = 'denied'\nr", "'denied'"},
		{"dotdot", "try:\n    open('/workspace/../../etc/passwd').read()\n    r = 'read'\nexcept OSError:\n    r = 'denied'\nr", "'denied'"},
		{"proc", "import os\nos.path.exists('/proc/self/environ')", "False"},
		{"env", "import os\ndict(os.environ)", "{}"},
		{"stdlib-readable", "import os\n'json' in os.listdir('/usr/local/lib/python3.11')", "True"},
		{"stdlib-readonly", "try:\n    open('/usr/local/lib/python3.11/evil.py', 'w')\n    r = 'written'\nexcept OSError:\n    r = 'denied'\nr", "'denied'"},
		{"ctypes", "try:\n    import ctypes\n    r = 'imported'\nexcept ImportError:\n    r = 'missing'\nr", "'missing'"},
		{"threads", "import threading\ntry:\n    threading.Thread(target=print).start()\n    r = 'started'\nexcept RuntimeError:\n    r = 'refused'\nr", "'refused'"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if got := pyValue(t, w, c.code); got != c.want {
				t.Fatalf("value = %s; want %s", got, c.want)
			}
		})
	}
}

// TestPythonWorkersIsolated: two workers never share a namespace.
func TestPythonWorkersIsolated(t *testing.T) {
	a := newPyWorker(t, WorkerOptions{})
	b := newPyWorker(t, WorkerOptions{})
	mustRun(t, a, "secret = 'a'", StatusOK)
	if got := pyValue(t, b, "'secret' in globals()"); got != "False" {
		t.Fatalf("leak: %s", got)
	}
}

// TestPythonParallelWorkers: workers of one engine run at the same time and
// share the standard library mount.
func TestPythonParallelWorkers(t *testing.T) {
	e := pyEngine(t)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := e.NewWorker(context.Background(), "python", WorkerOptions{})
			if err != nil {
				errs <- err.Error()
				return
			}
			defer w.Close()
			code := "import json, decimal, statistics\nv = " + strconv.Itoa(i) + "\njson.dumps({'v': v})"
			r := w.Run(context.Background(), code, RunOptions{})
			if want := `'{"v": ` + strconv.Itoa(i) + `}'`; r.Status != StatusOK || r.Value == nil || *r.Value != want {
				errs <- describe(r)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
