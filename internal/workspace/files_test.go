package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"a.txt": "a.txt", "/workspace/a.txt": "a.txt", "./d/../a.txt": "a.txt", "d/e/f": "d/e/f", "/workspace/d//e/": "d/e",
	} {
		if got, err := CleanPath(in); err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".", "/", "/workspace", "..", "../x", "d/../../x", "/etc/passwd", "/workspace/../etc/passwd", "/workspacex/a", "a\x00b", strings.Repeat("a", 4097)} {
		if got, err := CleanPath(in); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("CleanPath(%q) = %q, %v; want InvalidPath", in, got, err)
		}
	}
}

func TestReadAndWriteFiles(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxDiskMiB: 1}, f)
	ctx := context.Background()
	// write_file creates the workspace and the directories.
	info, err := m.WriteFile(ctx, "alice", "w", "/workspace/in/data.csv", []byte("a,b\n1,2\n"))
	if err != nil || info.Path != "in/data.csv" || info.Size != 8 {
		t.Fatalf("WriteFile = %+v, %v", info, err)
	}
	if out := run(t, m, "alice", "w", "read in/data.csv"); *out.Result.Value != "a,b\n1,2\n" {
		t.Fatalf("the guest reads %q", *out.Result.Value)
	}
	d, err := m.ReadFile(ctx, "alice", "w", "in/data.csv", 4, 100)
	if err != nil || string(d.Data) != "1,2\n" || d.Size != 8 || d.Offset != 4 {
		t.Fatalf("ReadFile from 4 = %+v, %v", d, err)
	}
	if d, err := m.ReadFile(ctx, "alice", "w", "in/data.csv", 0, 3); err != nil || string(d.Data) != "a,b" {
		t.Fatalf("ReadFile of 3 = %q, %v", d.Data, err)
	}
	if d, err := m.ReadFile(ctx, "alice", "w", "in/data.csv", 100, 3); err != nil || len(d.Data) != 0 || d.Size != 8 {
		t.Fatalf("ReadFile past the end = %+v, %v", d, err)
	}

	// Missing things, and another principal.
	for _, c := range []struct {
		principal, id, path string
		want                error
	}{
		{"alice", "w", "nope.txt", ErrFileNotFound},
		{"alice", "w", "in", ErrInvalidPath},
		{"alice", "nope", "in/data.csv", ErrNotFound},
		{"bob", "w", "in/data.csv", ErrNotFound},
		{"alice", "w", "../../alice/w/in/data.csv", ErrInvalidPath},
		{"alice", "w", "/etc/passwd", ErrInvalidPath},
	} {
		if d, err := m.ReadFile(ctx, c.principal, c.id, c.path, 0, 100); !errors.Is(err, c.want) {
			t.Errorf("ReadFile(%s, %s, %s) = %q, %v; want %v", c.principal, c.id, c.path, d.Data, err, c.want)
		}
	}
	if _, err := m.WriteFile(ctx, "alice", "w", "../escape", []byte("x")); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("WriteFile ../escape: %v", err)
	}
	if _, err := m.WriteFile(ctx, "alice", "w", "in/data.csv/x", []byte("x")); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("WriteFile below a file: %v", err)
	}

	// A symlink the guest made that points out is not followed.
	root := filepath.Join(m.cfg.DataDir, "alice", "w")
	os.WriteFile(filepath.Join(m.cfg.DataDir, "secret"), []byte("host"), 0o600)
	os.Symlink("../../secret", filepath.Join(root, "out"))
	if d, err := m.ReadFile(ctx, "alice", "w", "out", 0, 100); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("ReadFile through a symlink out = %q, %v", d.Data, err)
	}
	if _, err := m.WriteFile(ctx, "alice", "w", "out", []byte("over")); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("WriteFile through a symlink out: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(m.cfg.DataDir, "secret")); string(b) != "host" {
		t.Fatalf("the host file was written: %q", b)
	}

	// The quota: refused whole, nothing written.
	big := make([]byte, 2<<20)
	if _, err := m.WriteFile(ctx, "alice", "w", "big", big); !errors.Is(err, ErrLimitReached) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("WriteFile over the quota: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "big")); !os.IsNotExist(err) {
		t.Fatalf("a refused write left a file: %v", err)
	}
	if _, err := m.WriteFile(ctx, "alice", "w", "in/data.csv", big[:900<<10]); err != nil {
		t.Fatalf("replacing a file within the quota: %v", err)
	}
}

