package main

// How execd stops: every call in flight is answered as its state at the
// signal calls for (over HTTP in both eras and over stdio); a second SIGTERM
// or SIGINT ends the shutdown grace at once, every call still answered; and
// an idle daemon does not wait for connections that are not being answered.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"execd/internal/mcptest"
)

// waitLog waits for a line of d's log that contains s.
func (d *daemon) waitLog(s string) {
	d.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(d.logs(), s) {
			return
		}
	}
	d.t.Fatalf("no %q in the log\n%s", s, d.logs())
}

// waitFor polls cond until it holds, at most a minute; then the test fails
// with what it waited for and the daemon's log.
func waitFor(t testing.TB, what string, logs func() string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute\n%s", what, logs())
		}
	}
}

func TestSecondSignalEndsTheShutdownGrace(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			// A grace no test waits out: only the second signal can end it.
			d := startDaemon(t, t.TempDir(), `shutdown_grace = "1h"`)
			c := newMCP(t, d.url, true)
			args := map[string]any{"code": `progress(1, 0, "spinning"); while(true){}`, "language": "javascript", "workspace": "busy"}
			answer := c.Stream("tools/call", map[string]any{"name": "execute_code", "arguments": args, "_meta": map[string]any{"progressToken": "p"}})
			for m := range answer {
				if p, _ := m["params"].(map[string]any); p != nil && strings.Contains(fmt.Sprint(p["message"]), "spinning") {
					break
				}
			}
			d.cmd.Process.Signal(sig)
			d.waitLog("shutting down")
			d.cmd.Process.Signal(sig)
			last := lastOf(t, answer, d.logs)
			res, _ := last["result"].(map[string]any)
			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] != true || !strings.Contains(fmt.Sprint(sc["error"]), "shutting down") {
				t.Fatalf("the running call answered %v", last)
			}
			waitExit(t, d.exited, d.logs)
		})
	}
}

func TestStdioSecondSignalEndsTheShutdownGrace(t *testing.T) {
	p := startStdio(t, fmt.Sprintf("[server]\nshutdown_grace = \"1h\"\n[workspace]\ndata_dir = %q\n", t.TempDir()))
	p.send(t, map[string]any{"id": 0, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-11-25",
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "signals-test", "version": "1"}}})
	p.send(t, map[string]any{"id": 1, "method": "tools/call", "params": map[string]any{"name": "execute_code",
		"arguments": map[string]any{"code": `progress(1, 0, "spinning"); while(true){}`, "language": "javascript"}, "_meta": map[string]any{"progressToken": "p"}}})
	for m := range p.lines {
		if params, _ := m["params"].(map[string]any); params != nil && strings.Contains(fmt.Sprint(params["message"]), "spinning") {
			break
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.logs(), "shutting down"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no shutdown\n%s", p.logs())
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	answer := lastOf(t, p.lines, p.logs)
	sc, isErr, err := mcptest.Structured(answer)
	if err != nil || !isErr || !strings.Contains(fmt.Sprint(sc["error"]), "shutting down") {
		t.Fatalf("the running call answered %v (%v)", answer, err)
	}
	waitExit(t, p.exited, p.logs)
}

// waitExit waits for the process to exit 0, at most a minute.
func waitExit(t *testing.T, exited <-chan error, logs func() string) {
	t.Helper()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit %v\n%s", err, logs())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no exit\n%s", logs())
	}
}

// lastOf returns the last message of ch once it closes; it fails the test
// if that takes a minute (a grace nobody ended).
func lastOf(t *testing.T, ch <-chan map[string]any, logs func() string) map[string]any {
	t.Helper()
	var last map[string]any
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return last
			}
			last = m
		case <-timeout:
			t.Fatalf("no answer a minute after the second signal: it did not end the grace\n%s", logs())
		}
	}
}

