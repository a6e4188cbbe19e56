package worker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What the guests bring besides the language: Python's sqlite3, its kit of
// pure-Python packages and the hints for what it cannot have; the heap cap
// on every allocator; JavaScript's web-platform globals, Intl and modules.
// All with the real guests.

// check runs code, of either language, and wants status ok and the value
// want.
func check(t *testing.T, w *Worker, name, code, want string) {
	t.Helper()
	r := w.Run(context.Background(), code, RunOptions{})
	if r.Status != StatusOK || value(r) != want {
		t.Errorf("%s: %s\nstdout: %.300s\nstderr: %.300s\nwant %s", name, describe(r), r.Stdout, r.Stderr, want)
	}
}

// TestPythonSQLite: the sqlite3 module with SQLite's extensions: FTS5, the
// JSON and math functions, R*Tree, window functions, a database file in
// /workspace that another interpreter opens later.
func TestPythonSQLite(t *testing.T) {
	dir := t.TempDir()
	w := newPyWorker(t, WorkerOptions{Dir: dir})
	mustRun(t, w, "import sqlite3\ndb = sqlite3.connect(':memory:')", StatusOK)
	cases := []struct{ name, code, want string }{
		{"version", "sqlite3.sqlite_version", "'3.46.1'"},
		{"basic", "db.execute('create table t(a, b)')\ndb.executemany('insert into t values (?, ?)', [(1, 'x'), (2, 'y'), (3, None)])\ndb.execute('select sum(a), group_concat(b) from t').fetchone()", "(6, 'x,y')"},
		{"fts5", "db.execute(\"create virtual table doc using fts5(body)\")\n" +
			"db.executemany('insert into doc values (?)', [('the quick brown fox',), ('lazy dogs sleep',), ('quick thinking',)])\n" +
			"db.execute(\"select body from doc where doc match 'quick' order by rank\").fetchall()",
			"[('quick thinking',), ('the quick brown fox',)]"},
		{"json", `db.execute("""select json_extract('{"a": [1, 2, {"b": "c"}]}', '$.a[2].b'), json_array_length('[1,2,3]'), (select group_concat(value) from json_each('[4,5]'))""").fetchone()`, "('c', 3, '4,5')"},
		{"math", "db.execute('select round(sqrt(2), 6), pi() > 3.14, log10(1000)').fetchone()", "(1.414214, 1, 3.0)"},
		{"rtree", "db.execute('create virtual table box using rtree(id, x0, x1)')\ndb.execute('insert into box values (1, 0, 10), (2, 5, 15)')\ndb.execute('select id from box where x1 > 12').fetchall()", "[(2,)]"},
		{"window", "db.execute('select a, sum(a) over (order by a) from t').fetchall()", "[(1, 1), (2, 3), (3, 6)]"},
		{"cte", "db.execute('with recursive c(i) as (select 1 union all select i + 1 from c where i < 100) select sum(i) from c').fetchone()", "(5050,)"},
		{"serialize", "len(db.serialize()) > 0", "True"},
		{"no wal", "db.execute('pragma journal_mode=wal').fetchone()", "('memory',)"},
		{"file", "f = sqlite3.connect('/workspace/data.db')\nf.execute('create table kv(k primary key, v)')\nf.execute(\"insert into kv values ('answer', 42)\")\nf.commit()\nf.close()\n" +
			"import os\nos.path.getsize('/workspace/data.db') > 0", "True"},
	}
	for _, c := range cases {
		check(t, w, c.name, c.code, c.want)
	}
	// No temporary file ever appears in the workspace, even for a sort that
	// spills (temp_store is memory).
	check(t, w, "big sort", "f = sqlite3.connect('/workspace/data.db')\n"+
		"n = f.execute('with recursive c(i) as (select 1 union all select i + 1 from c where i < 200000) select count(*) from (select i from c order by random())').fetchone()\n"+
		"f.close()\nn, sorted(os.listdir('/workspace'))", "((200000,), ['data.db'])")

	// Another interpreter (the same files) reads the database.
	w2 := newPyWorker(t, WorkerOptions{Dir: dir})
	check(t, w2, "reopened", "import sqlite3\nwith sqlite3.connect('data.db') as c:\n    v = c.execute(\"select v from kv where k = 'answer'\").fetchone()\nv", "(42,)")
	if b, err := os.ReadFile(filepath.Join(dir, "data.db")); err != nil || !bytes.HasPrefix(b, []byte("SQLite format 3\x00")) {
		t.Errorf("data.db on the host: %.20q %v", b, err)
	}
}

// runawayCTE never ends: a recursive CTE with no limit.
const runawayCTE = "db.execute('with recursive c(i) as (select 1 union all select i + 1 from c) select count(*) from c').fetchone()"

