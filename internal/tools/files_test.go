package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"execd/internal/frontend"
	"execd/internal/workspace"
)

// A file's URI reads back as its workspace and path, and no URI reads as
// a path the registry would take outside the workspace.
func FuzzFileURI(f *testing.F) {
	for _, s := range []string{"workspace://w/a.txt", "workspace://w/my%20notes.txt", "workspace://w/..%2F..%2Fx", "workspace://../x", "workspace://w", "file:///etc/passwd", "workspace://w/%zz", "workspace://w/a/b?c#d"} {
		f.Add(s, "w", "a b/ü?#%.txt")
	}
	f.Fuzz(func(t *testing.T, uri, ws, p string) {
		if gotWS, gotP, mine, err := parseFileURI(uri); mine && err == nil {
			if workspace.ValidateID(gotWS) != nil {
				t.Fatalf("parseFileURI(%q) gave the workspace %q", uri, gotWS)
			}
			_, _ = workspace.CleanPath(gotP) // the registry judges the path
		}
		clean, err := workspace.CleanPath(p)
		if err != nil || workspace.ValidateID(ws) != nil {
			return
		}
		gotWS, gotP, mine, err := parseFileURI(fileURI(ws, clean))
		if !mine || err != nil || gotWS != ws || gotP != clean {
			t.Fatalf("fileURI(%q, %q) = %q reads back as %q, %q (%v, %v)", ws, clean, fileURI(ws, clean), gotWS, gotP, mine, err)
		}
	})
}

// A "?" or "#" in a file's name is part of its URI's path, and a URI with
// a query, a fragment or a trailing "/" names no file.
func TestFileURIs(t *testing.T) {
	if got := fileURI("w", "q?a#b%c d.txt"); got != "workspace://w/q%3Fa%23b%25c%20d.txt" {
		t.Errorf("fileURI = %q", got)
	}
	if ws, p, mine, err := parseFileURI("workspace://w/q%3Fa%23b.txt"); !mine || err != nil || ws != "w" || p != "q?a#b.txt" {
		t.Errorf("parseFileURI of an escaped name = %q, %q, %v, %v", ws, p, mine, err)
	}
	for _, uri := range []string{"workspace://w/a.txt/", "workspace://w/dir/", "workspace://w/a.txt?x=1", "workspace://w/a.txt#top"} {
		if _, p, mine, err := parseFileURI(uri); !mine || err == nil {
			t.Errorf("parseFileURI(%q) = %q, %v: want a refusal", uri, p, err)
		}
	}
}

// Every content write_file's description promises reaches the tool with
// the default body limit, in base64 too; a larger one, and one larger
// than a lower body limit allows, gets the tool's own refusal, not the
// transport's 413.
func TestWriteFileTakesWhatItPromises(t *testing.T) {
	if got := writeLimit(frontend.DefaultMaxBodyBytes); got != 4<<20 {
		t.Fatalf("writeLimit(default) = %d, want 4 MiB", got)
	}
	for _, maxBody := range []int64{0, 1 << 20} {
		t.Run(fmt.Sprint(maxBody), func(t *testing.T) {
			m, err := workspace.NewManager(workspace.Config{DataDir: t.TempDir()}, varsFactory{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close(context.Background()) })
			cfg := testOptions()
			cfg.MaxBodyBytes = maxBody
			s := newTestServer(cfg, m)
			ts := httptest.NewServer(s.Handler())
			t.Cleanup(ts.Close)
			t.Cleanup(func() { s.Shutdown(context.Background()) })
			c := &client{T: t, URL: ts.URL + "/mcp"}
			limit := writeLimit(s.MaxBodyBytes())
			var desc string
			for _, tool := range c.RPC("tools/list", map[string]any{}, nil)["result"].(map[string]any)["tools"].([]any) {
				if tool := tool.(map[string]any); tool["name"] == "write_file" {
					desc = tool["description"].(string)
				}
			}
			if !strings.Contains(desc, fmt.Sprintf("At most %d bytes", limit)) {
				t.Fatalf("write_file's description does not say %d: %s", limit, desc)
			}
			data := bytes.Repeat([]byte{0xff, 0x00, 0x7f}, limit/3+1)[:limit]
			sc, isErr := c.Tool("write_file", map[string]any{"workspace": "w", "path": "big.bin", "content": base64.StdEncoding.EncodeToString(data), "encoding": "base64"})
			if isErr || sc["size"] != float64(limit) {
				t.Fatalf("writing %d bytes in base64: %v", limit, sc)
			}
			sc, isErr = c.Tool("write_file", map[string]any{"workspace": "w", "path": "big.bin", "content": base64.StdEncoding.EncodeToString(append(data, 1)), "encoding": "base64"})
			if !isErr || !strings.Contains(fmt.Sprint(sc), fmt.Sprintf("takes at most %d", limit)) {
				t.Fatalf("writing %d bytes: %v", limit+1, sc)
			}
		})
	}
}