// An idle daemon exits on SIGTERM without waiting for connections it is
// not answering: one kept alive after a request, and one that has sent
// half a request's headers. net/http alone gives a connection without a
// whole request 5 s (its allowance for new connections) or the
// read-header timeout before it counts as idle, so the bound below is
// that mechanism's, not a speed target: the connections were accepted
// before the signal by milliseconds, so a daemon that waited for them exits
// just under 5 s after it; 4 s tells the two apart and leaves a race-built
// daemon on a loaded machine room.
func TestIdleExitDoesNotWaitForSilentConnections(t *testing.T) {
	d, p := startProbedDaemon(t, t.TempDir(), `read_header_timeout = "1h"`)
	// A keep-alive connection, idle after its request.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(strings.TrimSuffix(d.url, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // read to its end, or the client closes the connection
	resp.Body.Close()
	u, _ := url.Parse(d.url)
	half, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	if _, err := half.Write([]byte("POST /mcp HTTP/1.1\r\nHost: " + u.Host + "\r\n")); err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// All three connections are being served (the probe's own is a fourth):
	// an exit before the daemon had accepted them would prove nothing.
	p.awaitConnections(4)
	start := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, d.exited, d.logs)
	if took := time.Since(start); took >= 4*time.Second {
		t.Fatalf("exit took %v: it waited for connections that carried no request to answer", took)
	}
}

// fleet is a set of execute_code calls in flight, each on a goroutine of
// its own, whose code first reports progress "started <n>": a test that
// signals execd knows which calls were running then, and which were still
// waiting in line, and can say what must have become of each.
type fleet struct {
	calls []*flight
	news  chan struct{} // a call entered execd, started or was answered
}

// flight is one call of a fleet.
type flight struct {
	n        int
	inside   chan struct{} // closed at its first frame or its answer: execd has it
	started  chan struct{} // closed when its code reported that it started
	answered chan struct{} // closed once answer and err are set
	answer   map[string]any
	err      error
}

func newFleet() *fleet { return &fleet{news: make(chan struct{}, 1)} }