// TestPythonSQLiteStopsSoftly: a runaway query under a deadline ends with
// status timeout, a cancel with interrupted, and the interpreter keeps its
// state (no reset); a progress handler the code set itself keeps being
// called and does not keep the stop out.
func TestPythonSQLiteStopsSoftly(t *testing.T) {
	for _, strict := range []bool{true, false} {
		w, err := testEngine(t, strict).NewWorker(context.Background(), "python", WorkerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		mustRun(t, w, "import sqlite3\ndb = sqlite3.connect(':memory:')\nkept = 'yes'", StatusOK)
		r := runWithTimeout(w, runawayCTE, 200*time.Millisecond)
		if r.Status != StatusTimeout || r.Discontinuous() {
			t.Errorf("strict=%v: runaway query = %s; want timeout, state kept", strict, describe(r))
		}
		if got := value(mustRun(t, w, "kept, db.execute('select 6 * 7').fetchone()", StatusOK)); got != "('yes', (42,))" {
			t.Errorf("strict=%v: after the timeout: %s", strict, got)
		}
		// Caught by the code: the stop comes back at the next check.
		r = runWithTimeout(w, "try:\n    "+runawayCTE+"\nexcept sqlite3.OperationalError as e:\n    caught = e.args[0]\nwhile True:\n    pass", 200*time.Millisecond)
		if r.Status != StatusTimeout || r.Discontinuous() {
			t.Errorf("strict=%v: caught stop = %s", strict, describe(r))
		}
		if got := value(mustRun(t, w, "caught", StatusOK)); got != "'interrupted'" {
			t.Errorf("strict=%v: the query ended with %s", strict, got)
		}
		// The code's own progress handler runs, and the stop still comes.
		mustRun(t, w, "calls = 0\ndef count():\n    global calls\n    calls += 1\n    return 0\ndb.set_progress_handler(count, 100)", StatusOK)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		r = w.Run(ctx, runawayCTE, RunOptions{})
		cancel()
		if r.Status != StatusInterrupted || r.Discontinuous() {
			t.Errorf("strict=%v: cancelled query = %s; want interrupted", strict, describe(r))
		}
		if got := value(mustRun(t, w, "calls > 10, kept", StatusOK)); got != "(True, 'yes')" {
			t.Errorf("strict=%v: the code's progress handler: %s", strict, got)
		}
		// Removing it leaves the stop in place.
		mustRun(t, w, "db.set_progress_handler(None, 0)", StatusOK)
		if r := runWithTimeout(w, runawayCTE, 200*time.Millisecond); r.Status != StatusTimeout || r.Discontinuous() {
			t.Errorf("strict=%v: after set_progress_handler(None): %s", strict, describe(r))
		}
		// A handler that aborts is the code's own error.
		r = mustRun(t, w, "db.set_progress_handler(lambda: 1, 10)\n"+runawayCTE, StatusError)
		if r.Error == nil || r.Error.Type != "OperationalError" {
			t.Errorf("strict=%v: the code's abort = %s", strict, describe(r))
		}
	}
}

// heapCapEngine is an engine with a 64 MiB sandbox (a 40 MiB heap cap).
func heapCapEngine(t *testing.T) *Engine {
	return newTestEngine(t, Config{StrictTermination: true, MemoryLimitMiB: 64, CacheDir: testCacheDir})
}

// TestPythonHeapCapEveryAllocator: a memory bomb through each of CPython's
// allocator domains, and through SQLite, ends in MemoryError (status oom)
// at the heap cap, not at the end of linear memory; the workspace answers
// afterwards and its memory can be freed and used again.
func TestPythonHeapCapEveryAllocator(t *testing.T) {
	e := heapCapEngine(t)
	bombs := []struct{ domain, setup, bomb string }{
		// zlib's streams allocate through PyMem_RawMalloc (~270 KB each).
		{"raw", "import zlib", "x = []\nwhile True: x.append(zlib.compressobj(9, zlib.DEFLATED, 15, 9))"},
		// a list's item array is PyMem_Malloc'd.
		{"mem", "", "x = []\nwhile True: x.append([None] * 100000)"},
		// objects are PyObject_Malloc'd, each its own allocation.
		{"object", "", "x = []\nwhile True: x.append(object())"},
		// SQLite's pages and sorter.
		{"sqlite", "import sqlite3\ndb = sqlite3.connect(':memory:')",
			"x = db\nx.execute('create table t(b)')\nx.execute('insert into t with recursive c(i) as (select 1 union all select i + 1 from c) select randomblob(1000) from c')"},
	}
	for _, b := range bombs {
		w, err := e.NewWorker(context.Background(), "python", WorkerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mustRun(t, w, "keep = 'kept'\n"+b.setup, StatusOK)
		r := w.Run(context.Background(), b.bomb, RunOptions{})
		if r.Status != StatusOOM || r.Error == nil || r.Error.Type != "MemoryError" || r.Discontinuous() {
			t.Errorf("%s: %s; want oom, state kept", b.domain, describe(r))
		}
		if got := value(w.Run(context.Background(), "keep, x is not None", RunOptions{})); got != "('kept', True)" {
			t.Errorf("after the %s bomb: %s", b.domain, got)
		}
		mustRun(t, w, "del x\nimport gc\ngc.collect()", StatusOK)
		if b.domain == "sqlite" {
			mustRun(t, w, "db.close()", StatusOK)
		}
		// 25 MiB again, in pieces: one allocation of that size may not find
		// a hole in a heap the bomb filled (the allocator cannot move what
		// survived it, and linear memory is at its cap).
		if r := w.Run(context.Background(), "len([bytearray(1 << 20) for _ in range(25)])", RunOptions{}); value(r) != "25" {
			t.Errorf("memory not reusable after the %s bomb: %s", b.domain, describe(r))
		}
		w.Close()
	}
}

// TestPythonKit: the packages of the kit import and do their job inside the
// sandbox.
func TestPythonKit(t *testing.T) {
	dir := t.TempDir()
	w := newPyWorker(t, WorkerOptions{Dir: dir})
	cases := []struct{ name, code, want string }{
		{"dateutil", "from dateutil import parser, relativedelta\nd = parser.parse('March 3, 2024 5:30pm')\n(d.isoformat(), (d + relativedelta.relativedelta(months=+1, day=31)).date().isoformat())",
			"('2024-03-03T17:30:00', '2024-04-30')"},
		{"dateutil tz", "from dateutil import tz\nimport datetime\ndatetime.datetime(2024, 7, 1, 12, tzinfo=tz.gettz('Europe/Paris')).utcoffset()", "datetime.timedelta(seconds=7200)"},
		{"tabulate", "from tabulate import tabulate\nprint(tabulate([['a', 1], ['bb', 22]], headers=['k', 'v']))", "<nil>"},
		{"zoneinfo", "from zoneinfo import ZoneInfo\nimport datetime\nparis = ZoneInfo('Europe/Paris')\n" +
			"[str(datetime.datetime(2024, m, 1, 12, tzinfo=paris).utcoffset()) for m in (1, 7)]", "['1:00:00', '2:00:00']"},
		{"zoneinfo dst", "datetime.datetime(2024, 3, 31, 1, 30, tzinfo=datetime.timezone.utc).astimezone(paris).isoformat()", "'2024-03-31T03:30:00+02:00'"},
		{"zoneinfo list", "import zoneinfo\nlen(zoneinfo.available_timezones()) > 400", "True"},
		{"pytz", "import pytz\nny = pytz.timezone('America/New_York')\nstr(ny.localize(datetime.datetime(2024, 1, 15, 9)).utcoffset()), 'Europe/Paris' in pytz.common_timezones", "('-1 day, 19:00:00', True)"},
		{"openpyxl", "import openpyxl\nwb = openpyxl.Workbook()\nws = wb.active\nws.title = 'data'\nws.append(['name', 'n'])\nws.append(['a', 1])\nws.append(['b', 2])\nws['C1'] = '=SUM(B2:B3)'\nwb.save('/workspace/t.xlsx')\n" +
			"wb2 = openpyxl.load_workbook('/workspace/t.xlsx')\n[list(r) for r in wb2['data'].iter_rows(values_only=True)]", "[['name', 'n', '=SUM(B2:B3)'], ['a', 1, None], ['b', 2, None]]"},
		{"png", "import png\nrows = [[(x * y) % 256 for x in range(16)] for y in range(8)]\npng.from_array(rows, 'L').save('/workspace/t.png')\n" +
			"r = png.Reader(filename='/workspace/t.png').read()\n(r[0], r[1], [list(row) for row in r[2]] == rows)", "(16, 8, True)"},
		{"networkx", "import networkx as nx\ng = nx.Graph([(1, 2), (2, 3), (3, 4), (1, 4), (4, 5)])\n(nx.shortest_path(g, 1, 5), nx.is_connected(g), sorted(nx.degree_centrality(g).items())[0])",
			"([1, 4, 5], True, (1, 0.5))"},
		{"yaml", "import yaml\n(yaml.safe_load('a: [1, 2]\\nb: {c: true}'), yaml.__with_libyaml__, yaml.safe_dump({'x': [1]}))", "({'a': [1, 2], 'b': {'c': True}}, False, 'x:\\n- 1\\n')"},
		{"jinja2", "import jinja2\njinja2.Template('{% for x in xs %}{{ x|upper }}{% if not loop.last %}, {% endif %}{% endfor %} {{ s }}', autoescape=True).render(xs=['a', 'b'], s='<b>')", "'A, B &lt;b&gt;'"},
		{"sympy", "import sympy as sp\nx = sp.symbols('x')\n(sp.solve(x**2 - 2, x), sp.integrate(sp.sin(x)**2, (x, 0, sp.pi)), sp.factor(x**3 - 1))",
			"([-sqrt(2), sqrt(2)], pi/2, (x - 1)*(x**2 + x + 1))"},
		{"mpmath", "import mpmath\nmpmath.mp.dps = 30\nstr(mpmath.quad(mpmath.exp, [0, 1]))", "'1.71828182845904523536028747135'"},
		{"metadata", "import importlib.metadata as md\nmd.version('networkx'), md.version('sympy'), md.version('PyYAML'), md.version('MarkupSafe')", "('2.8.8', '1.11.1', '6.0.2', '2.1.2')"},
		{"requests", "import warnings\nwith warnings.catch_warnings(record=True) as caught:\n    import requests, urllib3, idna, charset_normalizer, certifi\n" +
			"(requests.__version__, urllib3.__version__, idna.encode('bücher.example').decode(), str(charset_normalizer.from_bytes('grüße'.encode()).best()), [str(w.message) for w in caught])",
			"('2.28.1', '1.26.12', 'xn--bcher-kva.example', 'grüße', [])"},
	}
	for _, c := range cases {
		check(t, w, c.name, c.code, c.want)
	}
	png, err := os.ReadFile(filepath.Join(dir, "t.png"))
	if err != nil {
		t.Fatal(err)
	}
	checkPNG(t, png, 16, 8)
	xlsx, err := os.ReadFile(filepath.Join(dir, "t.xlsx"))
	if err != nil || !bytes.HasPrefix(xlsx, []byte("PK\x03\x04")) {
		t.Errorf("t.xlsx is not a zip: %.8q %v", xlsx, err)
	}
}

// checkPNG: b is a PNG file whose first chunk is a well-formed IHDR of a
// width x height image.
func checkPNG(t *testing.T, b []byte, width, height uint32) {
	t.Helper()
	sig := []byte("\x89PNG\r\n\x1a\n")
	if !bytes.HasPrefix(b, sig) || len(b) < len(sig)+25 {
		t.Fatalf("not a PNG: %.16q", b)
	}
	c := b[len(sig):]
	n := binary.BigEndian.Uint32(c[0:4])
	if n != 13 || string(c[4:8]) != "IHDR" {
		t.Fatalf("first chunk %q of %d bytes; want IHDR of 13", c[4:8], n)
	}
	if w, h := binary.BigEndian.Uint32(c[8:12]), binary.BigEndian.Uint32(c[12:16]); w != width || h != height {
		t.Errorf("IHDR %dx%d; want %dx%d", w, h, width, height)
	}
	if crc := crc32.ChecksumIEEE(c[4:21]); crc != binary.BigEndian.Uint32(c[21:25]) {
		t.Errorf("IHDR CRC %08x; the file says %08x", crc, binary.BigEndian.Uint32(c[21:25]))
	}
	if !bytes.HasSuffix(b, []byte("IEND\xaeB`\x82")) {
		t.Errorf("no IEND chunk at the end")
	}
}

// TestPythonKitNotPreloaded: a new interpreter has imported nothing of the
// kit, nor sqlite3 (start-up pays only for what the preload lists).
func TestPythonKitNotPreloaded(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	check(t, w, "modules", "import sys\nsorted(m for m in sys.modules if m.split('.')[0] in "+
		"('sqlite3', '_sqlite3', 'dateutil', 'six', 'tabulate', 'pytz', 'openpyxl', 'et_xmlfile', 'png', 'networkx', "+
		"'yaml', 'jinja2', 'markupsafe', 'sympy', 'mpmath', 'zoneinfo'))", "[]")
}

// TestPythonHints: importing a library the sandbox cannot have fails with a
// ModuleNotFoundError that says what it has instead; code that probes for
// an optional library still works.
func TestPythonHints(t *testing.T) {
	w := newPyWorker(t, WorkerOptions{})
	for mod, says := range map[string][]string{
		"numpy":      {"mpmath", "statistics"},
		"pandas":     {"sqlite3", "csv", "openpyxl"},
		"matplotlib": {"png (pypng)"},
		"scipy":      {"mpmath", "statistics"},
		"httpx":      {"requests", "urllib.request"},
	} {
		for _, code := range []string{"import " + mod, "import " + mod + ".sub", "__import__('importlib').import_module('" + mod + "')"} {
			r := mustRun(t, w, code, StatusError)
			if r.Error.Type != "ModuleNotFoundError" || !strings.HasPrefix(r.Error.Message, "No module named '"+mod+"'") {
				t.Errorf("%s: %s", code, describe(r))
				continue
			}
			for _, s := range append(says, "sqlite3", "statistics", "csv", "sympy", "networkx") {
				if !strings.Contains(r.Error.Message, s) {
					t.Errorf("%s: the message does not mention %s: %s", code, s, r.Error.Message)
				}
			}
		}
	}
	check(t, w, "probe", "import importlib.util\ntry:\n    import numpy\n    r = 'numpy'\nexcept ImportError as e:\n    r = e.name\n(r, importlib.util.find_spec('numpy'))", "('numpy', None)")
	check(t, w, "other", "try:\n    import no_such_module\nexcept ModuleNotFoundError as e:\n    r = str(e)\nr", `"No module named 'no_such_module'"`)
}

// TestJSWebGlobals: the web platform's basics, as browsers and Node have
// them.
func TestJSWebGlobals(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	cases := []struct{ name, code, want string }{
		{"encode", "new TextEncoder().encode('h€😀')", "Uint8Array(8) [104, 226, 130, 172, 240, 159, 152, 128]"},
		{"encode lone surrogate", "Array.from(new TextEncoder().encode('a\\ud800b'))", "[97, 239, 191, 189, 98]"},
		{"encodeInto", "const buf = new Uint8Array(4); [new TextEncoder().encodeInto('a€b', buf), Array.from(buf)]",
			"[{read: 2, written: 4}, [97, 226, 130, 172]]"},
		{"decode", "new TextDecoder().decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x68, 0xc3, 0xa9]))", `"hé"`},
		{"decode invalid", "new TextDecoder().decode(new Uint8Array([0x61, 0xff, 0xe2, 0x82, 0x62, 0xe2]))", "\"a\ufffd\ufffdb\ufffd\""},
		{"decode fatal", "try { new TextDecoder('utf-8', {fatal: true}).decode(new Uint8Array([0xff])) } catch (e) { e.name }", `"TypeError"`},
		{"decode stream", "const d = new TextDecoder(); d.decode(new Uint8Array([0xe2, 0x82]), {stream: true}) + d.decode(new Uint8Array([0xac]))", `"€"`},
		{"decode views", "new TextDecoder().decode(new DataView(new TextEncoder().encode('xyz').buffer, 1)) + new TextDecoder().decode(new TextEncoder().encode('!').buffer)", `"yz!"`},
		{"decoder label", "try { new TextDecoder('latin1') } catch (e) { e.name }", `"RangeError"`},
		{"btoa atob", "[btoa('hello\\xff'), atob(' aGVs bG8= '), atob('YQ')]", `["aGVsbG//", "hello", "a"]`},
		{"btoa range", "try { btoa('€') } catch (e) { [e.name, e.code, e instanceof DOMException, e instanceof Error] }", `["InvalidCharacterError", 5, true, true]`},
		{"atob invalid", "try { atob('a') } catch (e) { e.name }", `"InvalidCharacterError"`},
		{"structuredClone", "const src = {n: 1, s: 'x', d: new Date(0), re: /a+/gi, m: new Map([[{k: 1}, new Set([1, 2])]]), u8: new Uint8Array([1, 2]), big: 10n, nested: [[1], {deep: true}]};\n" +
			"const c = structuredClone(src); [c !== src, c.d.getTime(), c.re.flags, [...c.m.values()][0].has(2), c.u8[1], c.big, c.nested[1].deep, c.m !== src.m]",
			`[true, 0, "gi", true, 2, 10n, true, true]`},
		{"structuredClone cycle", "const o = {name: 'o'}; o.self = o; o.list = [o]; const k = structuredClone(o); [k.self === k, k.list[0] === k, k !== o]", "[true, true, true]"},
		{"structuredClone error", "const e = structuredClone(new RangeError('r')); [e instanceof RangeError, e.message]", `[true, "r"]`},
		{"structuredClone class", "class P { constructor() { this.x = 1 } get y() { return 2 } }\nconst p = structuredClone(new P()); [Object.getPrototypeOf(p) === Object.prototype, p.x, p.y]", "[true, 1, undefined]"},
		{"structuredClone function", "try { structuredClone({f() {}}) } catch (e) { [e.name, e.code] }", `["DataCloneError", 25]`},
		{"structuredClone transfer", "const ab = new Uint8Array([7, 8]).buffer; const t = structuredClone(ab, {transfer: [ab]}); [ab.byteLength, new Uint8Array(t)[1]]", "[0, 8]"},
		{"getRandomValues", "const r = crypto.getRandomValues(new Uint32Array(64)); new Set(r).size > 60", "true"},
		{"getRandomValues quota", "try { crypto.getRandomValues(new Uint8Array(65537)) } catch (e) { e.name }", `"QuotaExceededError"`},
		{"getRandomValues float", "try { crypto.getRandomValues(new Float64Array(2)) } catch (e) { e.name }", `"TypeMismatchError"`},
		{"randomUUID", "const ids = Array.from({length: 100}, () => crypto.randomUUID()); [new Set(ids).size, ids.every((u) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(u))]", "[100, true]"},
		{"performance", "const a = performance.now(); let x = 0; for (let i = 0; i < 1e5; i++) x += i; const b = performance.now(); [typeof a, a >= 0, b > a, Math.abs(performance.timeOrigin + b - Date.now()) < 1000]", `["number", true, true, true]`},
		{"url", "const u = new URL('HTTPS://user:pw@Example.COM:443/a/./b/../c d?q=1 2#frag'); [u.href, u.origin, u.host, u.pathname, u.search, u.hash, u.username, u.port]",
			`["https://user:pw@example.com/a/c%20d?q=1%202#frag", "https://example.com", "example.com", "/a/c%20d", "?q=1%202", "#frag", "user", ""]`},
		{"url relative", "[new URL('../x?y', 'http://h.com/a/b/c').href, new URL('//o.org', 'https://h.com/p').href, new URL('?z', 'http://h.com/p?o#f').href]",
			`["http://h.com/a/x?y", "https://o.org/", "http://h.com/p?z"]`},
		{"url hosts", "[new URL('http://[2001:db8:0:0:0:0:2:1]/').host, new URL('http://0x7f.1/').host, new URL('http://münchen.de/').host, new URL('file:///C:/x/../y').href]",
			`["[2001:db8::2:1]", "127.0.0.1", "xn--mnchen-3ya.de", "file:///C:/y"]`},
		{"url invalid", "try { new URL('not a url') } catch (e) { [e.name, URL.canParse('not a url'), URL.canParse('a:b'), URL.parse('http://[::1')] }", `["TypeError", false, true, null]`},
		{"url setters", "const v = new URL('http://a.com/p?q#h'); v.protocol = 'https'; v.hostname = 'b.org'; v.port = '8443'; v.pathname = '/x y'; v.hash = ''; v.searchParams.append('k', 'v w'); v.href",
			`"https://b.org:8443/x%20y?q=&k=v+w"`},
		{"url prints", "new URL('https://a.com/x')", `URL {href: "https://a.com/x"}`},
		{"url json", "JSON.stringify({u: new URL('https://a.com')})", `"{\"u\":\"https://a.com/\"}"`},
		{"searchParams", "const p = new URLSearchParams('?b=2&a=1&a=3&s=x+y%20z'); [p.get('a'), p.getAll('a'), p.get('s'), p.has('b'), p.size, [...p.keys()], String(p)]",
			`["1", ["1", "3"], "x y z", true, 4, ["b", "a", "a", "s"], "b=2&a=1&a=3&s=x+y+z"]`},
		{"searchParams edit", "const q = new URLSearchParams({x: '1', y: 'é&='}); q.set('x', '2'); q.append('z', ''); q.sort(); q.delete('y'); [q.toString(), [...q], new URLSearchParams([['a', 'b']]).toString()]",
			`["x=2&z=", [["x", "2"], ["z", ""]], "a=b"]`},
		{"searchParams prints", "new URLSearchParams('a=1&b=2')", `URLSearchParams {"a" => "1", "b" => "2"}`},
		{"domexception", "const de = new DOMException('m', 'AbortError'); [de.name, de.message, de.code, DOMException.ABORT_ERR, Object.prototype.toString.call(de)]", `["AbortError", "m", 20, 20, "[object Error]"]`},
	}
	for _, c := range cases {
		check(t, w, c.name, c.code, c.want)
	}
}

// TestJSIntl: the English Intl, checked against what Node (ICU) prints for
// en-US in UTC, and toLocaleString built on it.
func TestJSIntl(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "const d = new Date(Date.UTC(2024, 0, 2, 15, 4, 5, 123))", StatusOK)
	cases := []struct{ name, code, want string }{
		{"toLocaleString", "(1234567.891).toLocaleString()", `"1,234,567.891"`},
		{"toLocaleString en-US", "(1234567.891).toLocaleString('en-US')", `"1,234,567.891"`},
		{"fraction digits", "[(1.005).toLocaleString('en-US', {maximumFractionDigits: 2}), (5).toLocaleString('en-US', {minimumFractionDigits: 2}), (0.000123).toLocaleString()]", `["1.01", "5.00", "0"]`},
		{"grouping off", "new Intl.NumberFormat('en-US', {useGrouping: false}).format(1234567.5)", `"1234567.5"`},
		{"percent", "[new Intl.NumberFormat('en-US', {style: 'percent'}).format(0.256), new Intl.NumberFormat('en-US', {style: 'percent', maximumFractionDigits: 1}).format(0.2567)]", `["26%", "25.7%"]`},
		{"currency", "const usd = new Intl.NumberFormat('en-US', {style: 'currency', currency: 'USD'}); [usd.format(1234.5), usd.format(-0.126), usd.format(1e9)]", `["$1,234.50", "-$0.13", "$1,000,000,000.00"]`},
		{"currency forms", "[(12.5).toLocaleString('en-US', {style: 'currency', currency: 'USD', currencyDisplay: 'code'}), (1).toLocaleString('en-US', {style: 'currency', currency: 'USD', currencyDisplay: 'name'}), (-3).toLocaleString('en-US', {style: 'currency', currency: 'USD', currencySign: 'accounting'}), (1234).toLocaleString('en-US', {style: 'currency', currency: 'JPY'})]",
			"[\"USD\u00a012.50\", \"1.00 US dollars\", \"($3.00)\", \"¥1,234\"]"},
		{"compact", "const c = new Intl.NumberFormat('en-US', {notation: 'compact'}); [c.format(1234), c.format(12345), c.format(1.5e6), c.format(999), new Intl.NumberFormat('en-US', {notation: 'compact', compactDisplay: 'long'}).format(2.5e9)]",
			`["1.2K", "12K", "1.5M", "999", "2.5 billion"]`},
		{"significant and signs", "[new Intl.NumberFormat('en-US', {maximumSignificantDigits: 3}).format(123456), new Intl.NumberFormat('en-US', {signDisplay: 'always'}).format(5), new Intl.NumberFormat().format(-0), new Intl.NumberFormat().format(NaN), new Intl.NumberFormat().format(-Infinity), new Intl.NumberFormat().format(12345678901234567890n)]",
			`["123,000", "+5", "-0", "NaN", "-∞", "12,345,678,901,234,567,890"]`},
		{"formatToParts", "new Intl.NumberFormat('en-US', {style: 'currency', currency: 'USD'}).formatToParts(-1234.5).map((p) => p.type).join(' ')", `"minusSign currency integer group integer decimal fraction"`},
		{"resolvedOptions", "const ro = new Intl.NumberFormat('de-DE').resolvedOptions(); [ro.locale, ro.maximumFractionDigits, ro.useGrouping]", `["en-US", 3, "auto"]`},
		{"date default", "[d.toLocaleString(), d.toLocaleDateString(), d.toLocaleTimeString(), new Intl.DateTimeFormat().format(d)]", `["1/2/2024, 3:04:05 PM", "1/2/2024", "3:04:05 PM", "1/2/2024"]`},
		{"date styles", "['full', 'long', 'medium', 'short'].map((s) => new Intl.DateTimeFormat('en-US', {dateStyle: s, timeStyle: s, timeZone: 'UTC'}).format(d))",
			`["Tuesday, January 2, 2024 at 3:04:05 PM Coordinated Universal Time", "January 2, 2024 at 3:04:05 PM UTC", "Jan 2, 2024, 3:04:05 PM", "1/2/24, 3:04 PM"]`},
		{"date components", "[d.toLocaleDateString('en-US', {weekday: 'long', year: 'numeric', month: 'long', day: 'numeric'}), d.toLocaleDateString('en-US', {month: 'short', year: 'numeric'}), d.toLocaleTimeString('en-US', {hour: '2-digit', minute: '2-digit'}), d.toLocaleTimeString('en-US', {hour12: false}), d.toLocaleString('en-US', {hour: 'numeric', minute: 'numeric', second: 'numeric', fractionalSecondDigits: 3})]",
			`["Tuesday, January 2, 2024", "Jan 2024", "03:04 PM", "15:04:05", "3:04:05.123 PM"]`},
		{"date parts", "new Intl.DateTimeFormat('en-US', {dateStyle: 'medium'}).formatToParts(d).map((p) => p.value).join('|')", `"Jan| |2|, |2024"`},
		{"date offset zone", "new Intl.DateTimeFormat('en-US', {timeStyle: 'long', timeZone: '+05:30'}).format(d)", `"8:34:05 PM GMT+5:30"`},
		{"date other zone", "try { d.toLocaleString('en-US', {timeZone: 'America/New_York'}) } catch (e) { [e.name, e.message.includes('UTC')] }", `["RangeError", true]`},
		{"invalid date", "[new Date(NaN).toLocaleString(), (() => { try { new Intl.DateTimeFormat().format(new Date(NaN)) } catch (e) { return e.name } })()]", `["Invalid Date", "RangeError"]`},
		{"collator", "['b', 'a', 'B', 'á', 'A', 'z', 'résumé', 'resume', 'Resume', '_x', '-y', '10', '2'].sort(new Intl.Collator('en').compare)",
			`["_x", "-y", "10", "2", "a", "A", "á", "b", "B", "resume", "Resume", "résumé", "z"]`},
		{"collator options", "[new Intl.Collator('en', {numeric: true}).compare('item10', 'item2'), new Intl.Collator('en', {sensitivity: 'base'}).compare('a', 'Á'), new Intl.Collator('en', {sensitivity: 'accent'}).compare('a', 'A'), new Intl.Collator('en', {caseFirst: 'upper'}).compare('a', 'A')]", "[1, 0, 0, 1]"},
		{"localeCompare", "['é', 'e', 'f'].sort((a, b) => a.localeCompare(b))", `["e", "é", "f"]`},
		{"plural", "const pr = new Intl.PluralRules('en-US'); [0, 1, 2, 1.5].map((n) => pr.select(n))", `["other", "one", "other", "other"]`},
		{"ordinal", "const po = new Intl.PluralRules('en-US', {type: 'ordinal'}); const suf = {one: 'st', two: 'nd', few: 'rd', other: 'th'}; [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111].map((n) => n + suf[po.select(n)]).join(' ')",
			`"1st 2nd 3rd 4th 11th 12th 13th 21st 22nd 23rd 101st 111th"`},
		{"plural categories", "new Intl.PluralRules('en', {type: 'ordinal'}).resolvedOptions().pluralCategories", `["few", "one", "two", "other"]`},
		{"list", "const l = (o) => new Intl.ListFormat('en', o); [l().format(['a', 'b', 'c']), l().format(['a', 'b']), l({type: 'disjunction'}).format(['a', 'b', 'c']), l({style: 'short'}).format(['a', 'b', 'c']), l({type: 'unit', style: 'narrow'}).format(['1', '2'])]",
			`["a, b, and c", "a and b", "a, b, or c", "a, b, & c", "1 2"]`},
		{"locales", "[Intl.getCanonicalLocales(['EN-us', 'en-gb']), Intl.NumberFormat.supportedLocalesOf(['en-GB', 'fr']), new Intl.DateTimeFormat('ja-JP').resolvedOptions().locale]", `[["en-US", "en-GB"], ["en-GB"], "en-US"]`},
		{"bad locale", "try { new Intl.NumberFormat('not a locale!') } catch (e) { e.name }", `"RangeError"`},
		{"array toLocaleString", "[1234.5, new Date(0)].toLocaleString()", `"1,234.5,1/1/1970, 12:00:00 AM"`},
	}
	for _, c := range cases {
		check(t, w, c.name, c.code, c.want)
	}
}

// TestJSModules: ES modules are files under /workspace, imported with
// import() or, in a cell, with import declarations rewritten to it.
func TestJSModules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"lib.mjs":       "import { twice } from './util/math.mjs';\nexport const name = 'lib';\nexport default function greet(who) { return 'hello ' + who }\nexport const four = twice(2);\nexport const url = import.meta.url;",
		"util/math.mjs": "export function twice(x) { return 2 * x }\nexport const dir = import.meta.dirname;",
		"data.json":     `{"items": [1, 2, 3], "ok": true}`,
		"broken.mjs":    "export const = 1;",
		"loop.mjs":      "while (true) {}",
		"throws.mjs":    "throw new Error('module failed');",
	}
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := newWorker(t, testEngine(t, true), WorkerOptions{Dir: dir})
	cases := []struct{ name, code, want string }{
		{"default and named", "import greet, { name, four } from './lib.mjs'\n[greet('you'), name, four]", `["hello you", "lib", 4]`},
		{"bindings stay", "[greet('again'), four]", `["hello again", 4]`},
		{"namespace", "import * as lib from \"./lib.mjs\";\n[typeof lib.default, lib.url]", `["function", "file:///workspace/lib.mjs"]`},
		{"renamed, multi-line", "import {\n  twice as double,\n  dir,\n} from '/workspace/util/math.mjs'\ndouble(21) + ' ' + dir", `"42 /workspace/util"`},
		{"dynamic", "const m = await import('./util/math.mjs'); m.twice(5)", "10"},
		{"same instance", "(await import('./lib.mjs')).default === greet", "true"},
		{"json", "import data from './data.json' with { type: 'json' }\n[data.items.length, data.ok]", "[3, true]"},
		{"re-run", "import greet from './lib.mjs'\ngreet('x')", `"hello x"`},
		{"strings untouched", "const s = 'import x from \"y\"'; s.length", "17"},
	}
	for _, c := range cases {
		check(t, w, c.name, c.code, c.want)
	}
	// A changed file is a new module under a new query.
	if err := os.WriteFile(filepath.Join(dir, "util/math.mjs"), []byte("export function twice(x) { return 3 * x }"), 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, w, "cached", "(await import('./util/math.mjs')).twice(1)", "2")
	check(t, w, "query reloads", "(await import('./util/math.mjs?v=2')).twice(1)", "3")
	errs := []struct{ name, code, typ, says string }{
		{"missing", "import x from './nope.mjs'", "Error", "Cannot find module '/workspace/nope.mjs'"},
		{"package", "import _ from 'lodash'", "Error", "packages are not available in this sandbox"},
		{"node builtin", "await import('node:fs')", "Error", "Cannot load Node's built-in module 'fs'"},
		{"syntax", "await import('./broken.mjs')", "SyntaxError", ""},
		{"throws", "await import('./throws.mjs')", "Error", "module failed"},
	}
	for _, c := range errs {
		r := mustRun(t, w, c.code, StatusError)
		if r.Error.Type != c.typ || !strings.Contains(r.Error.Message, c.says) {
			t.Errorf("%s: %s; want %s saying %q", c.name, describe(r), c.typ, c.says)
		}
	}
	// A module's own loop stops like any code.
	if r := runWithTimeout(w, "await import('./loop.mjs')", 200*time.Millisecond); r.Status != StatusTimeout || r.Discontinuous() {
		t.Errorf("endless module: %s", describe(r))
	}
	check(t, w, "after all that", "greet('end')", `"hello end"`)
}

