package main

// These tests build the real execd binary and drive it over HTTP, with the
// real JavaScript guest: what a client meets, end to end. They need the
// guest (make guests) and fail, not skip, without it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"execd/internal/mcptest"
	"execd/internal/procstat"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "execd-bin")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "execd")
	out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
	mu     *sync.Mutex
	exited chan error
}

// startDaemon runs execd and waits until it listens. serverTOML is added to
// the [server] table; moreTOML (other tables, but not [workspace]) after it;
// workspaceTOML to the [workspace] table, which gets data_dir.
func startDaemon(t *testing.T, dataDir, serverTOML string, more ...string) *daemon {
	t.Helper()
	moreTOML, workspaceTOML := "", ""
	if len(more) > 0 {
		moreTOML = more[0]
	}
	if len(more) > 1 {
		workspaceTOML = more[1]
	}
	toml := fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\n%s\n%s\n[workspace]\ndata_dir = %q\n%s\n", serverTOML, moreTOML, dataDir, workspaceTOML)
	d, _ := launch(t, toml, false)
	return d
}

var (
	listenURLRE = regexp.MustCompile(`listening\s+\{"url": "(http://[^"]+)"`)
	adminURLRE  = regexp.MustCompile(`admin listener\s+\{"url": "(http://[^"]+)/"`)
)

// launch starts execd with the TOML config and waits for its MCP URL and,
// when withAdmin, its admin listener's URL (without the last slash), both read from its log.
func launch(t *testing.T, toml string, withAdmin bool) (*daemon, string) {
	t.Helper()
	cfgFile := filepath.Join(t.TempDir(), "execd.toml")
	if err := os.WriteFile(cfgFile, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, "-config", cfgFile)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, cmd: cmd, stderr: &bytes.Buffer{}, mu: &sync.Mutex{}, exited: make(chan error, 1)}
	urlc, debugc := make(chan string, 1), make(chan string, 1)
	logged := make(chan struct{}) // closed when the last line of the log is in d.stderr
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.mu.Lock()
			d.stderr.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			if m := listenURLRE.FindStringSubmatch(sc.Text()); m != nil {
				offer(urlc, m[1])
			}
			if m := adminURLRE.FindStringSubmatch(sc.Text()); m != nil {
				offer(debugc, m[1])
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		<-logged // so that whoever learns of the exit reads the whole log
		d.exited <- err
	}()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
	var debug string
	for d.url == "" || (withAdmin && debug == "") {
		select {
		case d.url = <-urlc:
		case debug = <-debugc:
		case err := <-d.exited:
			t.Fatalf("execd exited at start: %v\n%s", err, d.logs())
		case <-time.After(60 * time.Second):
			t.Fatalf("execd did not start\n%s", d.logs())
		}
	}
	return d, debug
}

// offer sends s on c unless c is full: launch waits for the first URL of
// each kind only, and the log's reader must never block.
func offer(c chan<- string, s string) {
	select {
	case c <- s:
	default:
	}
}

func (d *daemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

// stop sends SIGTERM and waits for exit status 0.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			d.t.Fatalf("execd exited with %v after SIGTERM\n%s", err, d.logs())
		}
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		d.t.Fatalf("execd did not exit after SIGTERM\n%s", d.logs())
	}
}

// mcp is the shared MCP test client (internal/mcptest) with the daemon
// tests' shorthands.
type mcp struct{ *mcptest.Client }

// newMCP is a client of url in the modern era, or in the legacy era, where
// init starts its session.
func newMCP(t testing.TB, url string, modern bool) *mcp {
	return &mcp{&mcptest.Client{T: t, URL: url, Legacy: !modern}}
}

// withToken sets the client's bearer token.
func (c *mcp) withToken(token string) *mcp { c.Token = token; return c }

// init starts a legacy session (initialize, initialized); nothing in the
// modern era.
func (c *mcp) init() {
	c.T.Helper()
	if c.Legacy {
		c.Initialize()
	}
}

