package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/experimental/sys"

	"execd/internal/mcptest"
	"execd/internal/worker"
	"execd/internal/workspace"
)

// The front end over a real workspace.Manager, with a factory of tiny
// interpreters that keep variables and write files:
//
//	set K V     remember K=V         get K     the value of K
//	write F S   write S to the file F
//	ask P       the answer of the run's Input to the prompt P
//
// Their images are their variables as JSON.
type varsFactory struct{}

func (varsFactory) Languages() []string   { return []string{"javascript"} }
func (varsFactory) Compiling(string) bool { return false }

func (varsFactory) NewRunner(_ context.Context, lang string, disk workspace.Disk) (workspace.Runner, error) {
	return &varsRunner{fsys: disk.(sys.FS), vars: map[string]string{}}, nil
}

func (varsFactory) ReadImage(r io.Reader) (workspace.Image, error) {
	var img varsImage
	if err := json.NewDecoder(r).Decode(&img); err != nil {
		return nil, fmt.Errorf("%w: %v", workspace.ErrImageCorrupt, err)
	}
	return img, nil
}

func (varsFactory) Restore(_ context.Context, img workspace.Image, disk workspace.Disk, _ bool) (workspace.Runner, error) {
	vars := map[string]string{}
	for k, v := range img.(varsImage) {
		vars[k] = v
	}
	return &varsRunner{fsys: disk.(sys.FS), vars: vars}, nil
}

type varsImage map[string]string

func (varsImage) Language() string { return "javascript" }
func (img varsImage) WriteTo(w io.Writer) (int64, error) {
	b, _ := json.Marshal(img)
	n, err := w.Write(b)
	return int64(n), err
}

type varsRunner struct {
	mu   sync.Mutex
	fsys sys.FS
	vars map[string]string
}

func (r *varsRunner) Run(ctx context.Context, code string, opts worker.RunOptions) worker.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := worker.Result{Status: worker.StatusOK}
	f := strings.SplitN(code, " ", 3)
	switch {
	case len(f) == 3 && f[0] == "set":
		r.vars[f[1]] = f[2]
	case len(f) == 2 && f[0] == "get":
		v, ok := r.vars[f[1]]
		if !ok {
			res.Status, res.Error = worker.StatusError, &worker.GuestError{Type: "ReferenceError", Message: f[1] + " is not defined"}
			break
		}
		res.Value = &v
	case len(f) == 2 && f[0] == "ask":
		ans := opts.Input.Input(ctx, f[1])
		if ans.Status != worker.InputOK {
			res.Status, res.Error = worker.StatusError, &worker.GuestError{Type: "EOFError", Message: fmt.Sprint(ans.Status)}
			break
		}
		res.Value = &ans.Text
	case len(f) == 3 && f[0] == "write":
		file, errno := r.fsys.OpenFile(f[1], sys.O_WRONLY|sys.O_CREAT|sys.O_TRUNC, 0o600)
		if errno == 0 {
			_, errno = file.Write([]byte(f[2]))
			file.Close()
		}
		if errno != 0 {
			res.Status, res.Error = worker.StatusError, &worker.GuestError{Type: "Error", Message: errno.Error()}
		}
	default:
		res.Status, res.Error = worker.StatusError, &worker.GuestError{Type: "SyntaxError", Message: "unknown command"}
	}
	return res
}

func (r *varsRunner) Snapshot(context.Context) (workspace.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	img := varsImage{}
	for k, v := range r.vars {
		img[k] = v
	}
	return img, nil
}

func (r *varsRunner) MemoryBytes() int64 { return 1 << 20 }
func (r *varsRunner) Close() error       { return nil }

// newRegistryServer serves a real Manager over HTTP with two principals,
// alice and bob.
func newRegistryServer(t *testing.T) (alice, bob *client) {
	t.Helper()
	alice, bob, _ = newRegistryServerOver(t)
	return alice, bob
}