func TestWriteFileDoesNotWriteThroughACheckpoint(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory())
	ctx := context.Background()
	m.WriteFile(ctx, "p", "w", "f", []byte("original"))
	if _, err := m.Checkpoint(ctx, "p", "w", "c"); err != nil {
		t.Fatal(err)
	}
	m.WriteFile(ctx, "p", "w", "f", []byte("changed"))
	if err := m.RestoreCheckpoint(ctx, "p", "w", "c"); err != nil {
		t.Fatal(err)
	}
	if d, _ := m.ReadFile(ctx, "p", "w", "f", 0, 100); string(d.Data) != "original" {
		t.Fatalf("after restore: %q", d.Data)
	}
}

func TestRunNamesTheFilesItChanged(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory())
	out := run(t, m, "p", "w", "write a.txt hello")
	if len(out.Files) != 1 || out.Files[0].Path != "a.txt" || out.Files[0].Size != 5 || out.Files[0].Workspace != "w" {
		t.Fatalf("Files = %+v", out.Files)
	}
	if out := run(t, m, "p", "w", "read a.txt"); len(out.Files) != 0 {
		t.Fatalf("a run that only read: Files = %+v", out.Files)
	}
	run(t, m, "p", "w2", "write b.txt bb")
	m.WriteFile(context.Background(), "p", "w", "c.txt", []byte("c"))
	run(t, m, "q", "w", "write other hers")
	var got []string
	for _, f := range m.RecentFiles("p") {
		got = append(got, f.Workspace+"/"+f.Path)
	}
	if want := []string{"w/c.txt", "w2/b.txt", "w/a.txt"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("RecentFiles(p) = %q; want %q", got, want)
	}
	if err := m.Delete(context.Background(), "p", "w2"); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(m.cfg.DataDir, "p", "w", "c.txt"))
	got = nil
	for _, f := range m.RecentFiles("p") {
		got = append(got, f.Workspace+"/"+f.Path)
	}
	if want := []string{"w/a.txt"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after a delete and a removal: %q; want %q", got, want)
	}
}

// askOnce answers one input() after being told to, and reports each
// question.
type askOnce struct {
	asked  chan string
	answer chan string
}

func (a *askOnce) Input(ctx context.Context, prompt string) InputAnswer {
	a.asked <- prompt
	select {
	case s := <-a.answer:
		return InputAnswer{Status: InputOK, Text: s}
	case <-ctx.Done():
		return InputAnswer{Status: InputEOF}
	}
}

