package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// An image is bound to its principal, workspace and language: one copied
// into another workspace, another principal's or another language's file is
// not restored there (image_corrupt, with a warning), and an image of an
// execd that did not bind them cannot be told from a copy (image_stale).
func TestImagesAreBoundToTheirWorkspace(t *testing.T) {
	dir := t.TempDir()
	f := newFakeFactory("javascript", "python")
	m := newTestManager(t, Config{DataDir: dir}, f)
	runLang(t, m, "alice", "w", "javascript", "set x alice")
	runLang(t, m, "alice", "w", "python", "set x alice-py")
	runLang(t, m, "bob", "w", "javascript", "set x bob")
	runLang(t, m, "alice", "other", "javascript", "set x other")
	runLang(t, m, "alice", "old", "javascript", "set x old")
	m.Close(context.Background())
	img := func(principal, id, lang string) string {
		return imagePath(filepath.Join(dir, principal, stateDirName, id), lang)
	}
	cp := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cp(img("bob", "w", "javascript"), img("alice", "w", "javascript"))   // another principal's
	cp(img("alice", "w", "python"), img("alice", "other", "javascript")) // another language's
	var raw strings.Builder
	(&fakeImage{Build: "1", Lang: "javascript", Vars: map[string]string{"x": "old"}}).WriteTo(&raw)
	os.WriteFile(img("alice", "old", "javascript"), []byte(raw.String()), 0o600) // written without a binding

	core, logs := observer.New(zapcore.WarnLevel)
	m2, err := NewManager(Config{DataDir: dir}, f, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(context.Background())
	for _, c := range []struct {
		id   string
		want ResetReason
	}{{"w", ReasonImageCorrupt}, {"other", ReasonImageCorrupt}, {"old", ReasonImageStale}} {
		out := runLang(t, m2, "alice", c.id, "javascript", "get x")
		if out.Result.Value != nil || !out.Result.Reset || out.ResetReason != c.want {
			t.Errorf("alice/%s: %+v reason %q, want reset %q", c.id, out.Result, out.ResetReason, c.want)
		}
	}
	if n := logs.Len(); n != 3 {
		t.Errorf("%d warnings, want 3: %v", n, logs.All())
	}
	// The images that were not moved still restore.
	if out := runLang(t, m2, "alice", "w", "python", "get x"); value(out.Result) != "alice-py" || out.Result.Reset {
		t.Errorf("alice's python: %+v", out.Result)
	}
	if out := runLang(t, m2, "bob", "w", "javascript", "get x"); value(out.Result) != "bob" || out.Result.Reset {
		t.Errorf("bob's: %+v", out.Result)
	}
}

// Any bytes are bound, unbound or corrupt, never a panic; a bound file's
// image is what precedes its trailer, and the trailer reads back as itself.
func FuzzReadBinding(f *testing.F) {
	f.Add(append([]byte("image"), binding{key{"alice", "w"}, "python"}.trailer()...))
	f.Add([]byte("\x05alice\x01w\x00\x08\x00execdws\x01"))
	f.Add([]byte("execdimg\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, n, err := readBinding(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if err == errUnbound && n != int64(len(b)) || err != errUnbound && !errors.Is(err, ErrImageCorrupt) {
				t.Fatalf("readBinding = %d, %v", n, err)
			}
			return
		}
		if n < 0 || n > int64(len(b)) {
			t.Fatalf("an image of %d bytes in %d", n, len(b))
		}
		again := append(bytes.Clone(b[:n]), got.trailer()...)
		if g2, n2, err := readBinding(bytes.NewReader(again), int64(len(again))); err != nil || g2 != got || n2 != n {
			t.Fatalf("%+v reads back as %+v, %d, %v", got, g2, n2, err)
		}
	})
}