// run calls execute_code in JavaScript and returns structuredContent and
// isError.
func (c *mcp) run(ws, code string) (map[string]any, bool) {
	c.T.Helper()
	return c.runLang(ws, "javascript", code)
}

func TestStateAcrossCallsBothEras(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	for _, modern := range []bool{false, true} {
		c := newMCP(t, d.url, modern)
		c.init()
		sc, isErr := c.run("", "let x = 41")
		ws, _ := sc["workspace"].(string)
		if isErr || ws == "" {
			t.Fatalf("modern=%v: first call %v", modern, sc)
		}
		sc, isErr = c.run(ws, "x + 1")
		if isErr || sc["result"] != "42" {
			t.Fatalf("modern=%v: state lost: %v", modern, sc)
		}
		// Agents re-run cells.
		if sc, isErr = c.run(ws, "let x = 5; x * 2"); isErr || sc["result"] != "10" {
			t.Fatalf("modern=%v: re-declaring let: %v", modern, sc)
		}
	}
	d.stop()
}

func TestFilesSurviveRestart(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data, "")
	c := newMCP(t, d.url, false)
	c.init()
	sc, isErr := c.run("notes", `fs.writeFile("/workspace/note.txt", "kept across restarts"); var v = 1`)
	if isErr {
		t.Fatalf("write: %v", sc)
	}
	d.stop()
	if b, err := os.ReadFile(filepath.Join(data, "local", "notes", "note.txt")); err != nil || string(b) != "kept across restarts" {
		t.Fatalf("file on the host: %q, %v", b, err)
	}
	d2 := startDaemon(t, data, "")
	c2 := newMCP(t, d2.url, false)
	c2.init()
	sc, isErr = c2.run("notes", `fs.readFile("/workspace/note.txt") + "/" + typeof v`)
	if isErr || sc["result"] != `"kept across restarts/number"` {
		t.Fatalf("after restart: %v", sc)
	}
	if sc["status"] != "ok" {
		t.Errorf("status %v after restart; want ok (the interpreter was saved at the stop)", sc["status"])
	}
	d2.stop()
}

func TestPrincipalsIsolated(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("alice alice-token-0123456789\nbob bob-token-0123456789ab\n"), 0o600)
	d := startDaemon(t, t.TempDir(), fmt.Sprintf("auth_tokens_file = %q", tokens))
	alice := newMCP(t, d.url, true).withToken("alice-token-0123456789")
	bob := newMCP(t, d.url, true).withToken("bob-token-0123456789ab")
	if sc, isErr := alice.run("shared", `var secret = "alice's"; fs.writeFile("/workspace/s.txt", secret)`); isErr {
		t.Fatalf("alice: %v", sc)
	}
	sc, isErr := bob.run("shared", `typeof secret + "," + fs.exists("/workspace/s.txt")`)
	if isErr || sc["result"] != `"undefined,false"` {
		t.Fatalf("bob sees alice's workspace: %v", sc)
	}
	m := bob.RPC("tools/call", map[string]any{"name": "list_workspaces", "arguments": map[string]any{}}, nil)
	b, _ := json.Marshal(m)
	if !strings.Contains(string(b), `shared`) {
		t.Fatalf("bob's list lacks his own workspace: %s", b)
	}
	bob.RPC("tools/call", map[string]any{"name": "delete_workspace", "arguments": map[string]any{"workspace": "shared"}}, nil)
	if sc, isErr := alice.run("shared", `secret + "," + fs.readFile("/workspace/s.txt")`); isErr || sc["result"] != `"alice's,alice's"` {
		t.Fatalf("bob's delete reached alice: %v", sc)
	}
	d.stop()
}