// A run waiting for a person gives its run slot back, keeps its
// workspace's turn, and takes a slot again to go on.
func TestWaitingForInputFreesTheRunSlot(t *testing.T) {
	m := newTestManager(t, Config{MaxConcurrentRuns: 1, MaxRunsPerPrincipal: 1}, newFakeFactory())
	in := &askOnce{asked: make(chan string, 1), answer: make(chan string, 1)}
	done := make(chan Outcome, 1)
	go func() {
		out, _ := m.Run(context.Background(), Request{Principal: "p", Workspace: "a", Language: "javascript", Code: "ask name?", Input: in})
		done <- out
	}()
	if q := <-in.asked; q != "name?" {
		t.Fatalf("asked %q", q)
	}
	// The only slot is free for another workspace of the same principal.
	if out := run(t, m, "p", "b", "set x 1"); out.Result.Status != StatusOK {
		t.Fatalf("another workspace while one waits for input: %+v", out.Result)
	}
	// The waiting workspace's turn is held: a call to it waits.
	queued := make(chan Outcome, 1)
	go func() { queued <- run(t, m, "p", "a", "set y 2") }()
	select {
	case out := <-queued:
		t.Fatalf("a call to the waiting workspace ran: %+v", out.Result)
	case <-time.After(50 * time.Millisecond):
	}
	in.answer <- "Ada"
	if out := <-done; out.Result.Status != StatusOK || *out.Result.Value != "Ada" {
		t.Fatalf("the answered run: %+v", out.Result)
	}
	if out := <-queued; out.Result.Status != StatusOK {
		t.Fatalf("the call queued behind it: %+v", out.Result)
	}
	m.slots.mu.Lock()
	used := m.slots.used
	m.slots.mu.Unlock()
	if used != 0 {
		t.Fatalf("slots in use after every run ended: %d", used)
	}
}

// A cleaned path always stays below the workspace's directory.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a.txt", "/workspace/a/b", "../x", "/workspace/../x", "a/../../b", "./.", "/", "a\x00b", "//workspace//x", "é/ü.txt"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := CleanPath(p)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("CleanPath(%q): %v is not InvalidPath", p, err)
			}
			return
		}
		if c == "." || !fs.ValidPath(c) || strings.HasPrefix(c, "/") {
			t.Fatalf("CleanPath(%q) = %q", p, c)
		}
		root := "/data/p/w"
		if j := filepath.Join(root, c); !strings.HasPrefix(j, root+"/") {
			t.Fatalf("CleanPath(%q) = %q leaves the root: %s", p, c, j)
		}
		if again, err := CleanPath(c); err != nil || again != c {
			t.Fatalf("CleanPath(CleanPath(%q)) = %q, %v; want %q", p, again, err, c)
		}
	})
}

func TestQuotaThroughFSFactory(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxDiskMiB: 1}, f)
	big := strings.Repeat("x", 600<<10)
	if out := run(t, m, "p", "w", "write a "+big); out.Result.Status != StatusOK {
		t.Fatalf("first write: %+v", out.Result.Stderr)
	}
	// A write past the quota is shortened to fit (a guest's libc then
	// retries the rest, which fails); a write with no room fails.
	run(t, m, "p", "w", "write b "+big+big)
	out := run(t, m, "p", "w", "write c "+big)
	if !out.DiskFull || out.DiskQuotaBytes != 1<<20 {
		t.Errorf("a write on the full quota: DiskFull %v, DiskQuotaBytes %d", out.DiskFull, out.DiskQuotaBytes)
	}
	if strings.Contains(out.Result.Stderr, "quota") {
		t.Errorf("the registry wrote words into stderr: %q", out.Result.Stderr)
	}
	if l := m.List("p"); len(l) != 1 || l[0].DiskBytes > 1<<20 {
		t.Errorf("List = %+v", l)
	}
	// Files: true gives the space back.
	if err := m.Reset(context.Background(), "p", "w", true); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "w", "write a "+big); out.Result.Status != StatusReset || out.Result.Stderr != "" {
		t.Errorf("write after reset files: %s %q", out.Result.Status, out.Result.Stderr)
	}
}

