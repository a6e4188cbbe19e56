package main

// Reliability with the real binary: one principal's endless loops never
// lock another out, a stop answers queued calls at once, a guest cannot
// plant a symlink out of its workspace, and idle workspaces hold no file
// descriptors.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"execd/internal/mcptest"
	"execd/internal/workspace"
)

const (
	tokenA = "principal-a-token-0123456789"
	tokenB = "principal-b-token-0123456789"
)

// twoPrincipals starts execd with auth for principals a and b; more is
// added as in startDaemon.
func twoPrincipals(t *testing.T, more ...string) *daemon {
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("a "+tokenA+"\nb "+tokenB+"\n"), 0o600)
	return startDaemon(t, t.TempDir(), fmt.Sprintf("auth_tokens_file = %q\nshutdown_grace = \"500ms\"", tokens), more...)
}

// endlessLoops starts n `while(true){}` calls of principal a, with no
// timeout, in workspaces loop0…, and returns a channel that receives
// when each ends.
func endlessLoops(t *testing.T, url string, n int) <-chan struct{} {
	ended := make(chan struct{}, n)
	for i := range n {
		go func() {
			defer func() { ended <- struct{}{} }()
			c := newMCP(t, url, true).withToken(tokenA)
			c.run(fmt.Sprintf("loop%d", i), "while(true){}")
		}()
	}
	return ended
}

func TestOnePrincipalsLoopsLeaveAnotherAnswered(t *testing.T) {
	// Principal a fills both run slots (and queues two more) with endless
	// loops; principal b's 1+1 is answered while they still run.
	d := twoPrincipals(t, "[limits]\nmax_concurrent_runs = 2")
	ended := endlessLoops(t, d.url, 4)
	waitRunning(t, d.url, tokenA, 2)
	answered := make(chan map[string]any, 1)
	go func() {
		b := newMCP(t, d.url, true).withToken(tokenB)
		sc, _ := b.run("mine", "1+1")
		answered <- sc
	}()
	select {
	case sc := <-answered:
		if sc["result"] != "2" {
			t.Fatalf("b's call: %v", sc)
		}
	case <-time.After(time.Minute): // a failure detector, not a speed limit: a's loops never end
		t.Fatal("b's 1+1 was not answered while a's endless loops held the run slots")
	}
	select {
	case <-ended:
		t.Fatal("one of a's endless loops ended; the test proves nothing")
	default:
	}
	d.stop() // ends a's loops with a "shutting down" answer
	for range 4 {
		<-ended
	}
}

// running counts the workspaces running a call in a list_workspaces
// result.
func running(sc map[string]any) int {
	ws, _ := sc["workspaces"].([]any)
	n := 0
	for _, w := range ws {
		if e, _ := w.(map[string]any); e["running"] == true {
			n++
		}
	}
	return n
}

// waitRunning waits, at most a minute, until the principal of token has n
// calls running, as list_workspaces says.
func waitRunning(t *testing.T, url, token string, n int) {
	t.Helper()
	c := newMCP(t, url, true).withToken(token)
	var sc map[string]any
	waitFor(t, fmt.Sprintf("%d calls running", n), func() string { return fmt.Sprint(sc) }, func() bool {
		sc, _, _ = mcptest.Structured(c.RPC("tools/call", map[string]any{"name": "list_workspaces", "arguments": map[string]any{}}, nil))
		return running(sc) >= n
	})
}

// progressCall is an execute_code call with a progress token, whose
// "queued" progress message can be awaited.
type progressCall struct {
	t      *testing.T
	queued chan struct{}
	done   chan map[string]any
}

func newProgressCall(t *testing.T, url, token, ws, code string) *progressCall {
	p := &progressCall{t: t, queued: make(chan struct{}), done: make(chan map[string]any, 1)}
	s := &mcptest.Client{URL: url, Token: token}
	go func() {
		var once sync.Once
		m, err := s.Call(context.Background(), 1, "tools/call", execParams(ws, code, 0, "p"), func(frame map[string]any) bool {
			params, _ := frame["params"].(map[string]any)
			if msg, _ := params["message"].(string); strings.HasPrefix(msg, "queued") {
				once.Do(func() { close(p.queued) })
			}
			return true
		})
		if err != nil {
			m = map[string]any{"transport error": err.Error()}
		}
		p.done <- m
	}()
	return p
}

func (p *progressCall) waitQueued() {
	select {
	case <-p.queued:
	case m := <-p.done:
		p.t.Fatalf("the call ended without queueing: %v", m)
	}
}

func (p *progressCall) wait() map[string]any { return <-p.done }

