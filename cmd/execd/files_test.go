package main

// Workspace files through the real binary and the real guests: files a run
// wrote named in its result and readable as resources, write_file and
// read_file, and what another principal and paths out of the workspace get.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFilesInAndOut(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	for _, modern := range []bool{false, true} {
		c := newMCP(t, d.url, modern)
		c.init()
		ws := fmt.Sprintf("files-%v", modern)
		sc, isErr := c.runLang(ws, "python", "import os\nos.makedirs('out', exist_ok=True)\nopen('out/table.csv', 'w').write('a,b\\n1,2\\n')\nopen('scratch', 'w').close()\nos.remove('scratch')")
		files, _ := sc["files"].([]any)
		if isErr || len(files) != 1 {
			t.Fatalf("modern=%v the run's files: %v", modern, sc)
		}
		f := files[0].(map[string]any)
		uri := fmt.Sprintf("workspace://%s/out/table.csv", ws)
		if f["path"] != "/workspace/out/table.csv" || f["size"] != float64(8) || f["uri"] != uri {
			t.Fatalf("modern=%v the file: %v", modern, f)
		}
		hdr := map[string]string{}
		if modern {
			hdr["Mcp-Name"] = uri
		}
		m := c.RPC("resources/read", map[string]any{"uri": uri}, hdr)
		if b, _ := json.Marshal(m); !strings.Contains(string(b), `"text":"a,b\n1,2\n"`) || !strings.Contains(string(b), `"mimeType":"text/csv"`) {
			t.Fatalf("modern=%v resources/read: %s", modern, b)
		}
		if b, _ := json.Marshal(c.RPC("resources/list", map[string]any{}, nil)); !strings.Contains(string(b), uri) {
			t.Fatalf("modern=%v resources/list: %s", modern, b)
		}

		bin := []byte{0, 1, 2, 255}
		if sc, isErr := c.Tool("write_file", map[string]any{"workspace": ws, "path": "in/blob.bin", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"}); isErr {
			t.Fatalf("modern=%v write_file: %v", modern, sc)
		}
		if sc, isErr := c.runLang(ws, "python", "list(open('in/blob.bin', 'rb').read())"); isErr || sc["result"] != "[0, 1, 2, 255]" {
			t.Fatalf("modern=%v the guest reads what write_file wrote: %v", modern, sc)
		}
		if sc, isErr := c.Tool("read_file", map[string]any{"workspace": ws, "path": "/workspace/in/blob.bin"}); isErr || sc["encoding"] != "base64" || sc["content"] != base64.StdEncoding.EncodeToString(bin) {
			t.Fatalf("modern=%v read_file of bytes: %v", modern, sc)
		}
	}
	d.stop()
}

func TestFilesOfAnotherPrincipalAndOutsideTheWorkspace(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("alice alice-token-0123456789\nbob bob-token-0123456789ab\n"), 0o600)
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "host-secret.txt"), []byte("host secret"), 0o600)
	d := startDaemon(t, data, fmt.Sprintf("auth_tokens_file = %q", tokens))
	alice := newMCP(t, d.url, true).withToken("alice-token-0123456789")
	bob := newMCP(t, d.url, true).withToken("bob-token-0123456789ab")
	if sc, isErr := alice.runLang("w", "python", "open('secret.txt', 'w').write(\"alice's\")"); isErr {
		t.Fatalf("alice: %v", sc)
	}
	uri := "workspace://w/secret.txt"
	got := bob.RPC("resources/read", map[string]any{"uri": uri}, map[string]string{"Mcp-Name": uri})
	if e, _ := got["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
		t.Fatalf("bob reads alice's URI: %v", got)
	}
	if sc, isErr := bob.Tool("read_file", map[string]any{"workspace": "w", "path": "secret.txt"}); !isErr {
		t.Fatalf("bob's read_file: %v", sc)
	}
	if b, _ := json.Marshal(bob.RPC("resources/list", map[string]any{}, nil)); strings.Contains(string(b), "secret.txt") {
		t.Fatalf("bob's resources/list: %s", b)
	}
	for _, p := range []string{"../../host-secret.txt", "/workspace/../../../host-secret.txt", "/etc/passwd", "../bob/w/x"} {
		if sc, isErr := alice.Tool("read_file", map[string]any{"workspace": "w", "path": p}); !isErr || strings.Contains(fmt.Sprint(sc), "host secret") {
			t.Errorf("read_file %s: %v", p, sc)
		}
		if sc, isErr := alice.Tool("write_file", map[string]any{"workspace": "w", "path": p, "content": "x"}); !isErr {
			t.Errorf("write_file %s: %v", p, sc)
		}
		u := "workspace://w/" + strings.ReplaceAll(p, "/", "%2F")
		if got := alice.RPC("resources/read", map[string]any{"uri": u}, map[string]string{"Mcp-Name": u}); got["error"] == nil {
			t.Errorf("resources/read %s: %v", u, got)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(data, "host-secret.txt")); string(b) != "host secret" {
		t.Fatalf("the host file changed: %q", b)
	}
	d.stop()
}