// newRegistryServerOver is newRegistryServer, and the registry.
func newRegistryServerOver(t *testing.T) (alice, bob *client, m *workspace.Manager) {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("alice aaaaaaaaaaaaaaaaaaaa\nbob bbbbbbbbbbbbbbbbbbbb\n"), 0o600)
	m, err := workspace.NewManager(workspace.Config{DataDir: filepath.Join(dir, "data")}, varsFactory{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	cfg := testOptions()
	cfg.AuthTokensFile = tokens
	s := newTestServer(cfg, m)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return &client{T: t, URL: ts.URL + "/mcp", Token: "aaaaaaaaaaaaaaaaaaaa"}, &client{T: t, URL: ts.URL + "/mcp", Token: "bbbbbbbbbbbbbbbbbbbb"}, m
}

// inBothEras runs f once per era, each time with alice and bob on a new
// server over a real registry.
func inBothEras(t *testing.T, f func(t *testing.T, alice, bob *client, legacy bool)) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "modern", true: "legacy"}[legacy], func(t *testing.T) {
			alice, bob := newRegistryServer(t)
			if legacy {
				alice.Initialize()
				bob.Initialize()
			}
			f(t, alice, bob, legacy)
		})
	}
}

func run(c *client, ws, code string) (map[string]any, bool) {
	c.T.Helper()
	return c.Tool("execute_code", map[string]any{"workspace": ws, "language": "javascript", "code": code})
}

// Checkpoint, restore and fork through the tools, in both eras, with a real
// registry: the state comes back, the fork is a copy, list_workspaces shows
// them; and another principal can neither restore, fork nor list them.
func TestCheckpointRestoreForkThroughTheTools(t *testing.T) {
	inBothEras(t, func(t *testing.T, alice, bob *client, legacy bool) {
		if sc, isErr := run(alice, "a", "set x before"); isErr {
			t.Fatalf("set: %v", sc)
		}
		sc, isErr := alice.Tool("checkpoint_workspace", map[string]any{"workspace": "a"})
		if isErr || sc["checkpoint"] != "cp-1" || sc["workspace"] != "a" {
			t.Fatalf("checkpoint: %v", sc)
		}
		run(alice, "a", "set x after")
		if sc, isErr := alice.Tool("restore_workspace", map[string]any{"workspace": "a", "checkpoint": "cp-1"}); isErr {
			t.Fatalf("restore: %v", sc)
		}
		if sc, _ := run(alice, "a", "get x"); sc["result"] != "before" || sc["status"] != "ok" {
			t.Fatalf("after restore: %v", sc)
		}
		sc, isErr = alice.Tool("fork_workspace", map[string]any{"workspace": "a", "new_workspace": "b"})
		if isErr || sc["workspace"] != "b" {
			t.Fatalf("fork: %v", sc)
		}
		run(alice, "b", "set x forked")
		if sc, _ := run(alice, "a", "get x"); sc["result"] != "before" {
			t.Fatalf("the fork changed its source: %v", sc)
		}
		if sc, _ := run(alice, "b", "get x"); sc["result"] != "forked" {
			t.Fatalf("the fork: %v", sc)
		}
		list, _ := alice.Tool("list_workspaces", map[string]any{})
		var a map[string]any
		for _, e := range list["workspaces"].([]any) {
			if e.(map[string]any)["workspace"] == "a" {
				a = e.(map[string]any)
			}
		}
		if a == nil || a["live"] != true || len(a["checkpoints"].([]any)) != 1 || a["memoryBytes"].(float64) <= 0 || a["diskBytes"] == nil {
			t.Fatalf("alice's list: %v", list)
		}

		// Bob, naming alice's workspace and checkpoint.
		if sc, isErr := bob.Tool("restore_workspace", map[string]any{"workspace": "a", "checkpoint": "cp-1"}); !isErr {
			t.Fatalf("bob restored alice's checkpoint: %v", sc)
		}
		if sc, isErr := bob.Tool("fork_workspace", map[string]any{"workspace": "a", "new_workspace": "stolen"}); !isErr {
			t.Fatalf("bob forked alice's workspace: %v", sc)
		}
		if sc, isErr := bob.Tool("checkpoint_workspace", map[string]any{"workspace": "a"}); !isErr {
			t.Fatalf("bob checkpointed alice's workspace: %v", sc)
		}
		if list, _ := bob.Tool("list_workspaces", map[string]any{}); len(list["workspaces"].([]any)) != 0 {
			t.Fatalf("bob lists alice's workspaces: %v", list)
		}
		// Bob's own workspace of the same name is his alone.
		run(bob, "a", "set x bob")
		if sc, _ := run(alice, "a", "get x"); sc["result"] != "before" {
			t.Fatalf("bob's workspace a reached alice's: %v", sc)
		}
		if sc, isErr := bob.Tool("restore_workspace", map[string]any{"workspace": "a", "checkpoint": "cp-1"}); !isErr || !strings.Contains(fmt.Sprint(sc["error"]), "no checkpoint") {
			t.Fatalf("bob restoring a checkpoint of his own workspace that only alice's has: %v", sc)
		}
	})
}