func TestShutdownTellsQueuedCallsAtOnce(t *testing.T) {
	// A running call, and calls queued behind it (for its workspace and for
	// the only run slot). On SIGTERM the queued ones are answered at once
	// that their code did not run, while the running one goes on: it ends
	// by itself once the test has those answers, well within the grace, and
	// says ok. (Had the queued calls waited for the grace, the running one
	// would have been interrupted at its end.)
	data := t.TempDir()
	d := startDaemon(t, data, `shutdown_grace = "20s"`, "[limits]\nmax_concurrent_runs = 1")
	running := newProgressCall(t, d.url, "", "busy", `fs.writeFile("started", ""); while (!fs.exists("/workspace/stop")) {} "finished"`)
	waitRunning(t, d.url, "", 1)
	sameWS := newProgressCall(t, d.url, "", "busy", "globalThis.ran = 1")
	sameWS.waitQueued()
	otherWS := newProgressCall(t, d.url, "", "other", "globalThis.ran = 1")
	otherWS.waitQueued()

	d.cmd.Process.Signal(syscall.SIGTERM)
	for name, p := range map[string]*progressCall{"same": sameWS, "other": otherWS} {
		sc, isErr, err := mcptest.Structured(p.wait())
		if err != nil || !isErr || !strings.Contains(fmt.Sprint(sc["error"]), "the code did not run") {
			t.Errorf("%s: %v %v", name, sc, err)
		}
	}
	os.WriteFile(filepath.Join(data, "local", "busy", "stop"), nil, 0o600)
	sc, isErr, err := mcptest.Structured(running.wait())
	if err != nil || isErr || sc["status"] != "ok" || sc["result"] != `"finished"` {
		t.Errorf("the running call: %v %v", sc, err)
	}
	select {
	case err := <-d.exited:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("execd did not exit")
	}
}

func TestGuestCannotSymlinkOutOfItsWorkspace(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data, "")
	c := newMCP(t, d.url, true)
	sc, _ := c.runLang("links", "python", `import os
out = []
for target in ["../../../../../../etc", "..", "/etc", "sub/../.."]:
    try:
        os.symlink(target, "/workspace/esc")
        out.append("made " + target)
    except OSError as e:
        out.append(type(e).__name__)
os.makedirs("/workspace/sub", exist_ok=True)
open("/workspace/sub/data.txt", "w").write("inside")
os.symlink("sub/data.txt", "/workspace/latest")
out.append(open("/workspace/latest").read())
",".join(out)`)
	if sc["result"] != "'PermissionError,PermissionError,PermissionError,PermissionError,inside'" {
		t.Errorf("symlinks: %v", sc)
	}
	if _, err := os.Lstat(filepath.Join(data, "local", "links", "esc")); !os.IsNotExist(err) {
		t.Errorf("a link out of the workspace exists on the host: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(data, "local", "links", "latest")); err != nil || target != "sub/data.txt" {
		t.Errorf("the link inside: %q %v", target, err)
	}
	d.stop()
}

func fdCount(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestLiveWorkspacesHoldNoDescriptors(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	c := newMCP(t, d.url, true)
	for _, lang := range []string{"javascript", "python"} {
		c.runLang("first", lang, "1")
	}
	base := fdCount(t, d.cmd.Process.Pid)
	n := 2*workspace.IdleRootsKept + 20
	for i := range n {
		for _, lang := range []string{"javascript", "python"} {
			if sc, isErr := c.runLang(fmt.Sprintf("w%d", i), lang, "x = 1"); isErr {
				t.Fatalf("%v", sc)
			}
		}
	}
	// The most recently used idle workspaces keep one each; allow a few
	// more for the HTTP connection and the log. Two descriptors per
	// workspace would be 2n.
	if got := fdCount(t, d.cmd.Process.Pid) - base; got > workspace.IdleRootsKept+8 {
		t.Errorf("%d live idle workspaces hold %d more descriptors", n, got)
	}
	d.stop()
}

// BenchmarkAnswerBesideEndlessLoops measures how long principal b waits
// for 1+1 while principal a's four endless loops hold every run slot
// (max_concurrent_runs = 2), against the same call on an idle daemon.
func BenchmarkAnswerBesideEndlessLoops(b *testing.B) {
	for _, loops := range []int{0, 4} {
		b.Run(fmt.Sprintf("loops=%d", loops), func(b *testing.B) {
			tokens := filepath.Join(b.TempDir(), "tokens")
			os.WriteFile(tokens, []byte("a "+tokenA+"\nb "+tokenB+"\n"), 0o600)
			d := launchBench(b, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\nauth_tokens_file = %q\nshutdown_grace = \"200ms\"\n"+
				"[limits]\nmax_concurrent_runs = 2\n[workspace]\ndata_dir = %q\n", tokens, b.TempDir()))
			for i := range loops {
				go d.call(tokenA, fmt.Sprintf("loop%d", i), "javascript", "while(true){}")
			}
			if loops > 0 {
				d.waitRunning(b, 2)
			}
			d.call(tokenB, "mine", "javascript", "1+1")
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				if r := d.call(tokenB, "mine", "javascript", "1+1"); r != "2" {
					b.Fatalf("b's answer: %q", r)
				}
				lat = append(lat, time.Since(start))
			}
			reportLatency(b, lat)
		})
	}
}

