package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The guests' batteries end to end, over MCP: a SQLite database is a file
// of the workspace like any other.

// TestSQLiteSurvivesRestart: a database written in /workspace is there
// after execd stops and starts again, in the same interpreter (saved at the
// stop) and, when the code had left its connection open (which keeps the
// interpreter from being saved), in a fresh one that still reads every
// committed row.
func TestSQLiteSurvivesRestart(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data, "")
	c := newMCP(t, d.url, true)
	py := func(ws, code string) map[string]any {
		t.Helper()
		sc, isErr := c.runLang(ws, "python", code)
		if isErr {
			t.Fatalf("%s: %q: %v", ws, code, sc)
		}
		return sc
	}
	py("closed", "import sqlite3\nkept = 'yes'\n"+
		"with sqlite3.connect('shop.db') as db:\n"+
		"    db.execute('create table items(name text, price real)')\n"+
		"    db.executemany('insert into items values (?, ?)', [('tea', 3.5), ('cake', 4.25)])\n"+
		"db.close()")
	py("open", "import sqlite3\nconn = sqlite3.connect('log.db')\nconn.execute('create table log(msg)')\n"+
		"conn.execute(\"insert into log values ('committed')\")\nconn.commit()\n"+
		"conn.execute(\"insert into log values ('not committed')\")")
	d.stop()

	for _, f := range []string{"closed/shop.db", "open/log.db"} {
		b, err := os.ReadFile(filepath.Join(data, "local", f))
		if err != nil || !bytes.HasPrefix(b, []byte("SQLite format 3\x00")) {
			t.Errorf("%s on the host: %.16q %v", f, b, err)
		}
	}

	d2 := startDaemon(t, data, "")
	c = newMCP(t, d2.url, true)
	sc := py("closed", "kept, sqlite3.connect('shop.db').execute('select name, price from items order by price').fetchall()")
	if sc["status"] != "ok" || sc["result"] != "('yes', [('tea', 3.5), ('cake', 4.25)])" {
		t.Errorf("closed connection, after the restart: %v", sc)
	}
	sc = py("open", "import sqlite3\nsqlite3.connect('log.db').execute('select msg from log').fetchall()")
	if sc["status"] != "reset" || sc["result"] != "[('committed',)]" {
		t.Errorf("open connection, after the restart: %v; want status reset (the interpreter held a file) and the committed row", sc)
	}
	d2.stop()
}

// TestSQLiteRunawayQueryTimesOut: a recursive CTE under timeout_ms ends
// with status timeout, and a variable of an earlier call is still there.
func TestSQLiteRunawayQueryTimesOut(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	c := newMCP(t, d.url, true)
	if sc, isErr := c.runLang("cte", "python", "import sqlite3\ndb = sqlite3.connect(':memory:')\ntotal = 42"); isErr {
		t.Fatalf("%v", sc)
	}
	m := c.RPC("tools/call", map[string]any{"name": "execute_code", "arguments": map[string]any{
		"code":     "db.execute('with recursive c(i) as (select 1 union all select i + 1 from c) select count(*) from c').fetchone()",
		"language": "python", "workspace": "cte", "timeout_ms": 500,
	}}, nil)
	res, _ := m["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if res["isError"] != true || sc["status"] != "timeout" || sc["reset"] == true {
		t.Fatalf("runaway query: %v", m)
	}
	if sc, isErr := c.runLang("cte", "python", "total, db.execute('select 1').fetchone()"); isErr || sc["result"] != "(42, (1,))" || sc["status"] != "ok" {
		t.Fatalf("after the timeout: %v", sc)
	}
	d.stop()
}

// TestSQLiteCountsAgainstTheQuota: a database grows only as far as the
// workspace's disk quota; the failed write is an error of the code, and
// the workspace goes on.
func TestSQLiteCountsAgainstTheQuota(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "", "", "max_disk_mib = 1")
	c := newMCP(t, d.url, true)
	sc, isErr := c.runLang("q", "python", "import sqlite3\ndb = sqlite3.connect('big.db')\ndb.execute('create table t(b)')\n"+
		"db.execute('insert into t with recursive c(i) as (select 1 union all select i + 1 from c where i < 4000) select randomblob(1000) from c')\n"+
		"db.commit()")
	if !isErr || !strings.Contains(sc["error"].(string), "OperationalError: disk I/O error") {
		t.Fatalf("4 MB into a 1 MiB quota: %v", sc)
	}
	sc, isErr = c.runLang("q", "python", "db.rollback()\ndb.execute('insert into t values (1)')\ndb.commit()\ndb.execute('select count(*) from t').fetchone()")
	if isErr || sc["result"] != "(1,)" {
		t.Fatalf("after the quota error: %v", sc)
	}
	d.stop()
}