// With auth, principal B can neither read A's files as resources (by
// guessing the URI), nor see them listed, nor read them with read_file;
// paths that leave the workspace are refused through every door.
func TestWorkspaceFilesBelongToTheirPrincipal(t *testing.T) {
	inBothEras(t, func(t *testing.T, alice, bob *client, legacy bool) {
		sc, isErr := run(alice, "a", "write report.txt alice's-secret")
		files, _ := sc["files"].([]any)
		if isErr || len(files) != 1 || files[0].(map[string]any)["uri"] != "workspace://a/report.txt" {
			t.Fatalf("alice's run: %v", sc)
		}
		read := alice.RPC("resources/read", map[string]any{"uri": "workspace://a/report.txt"}, nil)
		if b, _ := json.Marshal(read); !strings.Contains(string(b), "alice's-secret") {
			t.Fatalf("alice reads her file: %s", b)
		}
		if b, _ := json.Marshal(alice.RPC("resources/list", map[string]any{}, nil)); !strings.Contains(string(b), "workspace://a/report.txt") {
			t.Fatalf("alice's resources/list: %s", b)
		}

		got := bob.RPC("resources/read", map[string]any{"uri": "workspace://a/report.txt"}, nil)
		wantCode := float64(-32002) // the 2025 revisions' resource not found
		if !legacy {
			wantCode = -32602
		}
		if e, _ := got["error"].(map[string]any); e == nil || e["code"] != wantCode {
			t.Fatalf("bob reading alice's URI: %v", got)
		}
		if b, _ := json.Marshal(bob.RPC("resources/list", map[string]any{}, nil)); strings.Contains(string(b), "report.txt") {
			t.Fatalf("bob's resources/list shows alice's file: %s", b)
		}
		if sc, isErr := bob.Tool("read_file", map[string]any{"workspace": "a", "path": "report.txt"}); !isErr || strings.Contains(fmt.Sprint(sc), "secret") {
			t.Fatalf("bob's read_file of alice's file: %v", sc)
		}
		// Bob's write to his own "a" does not reach alice's.
		if sc, isErr := bob.Tool("write_file", map[string]any{"workspace": "a", "path": "report.txt", "content": "bob's"}); isErr {
			t.Fatalf("bob's write_file: %v", sc)
		}
		if sc, _ := alice.Tool("read_file", map[string]any{"workspace": "a", "path": "report.txt"}); sc["content"] != "alice's-secret" {
			t.Fatalf("alice's file after bob's write: %v", sc)
		}

		for _, uri := range []string{"workspace://a/..%2F..%2Fbob%2Fa%2Freport.txt", "workspace://a/%2E%2E/x", "workspace://../etc/passwd"} {
			got := alice.RPC("resources/read", map[string]any{"uri": uri}, nil)
			e, _ := got["error"].(map[string]any)
			if e == nil || e["code"] != float64(-32602) {
				t.Errorf("resources/read %s: %v", uri, got)
			}
		}
		for _, p := range []string{"../bob/a/report.txt", "/workspace/../../bob/a/report.txt", "/etc/passwd"} {
			if sc, isErr := alice.Tool("read_file", map[string]any{"workspace": "a", "path": p}); !isErr || sc["content"] != nil {
				t.Errorf("read_file %s: %v", p, sc)
			}
			if sc, isErr := alice.Tool("write_file", map[string]any{"workspace": "a", "path": p, "content": "x"}); !isErr {
				t.Errorf("write_file %s: %v", p, sc)
			}
		}
		if sc, _ := bob.Tool("read_file", map[string]any{"workspace": "a", "path": "report.txt"}); sc["content"] != "bob's" {
			t.Fatalf("bob's file after alice's attempts: %v", sc)
		}
	})
}