// TestJSBatteriesUseIntrinsics: code that replaces built-ins does not
// break the web globals, Intl or the import rewrite (they captured what
// they use at init, as the printer did).
func TestJSBatteriesUseIntrinsics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.mjs"), []byte("export default 7"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, testEngine(t, true), WorkerOptions{Dir: dir})
	mustRun(t, w, "globalThis.m0 = new Map([[1, 2]]); globalThis.two = {*[Symbol.iterator]() { yield 'a'; yield 'b' }}", StatusOK)
	mustRun(t, w, `
		const boom = function () { throw new Error("replaced built-in called") };
		for (const k of ["slice", "indexOf", "charCodeAt", "codePointAt", "toLowerCase", "toUpperCase", "normalize", "padStart"]) String.prototype[k] = boom;
		for (const k of ["push", "join", "map", "indexOf", "slice", "sort"]) Array.prototype[k] = boom;
		for (const k of ["get", "set", "has"]) { Map.prototype[k] = boom; WeakMap.prototype[k] = boom; Set.prototype[k] = boom }
		Set.prototype.add = boom;
		Object.getPrototypeOf(Uint8Array.prototype).set = boom;
		for (const k of ["getUTCFullYear", "getUTCMonth", "getUTCDate", "getUTCHours", "getTime"]) Date.prototype[k] = boom;
		Array.prototype[Symbol.iterator] = boom;
		Number.prototype.toExponential = boom;
		RegExp.prototype.exec = boom;
		Object.keys = boom;
		JSON.stringify = boom;
		0`, StatusOK)
	cases := []struct{ name, code, want string }{
		{"TextEncoder", "new TextDecoder().decode(new TextEncoder().encode('ok€'))", `"ok€"`},
		{"URL", "new URL('../b?c=1', 'https://x.org/a/z').href", `"https://x.org/b?c=1"`},
		{"searchParams", "new URLSearchParams('a=1&b=2').get('b')", `"2"`},
		{"number", "(1234.5).toLocaleString('en-US', {style: 'currency', currency: 'USD'})", `"$1,234.50"`},
		{"date", "new Intl.DateTimeFormat('en-US', {dateStyle: 'long'}).format(0)", `"January 1, 1970"`},
		{"list", "new Intl.ListFormat('en').format(two)", `"a and b"`},
		{"structuredClone", "structuredClone(m0) !== m0", "true"},
		{"atob", "atob(btoa('x'))", `"x"`},
		{"import", "import m from './m.mjs'\nm", "7"},
	}
	for _, c := range cases {
		check(t, w, c.name, c.code, c.want)
	}
}

