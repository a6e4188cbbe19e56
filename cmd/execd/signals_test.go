package main

// How execd stops: a second SIGTERM or SIGINT ends the shutdown grace at
// once, every call in flight still answered; and an idle daemon does not
// wait for connections that are not being answered.

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
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
// that mechanism's, not a speed target.
func TestIdleExitDoesNotWaitForSilentConnections(t *testing.T) {
	d := startDaemon(t, t.TempDir(), `read_header_timeout = "1h"`)
	// A keep-alive connection, idle after its request.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(strings.TrimSuffix(d.url, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
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
	time.Sleep(100 * time.Millisecond) // the daemon has accepted both
	start := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, d.exited, d.logs)
	if took := time.Since(start); took >= 2500*time.Millisecond {
		t.Fatalf("exit took %v: it waited for connections that carried no request to answer", took)
	}
}