func TestGuestCannotLeaveItsDirectory(t *testing.T) {
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "outside.txt"), []byte("host secret"), 0o600)
	d := startDaemon(t, data, "")
	c := newMCP(t, d.url, true)
	for _, code := range []string{
		`fs.readFile("/etc/passwd")`,
		`fs.readFile("/workspace/../../outside.txt")`,
		`fs.readFile("../../outside.txt")`,
		`fs.readFile("/workspace/../../../../etc/passwd")`,
		`fs.readdir("/")`,
	} {
		sc, isErr := c.run("jail", code)
		if !isErr {
			if r, _ := sc["result"].(string); strings.Contains(r, "host secret") || strings.Contains(r, "root:") || strings.Contains(r, "outside.txt") {
				t.Errorf("%s escaped: %v", code, sc)
			}
		}
	}
	d.stop()
}

func TestDiskQuota(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "", "", "max_disk_mib = 1")
	c := newMCP(t, d.url, true)
	sc, isErr := c.run("q", `let big = "x".repeat(1 << 20); let n = 0; let err = "";
try { for (let i = 0; i < 4; i++) { fs.writeFile("/workspace/f" + i, big); n++ } } catch (e) { err = String(e) }
n + " " + err`)
	if isErr {
		t.Fatalf("%v", sc)
	}
	r, _ := sc["result"].(string)
	if !strings.HasPrefix(r, `"0 `) && !strings.HasPrefix(r, `"1 `) || !strings.Contains(r, "rror") {
		t.Fatalf("4 MiB of writes under a 1 MiB quota: %v", sc)
	}
	// The workspace keeps working, and small writes within the quota after a delete succeed.
	sc, isErr = c.run("q", `for (const f of fs.readdir("/workspace")) fs.unlink("/workspace/" + f); fs.writeFile("/workspace/small", "ok"); fs.readFile("/workspace/small")`)
	if isErr || sc["result"] != `"ok"` {
		t.Fatalf("after the quota error: %v", sc)
	}
	d.stop()
}

