package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"execd/sandbox"
)

// heldGuests is a guest directory (EXECD_GUEST_DIR) whose modules are named
// pipes: execd sees that the guests are built (a stat), but reading a
// module blocks until release writes the real bytes into its pipe. Until
// then no guest can have been compiled, so whatever execd answers before
// release it answered without waiting for a compilation.
func heldGuests(t *testing.T) (dir string, release func()) {
	t.Helper()
	dir = t.TempDir()
	mods := map[string][]byte{}
	for lang, file := range map[string]string{"javascript": "qjs.wasm", "python": "python.wasm"} {
		b, err := sandbox.Module(lang)
		if err != nil {
			t.Fatalf("%s: %v (make guests)", lang, err)
		}
		mods[file] = b
		if err := syscall.Mkfifo(filepath.Join(dir, file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	zip, err := filepath.Abs("../../sandbox/guests/python-stdlib.zip")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(zip, filepath.Join(dir, "python-stdlib.zip")); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			var wg sync.WaitGroup
			for file, b := range mods {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := feed(filepath.Join(dir, file), b); err != nil {
						t.Errorf("%s: %v", file, err)
					}
				}()
			}
			wg.Wait()
		})
	}
	return dir, release
}

// feed writes b into the named pipe at path once a reader has opened it.
func feed(path string, b []byte) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if errors.Is(err, syscall.ENXIO) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond) // no reader yet
			continue
		}
		if err != nil {
			return err
		}
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
}

// handshakeTOML: a cold compilation cache (an empty sandbox.cache_dir).
func handshakeTOML(t *testing.T) string {
	return fmt.Sprintf("[sandbox]\ncache_dir = %q\n[workspace]\ndata_dir = %q\n", t.TempDir(), t.TempDir())
}

// On a cold cache, with the guests not even readable yet, initialize (or
// server/discover), tools/list and (legacy) ping are answered over stdio,
// in both eras; a call that arrives meanwhile waits for its guest and then runs.
func TestHandshakeDoesNotWaitForTheGuestsStdio(t *testing.T) {
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			dir, release := heldGuests(t)
			t.Setenv("EXECD_GUEST_DIR", dir)
			defer release()
			p := startStdio(t, handshakeTOML(t))
			answer := func(id int) map[string]any { return p.answer(t, id) }
			var meta map[string]any
			if era == "modern" {
				meta = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
				p.send(t, map[string]any{"id": 1, "method": "server/discover", "params": map[string]any{"_meta": meta}})
			} else {
				p.send(t, map[string]any{"id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-11-25",
					"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "handshake-test", "version": "1"}}})
			}
			if m := answer(1); m["result"] == nil {
				t.Fatalf("handshake: %v", m)
			}
			params := func(more map[string]any) map[string]any {
				if meta != nil {
					more["_meta"] = meta
				}
				return more
			}
			if meta == nil {
				p.send(t, map[string]any{"method": "notifications/initialized"})
			}
			p.send(t, map[string]any{"id": 2, "method": "tools/list", "params": params(map[string]any{})})
			if m := answer(2); !strings.Contains(fmt.Sprint(m["result"]), "execute_code") {
				t.Fatalf("tools/list: %v", m)
			}
			if era == "legacy" { // the 2026-07-28 era has no ping
				p.send(t, map[string]any{"id": 3, "method": "ping"})
				if m := answer(3); m["result"] == nil {
					t.Fatalf("ping: %v", m)
				}
			}
			if strings.Contains(p.logs(), "guest ready") {
				t.Fatalf("a guest was ready before its module could be read\n%s", p.logs())
			}
			for i, lang := range []string{"javascript", "python"} {
				p.send(t, map[string]any{"id": 4 + i, "method": "tools/call", "params": params(map[string]any{"name": "execute_code",
					"arguments": map[string]any{"code": "6*7", "language": lang, "workspace": "w"}})})
				release()
				m := answer(4 + i)
				res, _ := m["result"].(map[string]any)
				sc, _ := res["structuredContent"].(map[string]any)
				if sc["status"] != "ok" || sc["result"] != "42" {
					t.Fatalf("%s call once the guest was readable: %v\n%s", lang, m, p.logs())
				}
			}
		})
	}
}

// The same over HTTP: the daemon listens and answers both eras' handshakes
// before any guest can be compiled.
func TestHandshakeDoesNotWaitForTheGuestsHTTP(t *testing.T) {
	dir, release := heldGuests(t)
	t.Setenv("EXECD_GUEST_DIR", dir)
	defer release()
	d, _ := launch(t, "[server]\nlisten = \"127.0.0.1:0\"\n"+handshakeTOML(t), false)
	legacy := newMCP(t, d.url, false)
	legacy.init()
	modern := newMCP(t, d.url, true)
	if m := modern.RPC("server/discover", nil, nil); m["result"] == nil {
		t.Fatalf("server/discover: %v", m)
	}
	if m := legacy.RPC("tools/list", nil, nil); !strings.Contains(fmt.Sprint(m["result"]), "execute_code") {
		t.Fatalf("tools/list: %v", m)
	}
	if strings.Contains(d.logs(), "guest ready") {
		t.Fatalf("a guest was ready before its module could be read\n%s", d.logs())
	}
	release()
	for _, c := range []*mcp{legacy, modern} {
		if sc, isErr := c.run("", "6*7"); isErr || sc["result"] != "42" {
			t.Fatalf("call once the guests were readable: %v\n%s", sc, d.logs())
		}
	}
	d.stop()
}
