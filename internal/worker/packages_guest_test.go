package worker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// treeSource answers the JavaScript loader's requests with one package,
// "big", whose tree is padded past the guest's first buffer (so the
// answer is fetched with packages_answer), and blocks an install until
// ctx ends.
type treeSource struct {
	mu   sync.Mutex
	reqs []string
}

func (s *treeSource) Packages(ctx context.Context, req []byte) []byte {
	s.mu.Lock()
	s.reqs = append(s.reqs, string(req))
	s.mu.Unlock()
	var r struct{ Op string }
	json.Unmarshal(req, &r)
	if r.Op == "install" {
		<-ctx.Done()
		return []byte(`{"error":"stopped"}`)
	}
	tree := map[string]any{"root": map[string]int{"big": 0}, "packages": []map[string]any{{
		"name": "big", "version": "1.0.0", "path": "node_modules/big", "dir": "sha512-x/pkg", "main": "main.js",
		"pad": strings.Repeat("x", 10000)}}}
	b, _ := json.Marshal(map[string]any{"gen": "g1", "tree": tree})
	return b
}

func TestPackagesImport(t *testing.T) {
	cache := t.TempDir()
	pkg := filepath.Join(cache, "sha512-x", "pkg")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"name":"big","version":"1.0.0","main":"main.js"}`), 0o644)
	os.WriteFile(filepath.Join(pkg, "main.js"), []byte(`exports.answer = 42; exports.dir = __dirname;`), 0o644)
	cfg := testConfig(false)
	cfg.PackagesDir = cache
	w := newWorker(t, newTestEngine(t, cfg), WorkerOptions{})
	src := &treeSource{}

	r := w.Run(context.Background(), `import big, {answer} from "big"; [answer, big.dir]`, RunOptions{Packages: src})
	if r.Status != StatusOK || value(r) != `[42, "/packages/sha512-x/pkg"]` {
		t.Fatalf("import of a package from the mount: %s", describe(r))
	}
	// The mount is read-only.
	if r := w.Run(context.Background(), `fs.writeFile("/packages/sha512-x/pkg/main.js", "x")`, RunOptions{Packages: src}); r.Status != StatusError {
		t.Errorf("a write to /packages: %s", describe(r))
	}
	// A stop while the host installs ends the cell, and the timer does not
	// count the wait: the cancel does.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result, 1)
	go func() {
		done <- w.Run(ctx, `import x from "not-installed"`, RunOptions{Packages: src, Timeout: time.Hour})
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		src.mu.Lock()
		n := len(src.reqs)
		installing := n > 0 && strings.Contains(src.reqs[n-1], `"install"`)
		src.mu.Unlock()
		if installing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the guest never asked to install")
		}
	}
	cancel()
	if r := <-done; r.Status != StatusInterrupted || r.Discontinuous() {
		t.Errorf("stopped during an install: %s", describe(r))
	}
	// Without a source the guest is told there are none.
	if r := w.Run(context.Background(), `import y from "other"`, RunOptions{}); r.Status != StatusError || !strings.Contains(r.Error.Message, "packages are not available") {
		t.Errorf("no source: %s", describe(r))
	}
}