// FuzzJSImportRewrite: a cell that mentions import goes through the
// guest's import rewrite (bootstrap.js) before it is compiled; whatever the
// cell, that neither hangs nor breaks the interpreter: the cell ends as
// code ends (a value, an error, a timeout) and the next cell runs.
func FuzzJSImportRewrite(f *testing.F) {
	for _, s := range []string{
		`import x from "./a.mjs"`, `import * as ns from './a.mjs'`, `import x, * as ns from "./a.mjs"`,
		"import {a, b as c,\n \"d-e\" as f} from \"./a.mjs\"; a", `import "./side.mjs"`,
		`import j from "./d.json" with { type: "json" }`, `const s = "import x from 'y'"; s`,
		"// import x from 'y'\n1", "/* import */ 2", "`${\"}\"} import x from y` + `a${`b${1}`}c`",
		`if (1) { import x from "y" }`, `await import("./a.mjs")`, `import.meta`, `a.import; 3`,
		`let r = /import x from "y"/; r`, `x = 1 / 2; import y from "./y.mjs"`, `import {} from "./z.mjs"`,
		`import x from`, `import {`, `import * as`, "import x from \"y\" with {", "import `", `import "`,
	} {
		f.Add(s)
	}
	e := startEngine(f, testConfig(true))
	f.Cleanup(func() { e.Close(context.Background()) })
	w, err := e.NewWorker(context.Background(), "javascript", WorkerOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { w.Close() })
	f.Fuzz(func(t *testing.T, cell string) {
		if !strings.Contains(cell, "import") {
			cell = "import " + cell
		}
		r := runWithTimeout(w, cell, 200*time.Millisecond)
		if r.Discontinuous() {
			t.Fatalf("%q reset the interpreter: %s", cell, describe(r))
		}
		switch r.Status {
		case StatusOK, StatusError, StatusTimeout, StatusOOM:
		default:
			t.Fatalf("%q: %s", cell, describe(r))
		}
		if r := w.Run(context.Background(), "6 * 7", RunOptions{}); r.Status != StatusOK || value(r) != "42" {
			t.Fatalf("after %q: %s", cell, describe(r))
		}
	})
}