func (fl *fleet) poke() {
	select {
	case fl.news <- struct{}{}:
	default:
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// fly starts call n through c (which it does not fail: it runs on a
// goroutine): code in workspace ws, with the progress token "f<n>" and the
// id 1000+n.
func (fl *fleet) fly(c *mcptest.Client, n int, ws, code string) *flight {
	f := &flight{n: n, inside: make(chan struct{}), started: make(chan struct{}), answered: make(chan struct{})}
	fl.calls = append(fl.calls, f)
	mark := fmt.Sprintf("started %d", n)
	go func() {
		var inside, started sync.Once
		params := execParams(ws, fmt.Sprintf("progress(0, 0, %q); %s", mark, code), 0, fmt.Sprintf("f%d", n))
		f.answer, f.err = c.Call(context.Background(), 1000+n, "tools/call", params, func(m map[string]any) bool {
			inside.Do(func() { close(f.inside) })
			if p, _ := m["params"].(map[string]any); p["message"] == mark {
				started.Do(func() { close(f.started) })
			}
			fl.poke()
			return true
		})
		inside.Do(func() { close(f.inside) })
		close(f.answered)
		fl.poke()
	}()
	return f
}

// await waits, at most a minute, until every call is inside execd, exactly
// slots calls of endless code are running (started, not answered) and no
// call of short code (endless false; nil: every call is endless) is
// started and not yet answered: with slots = limits.max_concurrent_runs,
// no other call can start until execd stops. It returns the running calls'
// numbers, and which calls were answered by then.
func (fl *fleet) await(t *testing.T, slots int, logs func() string, endless func(n int) bool) (running []int, answered map[int]bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		running, answered = nil, map[int]bool{}
		inside, shortInFlight := 0, false
		for _, f := range fl.calls {
			if isClosed(f.inside) {
				inside++
			}
			switch {
			case isClosed(f.answered):
				answered[f.n] = true
			case isClosed(f.started) && endless != nil && !endless(f.n):
				shortInFlight = true // holds a slot, or has just let it go
			case isClosed(f.started):
				running = append(running, f.n)
			}
		}
		if len(running) > slots {
			t.Fatalf("%d calls running (%v) with %d run slots", len(running), running, slots)
		}
		if inside == len(fl.calls) && len(running) == slots && !shortInFlight {
			return running, answered
		}
		select {
		case <-fl.news:
		case <-deadline:
			t.Fatalf("after a minute %d of %d calls are in execd and %d run (%v); want %d running\n%s", inside, len(fl.calls), len(running), running, slots, logs())
		}
	}
}

// judge checks, once execd has stopped, what became of each call: one that
// was running at the signal says its run was stopped; one answered before
// it holds result(n) as its result (result nil: no call may have been
// answered); every other one says its code did not run, and never started.
// It returns the tally.
func (fl *fleet) judge(t *testing.T, running []int, answered map[int]bool, result func(n int) string) map[string]int {
	t.Helper()
	wasRunning := map[int]bool{}
	for _, n := range running {
		wasRunning[n] = true
	}
	counts := map[string]int{}
	for _, f := range fl.calls {
		<-f.answered
		if f.err != nil {
			t.Errorf("call %d: no answer: %v", f.n, f.err)
			counts["lost"]++
			continue
		}
		if id, _ := f.answer["id"].(float64); int(id) != 1000+f.n {
			t.Errorf("call %d: the answer of id %v", f.n, f.answer["id"])
		}
		sc, isErr, err := mcptest.Structured(f.answer)
		e := fmt.Sprint(sc["error"])
		switch {
		case err != nil:
			t.Errorf("call %d: %v", f.n, err)
		case wasRunning[f.n]:
			counts["running: stopped"]++
			if !isErr || !strings.Contains(e, "execd is shutting down; the run was stopped") {
				t.Errorf("call %d was running at the signal and answered %v", f.n, sc)
			}
		case answered[f.n]:
			counts["done before"]++
			if result == nil || isErr || sc["result"] != result(f.n) {
				t.Errorf("call %d, answered before the signal: %v; want result %s", f.n, sc, result(f.n))
			}
		default:
			counts["waiting: did not run"]++
			if !isErr || !strings.Contains(e, "execd is shutting down; the code did not run") || isClosed(f.started) {
				t.Errorf("call %d was waiting at the signal and answered %v (started: %v)", f.n, sc, isClosed(f.started))
			}
		}
	}
	return counts
}

// TestShutdownAnswersEveryRunningCall: 20 modern calls of endless code,
// each in its own workspace, four run slots. At SIGTERM four are running
// and the rest wait for a slot: once the grace is over the running ones say
// their run was stopped, the waiting ones that their code did not run.
func TestShutdownAnswersEveryRunningCall(t *testing.T) {
	const slots = 4
	d := startDaemon(t, t.TempDir(), `shutdown_grace = "500ms"`, fmt.Sprintf("[limits]\nmax_concurrent_runs = %d", slots))
	fl := newFleet()
	for i := 0; i < 20; i++ {
		fl.fly(&mcptest.Client{URL: d.url}, i, fmt.Sprintf("busy-%d", i), "while(true){}")
	}
	running, answered := fl.await(t, slots, d.logs, nil)
	d.stop()
	t.Logf("20 calls at SIGTERM: %v", fl.judge(t, running, answered, nil))
}

// TestSIGTERMAnswersFiftyCallsBothEras: 50 calls over HTTP, half legacy
// (five sessions) and half modern: endless loops in workspaces of their
// own, endless loops queued behind one another in three shared workspaces,
// and short calls. SIGTERM comes once every run slot holds an endless loop
// and every other call is in execd, waiting or done; every call then gets
// the answer its state at the signal calls for (judge), and execd exits 0.
func TestSIGTERMAnswersFiftyCallsBothEras(t *testing.T) {
	const n, slots = 50, 4
	d := startDaemon(t, t.TempDir(), `shutdown_grace = "1s"`, fmt.Sprintf("[limits]\nmax_concurrent_runs = %d", slots))
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	sessions := make([]*mcptest.Client, 5)
	for i := range sessions {
		sessions[i] = &mcptest.Client{T: t, URL: d.url, HTTP: hc}
		sessions[i].Initialize()
	}
	fl := newFleet()
	for i := 0; i < n; i++ {
		c := sessions[i%len(sessions)]
		if i%2 == 1 {
			c = &mcptest.Client{URL: d.url, HTTP: hc}
		}
		// i%5: 0,1 spin in their own workspace; 2,3 spin in workspace
		// "shared-<i%3>", one at a time; 4 is short.
		switch i % 5 {
		case 0, 1:
			fl.fly(c, i, fmt.Sprintf("spin-%d", i), "while(true){}")
		case 2, 3:
			fl.fly(c, i, fmt.Sprintf("shared-%d", i%3), "while(true){}")
		case 4:
			fl.fly(c, i, fmt.Sprintf("short-%d", i), fmt.Sprintf("%d * 2", i))
		}
	}
	running, answered := fl.await(t, slots, d.logs, func(k int) bool { return k%5 != 4 })
	for _, k := range running {
		if k%5 == 4 {
			t.Fatalf("a short call (%d) counted as running at the signal", k)
		}
	}
	d.stop()
	t.Logf("%d calls at SIGTERM: %v", n, fl.judge(t, running, answered, func(k int) string { return strconv.Itoa(2 * k) }))
}

// TestStdioSIGTERMAnswersCallsInFlight: an execd -stdio process of each era
// with two run slots gets SIGTERM while both hold an endless loop and the
// other calls wait for their workspace or a slot: every call is answered
// before execd exits 0, each as its state at the signal calls for (as
// judge: stopped, did not run, or its result).
func TestStdioSIGTERMAnswersCallsInFlight(t *testing.T) {
	for _, modern := range []bool{false, true} {
		t.Run(map[bool]string{false: "legacy", true: "modern"}[modern], func(t *testing.T) {
			const n, slots = 12, 2
			p := startStdio(t, fmt.Sprintf("[server]\nshutdown_grace = \"500ms\"\n[limits]\nmax_concurrent_runs = %d\n[workspace]\ndata_dir = %q\n", slots, t.TempDir()))
			if !modern {
				p.send(t, map[string]any{"id": 0, "method": "initialize", "params": map[string]any{"protocolVersion": mcptest.LegacyVersion,
					"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "fault-test", "version": "1"}}})
				p.send(t, map[string]any{"method": "notifications/initialized"})
			}
			// i%4: 1, 2, 3 spin in workspace w<i%4>, one at a time; 0 is short.
			for i := 1; i <= n; i++ {
				ws, code := fmt.Sprintf("w%d", i%4), "while(true){}"
				if i%4 == 0 {
					ws, code = fmt.Sprintf("short-%d", i), fmt.Sprintf("%d + 1", i)
				}
				params := execParams(ws, fmt.Sprintf(`progress(0, 0, "started %d"); %s`, i, code), 0, fmt.Sprintf("p%d", i))
				if modern {
					mcptest.Modern("tools/call", params)
				}
				p.send(t, map[string]any{"id": i, "method": "tools/call", "params": params})
			}
			// Read until both slots hold an endless loop, every other call
			// has shown a frame (waiting) or its answer, and every short call
			// that started has been answered: a short one started and not
			// yet answered holds a slot, or has just let it go.
			inside, started, answered := map[int]bool{}, map[int]bool{}, map[int]map[string]any{}
			short := func(i int) bool { return i%4 == 0 }
			running := func() (r []int) {
				for i := range started {
					if answered[i] == nil && !short(i) {
						r = append(r, i)
					}
				}
				return r
			}
			shortInFlight := func() bool {
				for i := range started {
					if answered[i] == nil && short(i) {
						return true
					}
				}
				return false
			}
			timeout := time.After(time.Minute)
			for len(inside) < n || len(running()) < slots || shortInFlight() {
				select {
				case m, ok := <-p.lines:
					if !ok {
						t.Fatalf("stdout closed early\n%s", p.logs())
					}
					params, _ := m["params"].(map[string]any)
					var i int
					if tok, _ := params["progressToken"].(string); m["method"] == "notifications/progress" && scanned(tok, &i) {
						inside[i] = true
						if params["message"] == fmt.Sprintf("started %d", i) {
							started[i] = true
						}
					} else if id, ok := m["id"].(float64); ok && id > 0 && m["method"] == nil {
						inside[int(id)], answered[int(id)] = true, m
					}
				case <-timeout:
					t.Fatalf("after a minute %d of %d calls in execd, running %v\n%s", len(inside), n, running(), p.logs())
				}
			}
			wasRunning, before := running(), len(answered)
			if len(wasRunning) != slots {
				t.Fatalf("running at the signal: %v with %d slots", wasRunning, slots)
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
			atSignal := map[int]bool{}
			for _, i := range wasRunning {
				atSignal[i] = true
			}
			doneBefore := map[int]bool{}
			for i := range answered {
				doneBefore[i] = true
			}
			for m := range p.lines { // ends when the process closes stdout
				if id, ok := m["id"].(float64); ok && id > 0 && m["method"] == nil {
					if answered[int(id)] != nil {
						t.Errorf("id %v answered twice", id)
					}
					answered[int(id)] = m
				}
			}
			waitExit(t, p.exited, p.logs)
			counts := map[string]int{}
			for i := 1; i <= n; i++ {
				m := answered[i]
				if m == nil {
					t.Errorf("id %d: no answer", i)
					continue
				}
				sc, isErr, err := mcptest.Structured(m)
				e := fmt.Sprint(sc["error"])
				switch {
				case err != nil:
					t.Errorf("id %d: %v", i, err)
				case atSignal[i]:
					counts["running: stopped"]++
					if !isErr || !strings.Contains(e, "execd is shutting down; the run was stopped") {
						t.Errorf("id %d was running at the signal and answered %v", i, sc)
					}
				case doneBefore[i]:
					counts["done before"]++
					if isErr || sc["result"] != strconv.Itoa(i+1) {
						t.Errorf("id %d, answered before the signal: %v", i, sc)
					}
				default:
					counts["waiting: did not run"]++
					if !isErr || !strings.Contains(e, "execd is shutting down; the code did not run") || started[i] {
						t.Errorf("id %d was waiting at the signal and answered %v (started: %v)", i, sc, started[i])
					}
				}
			}
			t.Logf("%d stdio calls at SIGTERM (%d answered before): %v", n, before, counts)
			p.in.Close()
		})
	}
}

// scanned reads the number of a progress token "p<n>".
func scanned(token string, n *int) bool {
	_, err := fmt.Sscanf(token, "p%d", n)
	return err == nil
}

// connections is how many HTTP connections the daemon serves now (a
// goroutine in net/http's conn.serve each, on any of its listeners; the
// probe's request is one).
func (p *probe) connections() int {
	p.t.Helper()
	resp, err := p.hc.Get(p.debug + "goroutine?debug=2")
	if err != nil {
		p.t.Fatalf("goroutine dump: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return strings.Count(string(b), "net/http.(*conn).serve(")
}

// awaitConnections waits, at most a minute, until the daemon serves n HTTP
// connections.
func (p *probe) awaitConnections(n int) {
	p.t.Helper()
	got := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = p.connections(); got >= n {
			return
		}
	}
	p.t.Fatalf("the daemon serves %d connections, not %d", got, n)
}
