package main

// Fault tests: hostile code next to a well-behaved neighbour, clients that
// vanish mid-stream, SIGTERM with many calls in flight (HTTP and stdio), and
// SIGKILL in the middle of runs. Like daemon_test.go they drive the real
// binary with the real JavaScript guest, and they read the daemon's own
// goroutine count and resident memory through server.admin_listen and
// /proc, so that a leak of a goroutine or of a whole sandbox per call shows.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/mcptest"
)

// probe reads a daemon's resources: goroutines through its admin listener,
// resident memory through /proc.
type probe struct {
	t     *testing.T
	debug string // http://127.0.0.1:port/debug/pprof/
	pid   int
	hc    *http.Client
}

// startProbedDaemon is startDaemon with server.admin_listen on a free
// loopback port. serverTOML is added to [server]; more[0] holds other tables.
func startProbedDaemon(t *testing.T, dataDir, serverTOML string, more ...string) (*daemon, *probe) {
	t.Helper()
	moreTOML := ""
	if len(more) > 0 {
		moreTOML = more[0]
	}
	toml := fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n%s\n%s\n[workspace]\ndata_dir = %q\n", serverTOML, moreTOML, dataDir)
	d, debug := launch(t, toml, true)
	return d, &probe{t: t, debug: debug + "/debug/pprof/", pid: d.cmd.Process.Pid,
		hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

var goroutineTotalRE = regexp.MustCompile(`^goroutine profile: total (\d+)`)

// goroutines is the daemon's goroutine count. The request that asks is
// served by a goroutine of its own, which is counted every time alike.
func (p *probe) goroutines() int {
	p.t.Helper()
	resp, err := p.hc.Get(p.debug + "goroutine?debug=1")
	if err != nil {
		p.t.Fatalf("goroutine profile: %v", err)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	m := goroutineTotalRE.FindStringSubmatch(line)
	if m == nil {
		p.t.Fatalf("goroutine profile starts with %q", line)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// goroutineDump is the daemon's goroutine stacks, for failure messages.
func (p *probe) goroutineDump() string {
	resp, err := p.hc.Get(p.debug + "goroutine?debug=1")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// rssKiB is the daemon's VmRSS.
func (p *probe) rssKiB() int64 {
	p.t.Helper()
	return rssKiB(p.t, p.pid)
}

// gc makes the daemon collect garbage (the heap profile's gc=1 runs
// runtime.GC first), so that freed sandbox memory becomes free heap that the
// Go scavenger then returns to the system; without it an idle daemon may
// hold on to freed memory until its next periodic collection.
func (p *probe) gc() {
	p.t.Helper()
	resp, err := p.hc.Get(p.debug + "heap?gc=1&debug=1")
	if err != nil {
		p.t.Fatalf("heap profile: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// baseline waits for the daemon to be quiet and returns its goroutine count
// and RSS. Idle keep-alive connections each hold a server goroutine: the
// clients' are closed, and the count is taken once the daemon serves no
// connection but the probe's own request.
func (p *probe) baseline() (int, int64) {
	p.t.Helper()
	http.DefaultClient.CloseIdleConnections()
	n := 0
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if n = p.connections(); n <= 1 {
			break
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the daemon still serves %d connections a minute after the clients closed theirs\n%s", n, p.goroutineDump())
		}
	}
	return p.goroutines(), p.quietRSS()
}

// quietRSS collects garbage and reads RSS until a reading is not below the
// one before by more than a MiB (what the collection freed has been given
// back), at most 50 rounds, and returns the lowest reading.
func (p *probe) quietRSS() int64 {
	p.t.Helper()
	p.gc()
	low := p.rssKiB()
	for range 50 {
		p.gc()
		n := p.rssKiB()
		if n >= low-1024 {
			return min(n, low)
		}
		low = n
	}
	return low
}

// goroutineSlack is how many goroutines above the baseline still count as
// "back to baseline": the runtime and net/http start and stop a few of their
// own (timers, a connection being torn down), but a leak of one goroutine
// per call, or of a call's heartbeat, stream or worker goroutine, exceeds it
// after the calls these tests make.
const goroutineSlack = 3

// settleGoroutines polls (bounded) until the goroutine count is within
// goroutineSlack of base.
func (p *probe) settleGoroutines(what string, base int) {
	p.t.Helper()
	http.DefaultClient.CloseIdleConnections()
	n := 0
	for i := 0; i < 100; i++ { // at most ~10s
		if n = p.goroutines(); n <= base+goroutineSlack {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Errorf("%s: %d goroutines, baseline %d (+%d allowed)\n%s", what, n, base, goroutineSlack, p.goroutineDump())
}

// rssSlackKiB bounds RSS after a hostile run, once the workspace is gone.
// A memory bomb holds up to max_memory_mib (128 here) of linear memory, kept
// outside the Go heap and not copied as it grows, until its workspace is
// deleted, when it is given back within seconds: RSS is back within a few
// MiB of the baseline (about 120 MiB, both guests compiled). 64 MiB is generous for
// allocator noise, yet a sandbox leaked per hostile call (up to 128 MiB
// each) cannot hide under it for long.
const rssSlackKiB = 64 << 10

// settleRSS polls (bounded), collecting garbage each time, until RSS is
// within rssSlackKiB of base.
func (p *probe) settleRSS(what string, base int64) int64 {
	p.t.Helper()
	var n int64
	for i := 0; i < 60; i++ { // at most ~30s
		p.gc()
		if n = p.rssKiB(); n <= base+rssSlackKiB {
			return n
		}
		time.Sleep(500 * time.Millisecond)
	}
	p.t.Errorf("%s: RSS %d MiB, baseline %d MiB (+%d allowed)", what, n>>10, base>>10, rssSlackKiB>>10)
	return n
}

// execParams are the params of an execute_code call with a progress token.
func execParams(ws, code string, timeoutMS int, token any) map[string]any {
	args := map[string]any{"code": code, "language": "javascript", "workspace": ws}
	if timeoutMS > 0 {
		args["timeout_ms"] = timeoutMS
	}
	p := map[string]any{"name": "execute_code", "arguments": args}
	if token != nil {
		p["_meta"] = map[string]any{"progressToken": token}
	}
	return p
}

// hostileCase is one snippet of hostile code and the statuses it may end in.
type hostileCase struct {
	name, code string
	timeoutMS  int
	status     []string
}

var hostileCases = []hostileCase{
	{"infinite loop", "while(true){}", 500, []string{"timeout"}},
	{"deep recursion", "function f(n){ return f(n + 1) + 1 }; f(0)", 0, []string{"error"}},
	// A naive native substring search (~6e10 byte comparisons: tens of
	// seconds on any machine, 1 MB of memory) never polls the interrupt
	// flag: the soft interrupt cannot stop it, so the sandbox is killed
	// after the grace (the kill switch traps the guest at its next loop
	// head) and the workspace comes back fresh.
	{"hard kill (native search)", "const h = 'a'.repeat(1 << 20), n = 'a'.repeat(1 << 16) + 'b'; h.indexOf(n)", 1000, []string{"timeout"}},
	{"memory bomb", "let a=[]; for(;;) a.push(new Array(1e6).fill(1))", 0, []string{"oom"}},
	{"output flood", "const l = 'x'.repeat(1 << 20); for (let i = 0; i < 100; i++) console.log(l); 'end'", 0, []string{"ok"}},
	{"output flood, endless", "for(;;) console.log('y'.repeat(1000))", 1000, []string{"timeout"}},
	{"promise flood", "for(;;) Promise.resolve().then(()=>{})", 1000, []string{"timeout", "oom"}},
	{"catastrophic regex", `/(a+)+$/.test("a".repeat(40)+"b")`, 1000, []string{"timeout"}},
	{"string doubling", "let s = 'x'; for (;;) s += s", 0, []string{"error", "oom"}},
}

// bystanderCode computes a known value slowly enough to overlap a hostile
// run in another workspace, and reads the workspace's state.
const bystanderCode = `(() => { let s = 0; for (let i = 0; i < 300000; i++) s += i % 7; return mark + ":" + s })()`

func bystanderSum() int {
	s := 0
	for i := 0; i < 300000; i++ {
		s += i % 7
	}
	return s
}

// TestHostileCodeNeitherDisturbsNeighboursNorLeaks runs each hostile case in
// its own workspace while a legacy-era client keeps calling a well-behaved
// workspace, which must answer right every time with its state intact; after
// each case (its workspace deleted, since a workspace may legitimately keep
// what its code allocated) the daemon's goroutines and RSS return to their
// baseline.
func TestHostileCodeNeitherDisturbsNeighboursNorLeaks(t *testing.T) {
	d, p := startProbedDaemon(t, t.TempDir(), "",
		"[limits]\nmax_memory_mib = 128\nmax_concurrent_runs = 4\n[sandbox]\ninterrupt_grace = \"500ms\"")
	calm := newMCP(t, d.url, false)
	calm.init()
	nonce := fmt.Sprintf("n%d", time.Now().UnixNano())
	if sc, isErr := calm.run("calm", fmt.Sprintf("var mark = %q", nonce)); isErr {
		t.Fatalf("bystander set-up: %v", sc)
	}
	want := fmt.Sprintf("%q", fmt.Sprintf("%s:%d", nonce, bystanderSum()))
	// Warm up: an instance created and deleted, so that one-time caches are
	// part of the baseline.
	warm := newMCP(t, d.url, true)
	warm.run("warm", "1")
	warm.RPC("tools/call", map[string]any{"name": "delete_workspace", "arguments": map[string]any{"workspace": "warm"}}, nil)
	baseG, baseRSS := p.baseline()
	t.Logf("baseline: %d goroutines, RSS %d MiB", baseG, baseRSS>>10)

	hostile := &mcptest.Client{URL: d.url}
	neighbourCalls := 0
	for i, hc := range hostileCases {
		ws := fmt.Sprintf("hostile-%d", i)
		type outcome struct {
			msg map[string]any
			err error
		}
		done := make(chan outcome, 1)
		// The neighbour's calls begin once the hostile code runs (it says
		// so first), or has been answered.
		started := make(chan struct{})
		var once sync.Once
		code := `progress(0, 0, "hostile started"); ` + hc.code
		go func() {
			msg, err := hostile.Call(context.Background(), i+1, "tools/call", execParams(ws, code, hc.timeoutMS, fmt.Sprintf("h%d", i)),
				func(m map[string]any) bool {
					if p, _ := m["params"].(map[string]any); p["message"] == "hostile started" {
						once.Do(func() { close(started) })
					}
					return true
				})
			once.Do(func() { close(started) })
			done <- outcome{msg, err}
		}()
		<-started
		var out outcome
		calls := 0
	loop:
		for calls < 1000 { // bounded; each call takes a few ms to a few hundred
			sc, isErr := calm.run("calm", bystanderCode)
			calls++
			if isErr || sc["result"] != want || sc["status"] != "ok" {
				t.Errorf("%s: the neighbour's call %d answered %v; want ok %s", hc.name, calls, sc, want)
			}
			select {
			case out = <-done:
				break loop
			default:
			}
		}
		if out.msg == nil && out.err == nil {
			out = <-done
		}
		neighbourCalls += calls
		if out.err != nil {
			t.Fatalf("%s: %v\n%s", hc.name, out.err, d.logs())
		}
		sc, isErr, err := mcptest.Structured(out.msg)
		if err != nil {
			t.Fatalf("%s: %v", hc.name, err)
		}
		status, _ := sc["status"].(string)
		ok := false
		for _, s := range hc.status {
			ok = ok || status == s
		}
		// isError: every status but ok, and ok with truncated output.
		if !ok || isErr != (status != "ok" || sc["truncated"] == true) {
			t.Errorf("%s: status %q isError %v; want one of %v: %.300v", hc.name, status, isErr, hc.status, sc)
		}
		if strings.Contains(hc.name, "flood") && status == "ok" && sc["truncated"] != true {
			t.Errorf("%s: output not marked truncated", hc.name)
		}
		if strings.HasPrefix(hc.name, "hard kill") && sc["reset"] != true {
			t.Errorf("%s: not reset: %v", hc.name, sc)
		}
		// The hostile workspace itself still works afterwards.
		after := newMCP(t, d.url, true)
		if sc, isErr := after.run(ws, "6*7"); isErr || sc["result"] != "42" {
			t.Errorf("%s: the workspace after it: %v", hc.name, sc)
		}
		after.RPC("tools/call", map[string]any{"name": "delete_workspace", "arguments": map[string]any{"workspace": ws}}, nil)
		p.settleGoroutines(hc.name, baseG)
		rss := p.settleRSS(hc.name, baseRSS)
		t.Logf("%-28s status %-8s reset=%-5v neighbour calls %3d; then %d goroutines, RSS %d MiB",
			hc.name, status, sc["reset"] == true, calls, p.goroutines(), rss>>10)
	}
	// Run the memory bomb twice more: a sandbox leaked per call would add
	// its linear memory each time.
	for i := 0; i < 2; i++ {
		c := newMCP(t, d.url, i == 0)
		c.init()
		ws := fmt.Sprintf("bomb-%d", i)
		if sc, _ := c.run(ws, "let a=[]; for(;;) a.push(new Array(1e6).fill(1))"); sc["status"] != "oom" {
			t.Errorf("memory bomb %d: %v", i, sc)
		}
		c.RPC("tools/call", map[string]any{"name": "delete_workspace", "arguments": map[string]any{"workspace": ws}}, nil)
	}
	p.settleGoroutines("memory bombs", baseG)
	rss := p.settleRSS("memory bombs", baseRSS)
	t.Logf("%d hostile cases (+2 memory bombs), %d neighbour calls, all answered right; final RSS %d MiB", len(hostileCases), neighbourCalls, rss>>10)
	d.stop()
}

// TestDisconnectLeavesNothingBehind: a client that closes its stream
// mid-run. Legacy era (cancel_on_disconnect off): the run goes on to its
// end, its answer is dropped, and nothing is left. Modern era: the run is
// cancelled at once, its workspace keeps its state, and nothing is left.
func TestDisconnectLeavesNothingBehind(t *testing.T) {
	// Enough run slots for every run at once: timeout_ms counts time spent
	// waiting for a slot too.
	d, p := startProbedDaemon(t, t.TempDir(), "", "[limits]\nmax_concurrent_runs = 8")
	newMCP(t, d.url, true).run("warm", "1")
	baseG, _ := p.baseline()

	t.Run("legacy", func(t *testing.T) {
		s := newMCP(t, d.url, false)
		s.init()
		for i := 0; i < 5; i++ {
			ws := fmt.Sprintf("legacy-gone-%d", i)
			// The run sets a variable after ~300ms of work and then spins
			// until timeout_ms: the variable proves it went on after the
			// client left, the timeout bounds it.
			code := `progress(0, 0, "go"); const t0 = Date.now(); while (Date.now() - t0 < 300) {} var reached = "yes"; while (true) {}`
			_, err := s.Call(context.Background(), 100+i, "tools/call", execParams(ws, code, 2000, fmt.Sprintf("lg%d", i)),
				func(m map[string]any) bool {
					params, _ := m["params"].(map[string]any)
					return params["message"] != "go"
				})
			if !errors.Is(err, mcptest.ErrClosed) {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		// Each workspace's next call waits for the abandoned run to time out
		// and then sees that it ran on after the disconnect.
		c := newMCP(t, d.url, true)
		for i := 0; i < 5; i++ {
			sc, isErr := c.run(fmt.Sprintf("legacy-gone-%d", i), "typeof reached === 'string' ? reached : 'no'")
			if isErr || sc["result"] != `"yes"` {
				t.Errorf("legacy run %d after the disconnect: %v (want it to have run on)", i, sc)
			}
		}
		p.settleGoroutines("legacy disconnects", baseG)
	})

	t.Run("modern", func(t *testing.T) {
		s := &mcptest.Client{URL: d.url}
		for i := 0; i < 5; i++ {
			ws := fmt.Sprintf("modern-gone-%d", i)
			// No timeout: only the stream's close can stop it.
			code := `var before = "kept"; progress(0, 0, "go"); while (true) {}`
			_, err := s.Call(context.Background(), 200+i, "tools/call", execParams(ws, code, 0, fmt.Sprintf("mg%d", i)),
				func(m map[string]any) bool {
					params, _ := m["params"].(map[string]any)
					return params["message"] != "go"
				})
			if !errors.Is(err, mcptest.ErrClosed) {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		// If the close had not cancelled the runs, these would wait forever
		// (bounded by the client's timeout).
		hc := &http.Client{Timeout: 30 * time.Second}
		for i := 0; i < 5; i++ {
			s2 := &mcptest.Client{URL: d.url, HTTP: hc}
			msg, err := s2.Call(context.Background(), 300+i, "tools/call", execParams(fmt.Sprintf("modern-gone-%d", i), "before", 0, nil), nil)
			if err != nil {
				t.Fatalf("modern run %d was not cancelled by the close: %v", i, err)
			}
			sc, isErr, err := mcptest.Structured(msg)
			if err != nil || isErr || sc["result"] != `"kept"` || sc["status"] != "ok" {
				t.Errorf("modern workspace %d after the close: %v %v (want its state kept)", i, sc, err)
			}
		}
		hc.CloseIdleConnections()
		p.settleGoroutines("modern disconnects", baseG)
	})
	d.stop()
}

// stdioProc is an execd -stdio process driven line by line.
type stdioProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan map[string]any
	exited chan error
	stderr *bytes.Buffer
	mu     sync.Mutex
}

func startStdio(t *testing.T, cfgTOML string) *stdioProc {
	t.Helper()
	cfgFile := filepath.Join(t.TempDir(), "execd.toml")
	if err := os.WriteFile(cfgFile, []byte(cfgTOML), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, "-stdio", "-config", cfgFile)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	p := &stdioProc{cmd: cmd, in: in, lines: make(chan map[string]any, 1024), exited: make(chan error, 1), stderr: &bytes.Buffer{}}
	cmd.Stderr = &lockedWriter{mu: &p.mu, w: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]any{"unparsable": sc.Text()}
			}
			p.lines <- m
		}
		close(p.lines)
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *stdioProc) send(t *testing.T, msg map[string]any) {
	t.Helper()
	msg["jsonrpc"] = "2.0"
	b, _ := json.Marshal(msg)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

func (p *stdioProc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// TestSIGKILLMidRunKeepsFiles: execd killed outright (no shutdown at all)
// while runs write files; a new execd on the same data directory finds every
// file written by a finished run intact and serves the workspaces.
func TestSIGKILLMidRunKeepsFiles(t *testing.T) {
	data := t.TempDir()
	const slots = 4
	d := startDaemon(t, data, "", fmt.Sprintf("[limits]\nmax_concurrent_runs = %d", slots))
	c := newMCP(t, d.url, true)
	const n = 6
	for i := 0; i < n; i++ {
		if sc, isErr := c.run(fmt.Sprintf("k%d", i), fmt.Sprintf(`fs.writeFile("/workspace/f.txt", "file %d"); 1`, i)); isErr {
			t.Fatalf("write %d: %v", i, sc)
		}
	}
	fl := newFleet()
	for i := 0; i < n; i++ {
		code := fmt.Sprintf(`for (let j = 0; ; j++) fs.writeFile("/workspace/scratch.txt", "scratch %d " + j)`, i)
		fl.fly(&mcptest.Client{URL: d.url}, i, fmt.Sprintf("k%d", i), code)
	}
	// The kill comes while every run slot holds a run that is writing, and
	// the other calls wait in line.
	running, _ := fl.await(t, slots, d.logs, nil)
	d.cmd.Process.Kill()
	<-d.exited
	for _, f := range fl.calls {
		<-f.answered
	}
	d2 := startDaemon(t, data, "")
	c2 := newMCP(t, d2.url, true)
	for i := 0; i < n; i++ {
		sc, isErr := c2.run(fmt.Sprintf("k%d", i), `fs.readFile("/workspace/f.txt")`)
		if isErr || sc["result"] != fmt.Sprintf(`"file %d"`, i) {
			t.Errorf("workspace k%d after SIGKILL: %v", i, sc)
		}
	}
	t.Logf("SIGKILL with %d runs writing (%v) and %d waiting", len(running), running, n-len(running))
	d2.stop()
}

// TestSIGKILLSaysRestarted: execd killed outright while workspaces are live
// — new ones (marked in the live journal) and one restored from a saved
// image (marked by its note) — is followed by an execd whose first call to
// each says reset with reset_reason "restarted", while a workspace that
// was deleted before the kill comes back new, without a reset.
func TestSIGKILLSaysRestarted(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data, "")
	c := newMCP(t, d.url, true)
	if _, isErr := c.run("saved", "var v = 1"); isErr {
		t.Fatal("first call")
	}
	d.stop() // saves "saved"
	d = startDaemon(t, data, "")
	c = newMCP(t, d.url, true)
	for _, ws := range []string{"saved", "new1", "new2", "gone"} {
		if sc, isErr := c.run(ws, "var v = 2; v"); isErr || sc["reset"] == true {
			t.Fatalf("%s before the kill: %v", ws, sc)
		}
	}
	c.RPC("tools/call", map[string]any{"name": "delete_workspace", "arguments": map[string]any{"workspace": "gone"}}, nil)
	d.cmd.Process.Kill()
	<-d.exited

	d2 := startDaemon(t, data, "")
	c2 := newMCP(t, d2.url, true)
	for _, ws := range []string{"saved", "new1", "new2"} {
		sc, _ := c2.run(ws, "typeof v")
		if sc["reset"] != true || sc["reset_reason"] != "restarted" || sc["result"] != `"undefined"` {
			t.Errorf("%s after SIGKILL: %v; want reset, restarted", ws, sc)
		}
		if sc, _ := c2.run(ws, "1"); sc["reset"] == true {
			t.Errorf("%s, second call after SIGKILL: %v", ws, sc)
		}
	}
	if sc, _ := c2.run("gone", "typeof v"); sc["reset"] == true {
		t.Errorf("workspace deleted before the kill: %v; want a new workspace", sc)
	}
	d2.stop()
}