// TestPythonPreloadKit: sandbox.python_preload may name the kit's packages
// and sqlite3: every new interpreter then starts with them imported.
func TestPythonPreloadKit(t *testing.T) {
	t.Parallel()
	cfg := testConfig(true)
	cfg.PythonPreload = []string{"sqlite3", "dateutil.parser", "tabulate"}
	e := newTestEngine(t, cfg)
	if b := e.guests["python"].base; b == nil || b.img.init.preload == "" {
		t.Fatalf("base image without the preload: %+v", b)
	}
	w := langWorker(t, e, "python", WorkerOptions{})
	check(t, w, "preloaded", "import sys\n[m for m in ('sqlite3', 'dateutil.parser', 'tabulate') if m not in sys.modules]", "[]")
	check(t, w, "works", "import sqlite3\nsqlite3.connect(':memory:').execute('select 1').fetchone()", "(1,)")
}

// TestBaseKeyNamesTheFiles: a base image made with other read-only files
// (another standard library or kit) is another base image: what the guest
// read from them at init is in its memory.
func TestBaseKeyNamesTheFiles(t *testing.T) {
	p := initParams{heapLimit: 1 << 20, preload: "import json"}
	var module, files, other [32]byte
	other[0] = 1
	if p.key(module, files) == p.key(module, other) {
		t.Fatal("the key does not change with the files")
	}
	again := initParams{heapLimit: 1 << 20, preload: "import json"}
	if p.key(module, files) != again.key(module, files) {
		t.Fatal("the key is not a function of its inputs")
	}
}