// A FIFO (or a device) among a workspace's files is neither read nor
// written, by the file tools or by the code: opening one would wait for a
// writer, or a reader, that never comes.
func TestFilesThatAreNotRegularAreRefused(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory())
	ctx := context.Background()
	run(t, m, "p", "w", "write a.txt x")
	fifo := filepath.Join(m.cfg.DataDir, "p", "w", "pipe")
	mkfifo(t, fifo)
	os.Symlink("pipe", filepath.Join(m.cfg.DataDir, "p", "w", "to-pipe"))
	for _, p := range []string{"pipe", "to-pipe"} {
		if _, err := m.ReadFile(ctx, "p", "w", p, 0, 10); !errors.Is(err, ErrInvalidPath) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("ReadFile(%s) = %v; want InvalidPath, not a regular file", p, err)
		}
		if _, err := m.WriteFile(ctx, "p", "w", p, []byte("x")); !errors.Is(err, ErrInvalidPath) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("WriteFile(%s) = %v; want InvalidPath, not a regular file", p, err)
		}
		if out := run(t, m, "p", "w", "read "+p); out.Result.Status != StatusError {
			t.Errorf("the code reads %s: %+v", p, out.Result)
		}
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v, %v", st, err)
	}
	// Checkpoints and forks leave it out (guestfs.CopyTree copies files,
	// links and directories only).
	if _, err := m.Fork(ctx, "p", "w", "w2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(m.cfg.DataDir, "p", "w2", "pipe")); !os.IsNotExist(err) {
		t.Errorf("the fork has the FIFO: %v", err)
	}
}

// While a run's code waits for a person (up to protocol.input_timeout),
// reading the workspace's files does not wait for the answer, and a
// checkpoint or fork is refused at once (an interpreter in the middle of a
// run cannot be saved) — also one that was already waiting for the turn
// when the code began to ask. Without this each waited for the answer.
func TestWaitingForInputDoesNotHoldReads(t *testing.T) {
	m := newTestManager(t, Config{MaxConcurrentRuns: 1, MaxRunsPerPrincipal: 1}, newFakeFactory())
	ctx := context.Background()
	run(t, m, "p", "a", "write f.txt before")
	// Another workspace holds the only slot: a's run takes a's turn and
	// waits for the slot, not yet asking.
	go run(t, m, "p", "busy", "wait")
	<-m.f.(*fakeFactory).started
	in := &askOnce{asked: make(chan string, 1), answer: make(chan string, 1)}
	done := make(chan Outcome, 1)
	go func() {
		out, _ := m.Run(ctx, Request{Principal: "p", Workspace: "a", Language: "javascript", Code: "ask name?", Input: in})
		done <- out
	}()
	waiters := func(n int) {
		for i := 0; ; i++ {
			m.mu.Lock()
			w := m.wss[key{"p", "a"}]
			got, busy := 0, w != nil && w.busy
			if busy {
				got = w.waiters.Len()
			}
			m.mu.Unlock()
			if busy && got >= n {
				return
			}
			if i > 5000 {
				t.Fatalf("%d calls wait for a's turn, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waiters(0) // a's run holds its turn
	cpErr := make(chan error, 1)
	go func() {
		_, err := m.Checkpoint(ctx, "p", "a", "")
		cpErr <- err
	}()
	waiters(1) // the checkpoint waits for a's turn
	m.f.(*fakeFactory).release <- struct{}{}
	<-in.asked
	select {
	case err := <-cpErr:
		if !errors.Is(err, ErrNotSaveable) || !strings.Contains(err.Error(), "waiting for input") {
			t.Fatalf("a checkpoint waiting when the code began to ask: %v", err)
		}
	case <-time.After(30 * time.Second):
		in.answer <- "late"
		t.Fatal("the checkpoint waited for the person's answer")
	}
	if _, err := m.Fork(ctx, "p", "a", "b"); !errors.Is(err, ErrNotSaveable) || !strings.Contains(err.Error(), "waiting for input") {
		t.Fatalf("a fork while the code waits for input: %v", err)
	}
	d, err := m.ReadFile(ctx, "p", "a", "f.txt", 0, 100)
	if err != nil || string(d.Data) != "before" {
		t.Fatalf("read_file while the code waits for input: %q, %v", d.Data, err)
	}
	in.answer <- "Ada"
	if out := <-done; out.Result.Status != StatusOK {
		t.Fatalf("the answered run: %+v", out.Result)
	}
	if _, err := m.Checkpoint(ctx, "p", "a", ""); err != nil {
		t.Fatalf("a checkpoint after the answer: %v", err)
	}
}