// The client's answer reaches the code waiting for it although the
// workspace is busy with that very code and other calls wait behind it:
// responses are intercepted before routing, never queued.
func TestAnswerReachesABusyWorkspace(t *testing.T) {
	alice, _ := newRegistryServer(t)
	initElicit(alice)
	id, ev := ask(alice, 1, "Name?") // workspace w1
	queued := mcptest.Events(alice.Post(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"set x 1","language":"javascript","workspace":"w1"}}}`, nil))
	if code := respond(alice, id, "Ada"); code != 202 {
		t.Fatalf("the answer: HTTP %d", code)
	}
	if sc := resultOf(t, ev); sc["result"] != "Ada" {
		t.Fatalf("the code got %v", sc)
	}
	if sc := resultOf(t, queued); sc["status"] != "ok" {
		t.Fatalf("the call queued behind it: %v", sc)
	}
}

// list_workspaces pages: every workspace once, most recently used first,
// a page at most limit long, and only the caller's; a cursor it did not
// give is refused.
func TestListWorkspacesInPages(t *testing.T) {
	alice, bob, m := newRegistryServerOver(t)
	const n = 23
	for i := range n {
		if sc, isErr := alice.Tool("write_file", map[string]any{"workspace": fmt.Sprintf("ws-%02d", i), "path": "a.txt", "content": "x"}); isErr {
			t.Fatalf("write_file: %v", sc)
		}
	}
	bob.Tool("write_file", map[string]any{"workspace": "bobs", "path": "a.txt", "content": "x"})
	var got []string
	args := map[string]any{"limit": 10}
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("the pages do not end")
		}
		sc, isErr := alice.Tool("list_workspaces", args)
		if isErr {
			t.Fatalf("list_workspaces: %v", sc)
		}
		ws := sc["workspaces"].([]any)
		if len(ws) > 10 {
			t.Fatalf("a page of %d", len(ws))
		}
		for _, w := range ws {
			got = append(got, w.(map[string]any)["workspace"].(string))
		}
		next, ok := sc["nextCursor"].(string)
		if !ok {
			break
		}
		args["cursor"] = next
	}
	seen := map[string]bool{}
	for _, id := range got {
		seen[id] = true
	}
	if len(got) != n || len(seen) != n || !seen["ws-00"] || !seen[fmt.Sprintf("ws-%02d", n-1)] {
		t.Fatalf("the pages hold %v, want ws-00 … ws-%02d once each", got, n-1)
	}
	// The order across pages is List's own.
	var whole []string
	for _, in := range m.List("alice") {
		whole = append(whole, in.ID)
	}
	if !slices.Equal(got, whole) {
		t.Fatalf("the pages' order %v, List's %v", got, whole)
	}
	if sc, _ := alice.Tool("list_workspaces", map[string]any{}); len(sc["workspaces"].([]any)) != n || sc["nextCursor"] != nil {
		t.Fatalf("the default page: %v", sc)
	}
	if sc, isErr := alice.Tool("list_workspaces", map[string]any{"cursor": "bm90IGEgY3Vyc29y"}); !isErr || !strings.Contains(fmt.Sprint(sc), "cursor") {
		t.Fatalf("a made-up cursor: %v", sc)
	}
}

// Resetting or deleting a workspace whose code waits for input ends that
// wait at once, rather than waiting for it up to protocol.input_timeout:
// the owner is the one asking.
func TestResetEndsAParkedRun(t *testing.T) {
	for _, tool := range []string{"reset_workspace", "delete_workspace"} {
		t.Run(tool, func(t *testing.T) {
			alice, _ := newRegistryServer(t)
			if _, isErr := alice.Tool("execute_code", map[string]any{"code": "set x 1", "language": "javascript", "workspace": "w"}); isErr {
				t.Fatal("set x 1 failed")
			}
			body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"ask Name?","language":"javascript","workspace":"w"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
			var parked map[string]any
			for m := range mcptest.Events(alice.Post(context.Background(), body, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Workspace": "w"})) {
				parked = m
			}
			state, _ := parked["result"].(map[string]any)["requestState"].(string)
			if state == "" {
				t.Fatalf("no input_required: %v", parked)
			}
			// Without the fix the tool waits out the input timeout (minutes).
			done := make(chan map[string]any, 1)
			go func() {
				sc, _ := alice.Tool(tool, map[string]any{"workspace": "w"})
				done <- sc
			}()
			select {
			case sc := <-done:
				if sc["error"] != nil {
					t.Fatalf("%s: %v", tool, sc)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s waited for the parked run", tool)
			}
			if sc, isErr := alice.Tool("execute_code", map[string]any{"code": "get x", "language": "javascript", "workspace": "w"}); !isErr {
				t.Fatalf("x after %s: %v", tool, sc)
			}
		})
	}
}
