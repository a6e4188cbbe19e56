package worker

import (
	"bytes"
	"context"
	"encoding/binary"
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

// pyRows runs code and returns its value, failing unless the status is ok.
func pyCheck(t *testing.T, w *Worker, name, code, want string) {
	t.Helper()
	r := w.Run(context.Background(), code, nil)
	if r.Status != StatusOK || value(r) != want {
		t.Errorf("%s: %s\nstdout: %.300s\nwant %s", name, describe(r), r.Stdout, want)
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
		pyCheck(t, w, c.name, c.code, c.want)
	}
	// No temporary file ever appears in the workspace, even for a sort that
	// spills (temp_store is memory).
	pyCheck(t, w, "big sort", "f = sqlite3.connect('/workspace/data.db')\n"+
		"n = f.execute('with recursive c(i) as (select 1 union all select i + 1 from c where i < 200000) select count(*) from (select i from c order by random())').fetchone()\n"+
		"f.close()\nn, sorted(os.listdir('/workspace'))", "((200000,), ['data.db'])")

	// Another interpreter (the same files) reads the database.
	w2 := newPyWorker(t, WorkerOptions{Dir: dir})
	pyCheck(t, w2, "reopened", "import sqlite3\nwith sqlite3.connect('data.db') as c:\n    v = c.execute(\"select v from kv where k = 'answer'\").fetchone()\nv", "(42,)")
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
		if r.Status != StatusTimeout || r.Reset {
			t.Errorf("strict=%v: runaway query = %s; want timeout, state kept", strict, describe(r))
		}
		if got := value(mustRun(t, w, "kept, db.execute('select 6 * 7').fetchone()", StatusOK)); got != "('yes', (42,))" {
			t.Errorf("strict=%v: after the timeout: %s", strict, got)
		}
		// Caught by the code: the stop comes back at the next check.
		r = runWithTimeout(w, "try:\n    "+runawayCTE+"\nexcept sqlite3.OperationalError as e:\n    caught = e.args[0]\nwhile True:\n    pass", 200*time.Millisecond)
		if r.Status != StatusTimeout || r.Reset {
			t.Errorf("strict=%v: caught stop = %s", strict, describe(r))
		}
		if got := value(mustRun(t, w, "caught", StatusOK)); got != "'interrupted'" {
			t.Errorf("strict=%v: the query ended with %s", strict, got)
		}
		// The code's own progress handler runs, and the stop still comes.
		mustRun(t, w, "calls = 0\ndef count():\n    global calls\n    calls += 1\n    return 0\ndb.set_progress_handler(count, 100)", StatusOK)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		r = w.Run(ctx, runawayCTE, nil)
		cancel()
		if r.Status != StatusInterrupted || r.Reset {
			t.Errorf("strict=%v: cancelled query = %s; want interrupted", strict, describe(r))
		}
		if got := value(mustRun(t, w, "calls > 10, kept", StatusOK)); got != "(True, 'yes')" {
			t.Errorf("strict=%v: the code's progress handler: %s", strict, got)
		}
		// Removing it leaves the stop in place.
		mustRun(t, w, "db.set_progress_handler(None, 0)", StatusOK)
		if r := runWithTimeout(w, runawayCTE, 200*time.Millisecond); r.Status != StatusTimeout || r.Reset {
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
		r := w.Run(context.Background(), b.bomb, nil)
		if r.Status != StatusOOM || r.Error == nil || r.Error.Type != "MemoryError" || r.Reset {
			t.Errorf("%s: %s; want oom, state kept", b.domain, describe(r))
		}
		if got := value(w.Run(context.Background(), "keep, x is not None", nil)); got != "('kept', True)" {
			t.Errorf("after the %s bomb: %s", b.domain, got)
		}
		mustRun(t, w, "del x\nimport gc\ngc.collect()", StatusOK)
		if b.domain == "sqlite" {
			mustRun(t, w, "db.close()", StatusOK)
		}
		// 25 MiB again, in pieces: one allocation of that size may not find
		// a hole in a heap the bomb filled (the allocator cannot move what
		// survived it, and linear memory is at its cap).
		if r := w.Run(context.Background(), "len([bytearray(1 << 20) for _ in range(25)])", nil); value(r) != "25" {
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
		{"metadata", "import importlib.metadata as md\nmd.version('networkx'), md.version('sympy')", "('2.8.8', '1.11.1')"},
	}
	for _, c := range cases {
		pyCheck(t, w, c.name, c.code, c.want)
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
	pyCheck(t, w, "modules", "import sys\nsorted(m for m in sys.modules if m.split('.')[0] in "+
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
		"requests":   {"no network"},
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
	pyCheck(t, w, "probe", "import importlib.util\ntry:\n    import numpy\n    r = 'numpy'\nexcept ImportError as e:\n    r = e.name\n(r, importlib.util.find_spec('numpy'))", "('numpy', None)")
	pyCheck(t, w, "other", "try:\n    import no_such_module\nexcept ModuleNotFoundError as e:\n    r = str(e)\nr", `"No module named 'no_such_module'"`)
}