// In 2026-07-28 a run waiting for input holds no request and no run slot:
// 1,000 prompt() calls of one token parked 744 interpreters, filled the
// memory budget and made the other token's calls fail in both eras. Now a
// token has at most protocol.max_waiting_inputs_per_principal waits (the
// code's next prompt() gets end of file at once, and the result names the
// key), its interpreters at most its share of the memory budget, and the
// other token's calls are answered in both eras.
func TestOnePrincipalsInputWaitsLeaveAnotherAnswered(t *testing.T) {
	d := twoPrincipals(t, "[protocol]\nmax_waiting_inputs_per_principal = 4\n[limits]\nmax_total_memory_mib = 256")
	a := newMCP(t, d.url, true).withToken(tokenA)
	parked, refused := 0, 0
	for i := range 12 {
		m := a.modernCall(`prompt("x")`, "javascript", fmt.Sprintf("ask%d", i), nil)
		if res, _ := m["result"].(map[string]any); res["resultType"] == "input_required" {
			parked++
			continue
		}
		sc, _, err := mcptest.Structured(m)
		if err != nil || !strings.Contains(fmt.Sprint(sc["notice"]), "protocol.max_waiting_inputs_per_principal") {
			t.Fatalf("a's call %d past the cap of waits: %v %v", i, m, err)
		}
		refused++
	}
	if parked != 4 || refused != 8 {
		t.Fatalf("%d of a's 12 prompt() calls parked, %d refused; want 4 and 8", parked, refused)
	}
	for _, modern := range []bool{true, false} {
		b := newMCP(t, d.url, modern).withToken(tokenB)
		b.init()
		if sc, isErr := b.run("mine", "1+1"); isErr || sc["result"] != "2" {
			t.Fatalf("b's call (modern %v) while a's runs wait for input: %v", modern, sc)
		}
	}
	d.stop()
}

// du is the data under dir as the disk holds it: each file's bytes once.
func du(dir string) int64 {
	seen := map[uint64]bool{}
	var total int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && !seen[st.Ino] {
				seen[st.Ino] = true
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// The reproduction with the real binary: with an 8 MiB quota, 32 × (write
// 7 MB, checkpoint_workspace) put 429 MB under ~state/. With auth tokens
// a principal's disk budget is eight quotas by default (64 MiB): the
// checkpoints stop there with an error naming the key, and the other
// principal is not touched.
func TestCheckpointsStayWithinThePrincipalsDisk(t *testing.T) {
	dataDir := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("a "+tokenA+"\nb "+tokenB+"\n"), 0o600)
	d := startDaemon(t, dataDir, fmt.Sprintf("auth_tokens_file = %q", tokens), "", "max_disk_mib = 8")
	a := newMCP(t, d.url, true).withToken(tokenA)
	var refusal string
	rounds := 0
	for i := range 32 {
		rounds = i
		if sc, isErr := a.run("w", fmt.Sprintf(`fs.writeFile("/workspace/big.bin", %q.repeat(7e6)); "written"`, string(rune('a'+i%26)))); isErr {
			refusal = fmt.Sprint(sc)
			break
		} else if n, _ := sc["notice"].(string); n != "" {
			refusal = n
			break
		}
		if sc, isErr := a.Tool("checkpoint_workspace", map[string]any{"workspace": "w"}); isErr {
			refusal = fmt.Sprint(sc)
			break
		}
	}
	if !strings.Contains(refusal, "workspace.max_principal_disk_mib") {
		t.Fatalf("32 × (7 MB, checkpoint) under a 64 MiB budget: the refusal was %q", refusal)
	}
	got := du(dataDir)
	if got > 64<<20 {
		t.Fatalf("%d bytes on disk under a 64 MiB budget", got)
	}
	t.Logf("refused in round %d with %d bytes on disk: %s", rounds+1, got, refusal)
	b := newMCP(t, d.url, true).withToken(tokenB)
	if sc, isErr := b.run("w", `fs.writeFile("/workspace/big.bin", "b".repeat(7e6)); "written"`); isErr || sc["notice"] != nil {
		t.Fatalf("b's write while a's budget is full: %v", sc)
	}
	d.stop()
}
