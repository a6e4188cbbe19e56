package workspace

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestStateAcrossCalls(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory())
	first := run(t, m, "local", "", "set x 41")
	if _, err := uuid.Parse(first.Workspace); err != nil {
		t.Fatalf("generated id %q is not a UUID: %v", first.Workspace, err)
	}
	if first.Result.Status != StatusOK || first.Result.Reset {
		t.Errorf("new workspace: status %s reset %v, want ok, not reset", first.Result.Status, first.Result.Reset)
	}
	second := run(t, m, "local", first.Workspace, "get x")
	if value(second.Result) != "41" || second.Result.Status != StatusOK {
		t.Errorf("get x = %s (%s), want 41 ok", value(second.Result), second.Result.Status)
	}
	named := run(t, m, "local", "analysis", "get x")
	if named.Workspace != "analysis" || named.Result.Status != StatusError {
		t.Errorf("fresh named workspace: %+v", named)
	}
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"a", "analysis", "A.b_c-9", "...", ".hidden", strings.Repeat("x", 64)} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "../x", "a b", "é", "a\x00", strings.Repeat("x", 65), "~x"} {
		err := ValidateID(id)
		if !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateID(%q) = %v, want InvalidID", id, err)
			continue
		}
		if !strings.Contains(err.Error(), "1–64 characters") {
			t.Errorf("message %q does not state the rule", err)
		}
	}
	m := newTestManager(t, Config{}, newFakeFactory())
	_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "../etc", Language: "js"})
	var we *Error
	if !errors.As(err, &we) || we.Code != InvalidID {
		t.Errorf("Run with ../etc: %v", err)
	}
	if err := m.Reset(context.Background(), "p", "a/b", false); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Reset a/b: %v", err)
	}
}

func TestLanguages(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory("javascript"))
	for _, l := range []string{"javascript", "JavaScript", " js ", "node"} {
		if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: l, Code: "set a 1"}); err != nil {
			t.Errorf("language %q: %v", l, err)
		}
	}
	for _, l := range []string{"cobol", "python", "py", ""} {
		_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: l})
		if !errors.Is(err, ErrUnsupportedLanguage) || !strings.Contains(err.Error(), "use javascript") {
			t.Errorf("language %q: %v", l, err)
		}
	}
	_, err := m.Run(context.Background(), Request{Principal: "p", Language: "cobol"})
	if err.Error() != `language "cobol" is not supported; use javascript` {
		t.Errorf("message: %q", err)
	}

	both := newTestManager(t, Config{}, newFakeFactory("javascript", "python"))
	for _, l := range []string{"python", "py", "Python3", "js"} {
		if _, err := both.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: l}); err != nil {
			t.Errorf("language %q: %v", l, err)
		}
	}
}

func TestLanguagesSideBySide(t *testing.T) {
	f := newFakeFactory("javascript", "python")
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "js", Code: "set x js"})
	m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "py", Code: "set x py"})
	js, _ := m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "js", Code: "get x"})
	py, _ := m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "py", Code: "get x"})
	if value(js.Result) != "js" || value(py.Result) != "py" {
		t.Errorf("js=%s py=%s", value(js.Result), value(py.Result))
	}
	infos := m.List("p")
	if len(infos) != 1 || strings.Join(infos[0].Languages, ",") != "javascript,python" || !infos[0].Live {
		t.Errorf("List = %+v", infos)
	}
}

func TestPrincipalIsolation(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	run(t, m, "alice", "shared", "set secret 42")
	run(t, m, "alice", "shared", "write f.txt alice")

	if got := run(t, m, "bob", "shared", "get secret"); got.Result.Value != nil {
		t.Errorf("bob read alice's variable: %s", value(got.Result))
	}
	for _, in := range m.List("bob") {
		if in.DiskBytes > 0 {
			t.Errorf("bob sees files: %+v", in)
		}
	}
	if err := m.Delete(ctx, "bob", "shared"); err != nil {
		t.Fatalf("bob deletes his own: %v", err)
	}
	if err := m.Reset(ctx, "bob", "shared", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob resets a workspace only alice has: %v", err)
	}
	if err := m.Delete(ctx, "bob", "shared"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob deletes a workspace only alice has: %v", err)
	}
	if got := run(t, m, "alice", "shared", "get secret"); value(got.Result) != "42" {
		t.Errorf("alice's state after bob's attempts: %s", value(got.Result))
	}
	if l := m.List("alice"); len(l) != 1 || l[0].ID != "shared" || !l[0].Live {
		t.Errorf("alice's list: %+v", l)
	}
	if l := m.List("bob"); len(l) != 0 {
		t.Errorf("bob's list: %+v", l)
	}
	if l := m.List("carol"); len(l) != 0 {
		t.Errorf("carol's list: %+v", l)
	}
}

func TestPrincipalDir(t *testing.T) {
	seen := map[string]string{}
	for _, p := range []string{"local", "alice", "a.b", ".hidden", "..", ".", "a/b", "../../etc", "~x", strings.Repeat("z", 200), "tok:abc"} {
		d, err := principalDir(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if d == "." || d == ".." || strings.ContainsAny(d, "/\\") || strings.HasPrefix(d, ".") || len(d) > 65 {
			t.Errorf("principalDir(%q) = %q is unsafe", p, d)
		}
		if other, dup := seen[d]; dup {
			t.Errorf("%q and %q share %q", p, other, d)
		}
		seen[d] = p
	}
	if d, _ := principalDir("local"); d != "local" {
		t.Errorf("local maps to %q", d)
	}
	if _, err := principalDir(""); !errors.Is(err, ErrInvalidPrincipal) {
		t.Errorf("empty principal: %v", err)
	}
	m := newTestManager(t, Config{}, newFakeFactory())
	if _, err := m.Run(context.Background(), Request{Language: "js"}); !errors.Is(err, ErrInvalidPrincipal) {
		t.Errorf("Run without principal: %v", err)
	}
	// The directory of a hostile principal stays under the data dir.
	out := run(t, m, "../../escape", "w", "write f x")
	_ = out
	matches, _ := filepath.Glob(filepath.Join(m.cfg.DataDir, "*", "w", "f"))
	if len(matches) != 1 {
		t.Errorf("files for ../../escape: %v", matches)
	}
}