func TestAuthTokensReloadOnSIGHUP(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("alice old-token-0123456789\n"), 0o600)
	d := startDaemon(t, t.TempDir(), fmt.Sprintf("auth_tokens_file = %q", tokens))
	status := func(token string) int {
		c := &mcptest.Client{T: t, URL: d.url, Token: token}
		body, hdr := c.Request(1, "tools/list", nil)
		resp := c.Post(context.Background(), string(body), hdr)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := status("old-token-0123456789"); s != 200 {
		t.Fatalf("old token before reload: %d", s)
	}
	os.WriteFile(tokens, []byte("alice new-token-0123456789\n"), 0o600)
	d.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for status("new-token-0123456789") != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("new token refused after SIGHUP\n%s", d.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := status("old-token-0123456789"); s != 401 {
		t.Fatalf("old token after reload: %d", s)
	}
	d.stop()
	if logs := d.logs(); strings.Contains(logs, "token-0123456789") {
		t.Fatalf("a token appears in the logs:\n%s", logs)
	}
}

// rssKiB is a process's resident set size; an error fails the test.
func rssKiB(t testing.TB, pid int) int64 {
	t.Helper()
	n, err := procstat.RSSKiB(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestWorkspaceCreationLoopStaysBounded(t *testing.T) {
	// A client that makes a new workspace on every call: with at most 4 live
	// interpreters, memory must stop growing however many it makes.
	d := startDaemon(t, t.TempDir(), "", "", "max_workspaces = 4")
	c := newMCP(t, d.url, true)
	for i := 0; i < 40; i++ {
		if sc, isErr := c.run("", "var big = new Array(1e5).fill(1); big.length"); isErr {
			t.Fatalf("call %d: %v", i, sc)
		}
	}
	warm := rssKiB(t, d.cmd.Process.Pid)
	for i := 0; i < 200; i++ {
		if sc, isErr := c.run("", "var big = new Array(1e5).fill(1); big.length"); isErr {
			t.Fatalf("call %d: %v", i, sc)
		}
	}
	after := rssKiB(t, d.cmd.Process.Pid)
	// 200 more workspaces at ~3 MiB each would add ~600 MiB if they were
	// kept; evicted ones must give their memory back to the Go heap.
	if after > warm+96*1024 {
		t.Fatalf("RSS grew from %d KiB to %d KiB over 200 new workspaces with max_workspaces = 4", warm, after)
	}
	t.Logf("RSS after 40 workspaces: %d KiB; after 240: %d KiB", warm, after)
	d.stop()
}

func TestTimeoutCountsRunTimeNotQueueTime(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "", "[limits]\nmax_concurrent_runs = 1")
	c := newMCP(t, d.url, true)
	call := func(ws, code string, timeoutMs int, token string) <-chan map[string]any {
		args := map[string]any{"code": code, "language": "javascript", "workspace": ws, "timeout_ms": timeoutMs}
		return c.Stream("tools/call", map[string]any{"name": "execute_code", "arguments": args, "_meta": map[string]any{"progressToken": token}})
	}
	// The busy call reports from inside the guest: once that frame is in,
	// it holds the only run slot.
	busy := call("a", `progress(1, 0, "spinning"); while(true){}`, 1500, "busy")
	for m := range busy {
		if p, _ := m["params"].(map[string]any); p != nil && strings.Contains(fmt.Sprint(p["message"]), "spinning") {
			break
		}
		if m["id"] != nil {
			t.Fatalf("the busy call answered before it spun: %v", m)
		}
	}
	queued := false
	var sc map[string]any
	for m := range call("b", "6*7", 1000, "waiting") {
		if p, _ := m["params"].(map[string]any); p != nil && strings.HasPrefix(fmt.Sprint(p["message"]), "queued:") {
			queued = true
		}
		if r, ok := m["result"].(map[string]any); ok {
			sc, _ = r["structuredContent"].(map[string]any)
		}
	}
	if !queued {
		t.Fatal("the second call never said it was queued for the run slot")
	}
	if sc["status"] != "ok" || sc["result"] != "42" {
		t.Fatalf("a call that waited for the only run slot longer than its timeout_ms: %v", sc)
	}
	var last map[string]any
	for m := range busy {
		last = m
	}
	if sc := last["result"].(map[string]any)["structuredContent"].(map[string]any); sc["status"] != "timeout" {
		t.Fatalf("the busy call: %v", sc)
	}
	d.stop()
}

func TestPythonAndJavaScriptShareAWorkspace(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	for _, modern := range []bool{false, true} {
		c := newMCP(t, d.url, modern)
		c.init()
		ws := fmt.Sprintf("mixed-%v", modern)
		py := func(code string) (map[string]any, bool) {
			m := c.RPC("tools/call", map[string]any{"name": "execute_code", "arguments": map[string]any{"code": code, "language": "python", "workspace": ws}}, nil)
			res := m["result"].(map[string]any)
			isErr, _ := res["isError"].(bool)
			return res["structuredContent"].(map[string]any), isErr
		}
		if sc, isErr := py("x = 41\nopen('/workspace/from_py.txt', 'w').write('hello from python')"); isErr {
			t.Fatalf("modern=%v: %v", modern, sc)
		}
		if sc, isErr := py("x + 1"); isErr || sc["result"] != "42" {
			t.Fatalf("modern=%v: python state: %v", modern, sc)
		}
		if sc, isErr := c.run(ws, `fs.readFile("/workspace/from_py.txt")`); isErr || sc["result"] != `"hello from python"` {
			t.Fatalf("modern=%v: javascript reading python's file: %v", modern, sc)
		}
		if sc, isErr := py("1/0"); !isErr || !strings.Contains(sc["error"].(string), "ZeroDivisionError") {
			t.Fatalf("modern=%v: python exception: %v", modern, sc)
		}
	}
	d.stop()
}