// TestBatteriesInAnImage: what the batteries keep in the interpreter's
// memory is in its memory image, as hibernation takes it: an imported
// module and its state, an Intl formatter, an in-memory SQLite database.
// An open connection to a database file is an open file: such a worker
// cannot be imaged until the code closes it.
func TestBatteriesInAnImage(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.mjs"), []byte("export let n = 1; export function bump() { return ++n }"), 0o644); err != nil {
		t.Fatal(err)
	}
	js := langWorker(t, e, "javascript", WorkerOptions{Dir: dir})
	check(t, js, "setup", "import { bump } from './m.mjs'\nconst usd = new Intl.NumberFormat('en-US', {style: 'currency', currency: 'USD'}); bump()", "2")
	js2, err := e.Restore(context.Background(), snapshot(t, js), WorkerOptions{Dir: dir}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer js2.Close()
	check(t, js2, "restored", "bump() + ' ' + usd.format(bump() * 1000)", `"3 $4,000.00"`)

	py := langWorker(t, e, "python", WorkerOptions{Dir: dir})
	check(t, py, "setup", "import sqlite3\nmem = sqlite3.connect(':memory:')\nmem.execute('create table t(x)')\nmem.execute('insert into t values (42)')\n"+
		"f = sqlite3.connect('file.db')\nf.execute('create table if not exists t(x)')\nf.commit()", "<nil>")
	if _, err := py.Snapshot(context.Background()); !errors.Is(err, ErrNotSnapshottable) {
		t.Fatalf("Snapshot with a database file open: %v; want ErrNotSnapshottable", err)
	}
	check(t, py, "close", "f.close()", "<nil>")
	py2, err := e.Restore(context.Background(), snapshot(t, py), WorkerOptions{Dir: dir}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer py2.Close()
	check(t, py2, "restored", "mem.execute('select x from t').fetchall(), sqlite3.connect('file.db').execute('select count(*) from t').fetchone()", "([(42,)], (0,))")
}
