package workspace

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"execd/internal/guestfs"
)

// diskBytes is the data under dir as the disk holds it: each regular file's
// bytes once, however many names it has.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	seen := map[uint64]bool{}
	var total int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		ino := info.Sys().(*syscall.Stat_t).Ino
		if !seen[ino] {
			seen[ino] = true
			total += info.Size()
		}
		return nil
	})
	return total
}

// limitNamed asserts a LimitReached refusal whose message names key.
func limitNamed(t *testing.T, what string, err error, key string) {
	t.Helper()
	var we *Error
	if !errors.As(err, &we) || we.Code != LimitReached || !strings.Contains(we.Msg, key) {
		t.Fatalf("%s: %v, want LimitReached naming %s", what, err, key)
	}
}

// TestPrincipalDiskBudgetBoundsCheckpoints is the reproduction: with a
// workspace quota of 8 MiB, writing 7 MB and checkpointing, 32 times, used
// to put 32 copies of the data on disk (checkpoints were charged to no
// one). Now everything the principal causes is charged to its budget: the
// checkpoints stop when it is full, the refusal names the limit, the data
// on disk stays within it, and another principal is not touched.
func TestPrincipalDiskBudgetBoundsCheckpoints(t *testing.T) {
	const budgetMiB = 24
	m := newTestManager(t, Config{MaxDiskMiB: 8, MaxPrincipalDiskMiB: budgetMiB}, newFakeFactory("javascript"))
	ctx := context.Background()
	run(t, m, "alice", "w", "set x 1")
	var refused error
	made := 0
	for i := range 32 {
		data := bytes.Repeat([]byte{byte('a' + i%26)}, 7_000_000)
		if _, err := m.WriteFile(ctx, "alice", "w", "big.bin", data); err != nil {
			refused = err
			break
		}
		if _, err := m.Checkpoint(ctx, "alice", "w", ""); err != nil {
			refused = err
			break
		}
		made++
	}
	if refused == nil {
		t.Fatalf("32 × (7 MB, checkpoint) all passed a %d MiB budget", budgetMiB)
	}
	limitNamed(t, "the write or checkpoint past the budget", refused, "workspace.max_principal_disk_mib")
	if made < 2 {
		t.Errorf("only %d checkpoints fit in %d MiB", made, budgetMiB)
	}
	if got := diskBytes(t, filepath.Join(m.cfg.DataDir, "alice")); got > budgetMiB<<20 {
		t.Errorf("alice has %d bytes on disk, over her budget of %d MiB", got, budgetMiB)
	}
	// The guest's own writes are refused too, and the result says which
	// limit. Emptying big.bin frees the workspace's quota, not the budget:
	// the checkpoints still hold its data.
	if _, err := m.WriteFile(ctx, "alice", "w", "big.bin", nil); err != nil {
		t.Fatal(err)
	}
	run(t, m, "alice", "w", "write more.bin "+strings.Repeat("x", 7_500_000)) // shortened to what fits
	out := run(t, m, "alice", "w", "append more.bin y")
	if !out.PrincipalDiskFull || out.DiskFull || out.PrincipalDiskBytes != budgetMiB<<20 {
		t.Errorf("a guest write past the budget: PrincipalDiskFull %v, DiskFull %v, %d bytes", out.PrincipalDiskFull, out.DiskFull, out.PrincipalDiskBytes)
	}
	// Bob has a budget of his own.
	if _, err := m.WriteFile(ctx, "bob", "w", "big.bin", make([]byte, 7_000_000)); err != nil {
		t.Errorf("bob's write while alice's budget is full: %v", err)
	}
	// Deleting the workspace gives its bytes back.
	if err := m.Delete(ctx, "alice", "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteFile(ctx, "alice", "w2", "big.bin", make([]byte, 7_000_000)); err != nil {
		t.Errorf("a write after deleting the workspace that filled the budget: %v", err)
	}
}

// TestPrincipalDiskBudgetSharedDataOnce: checkpoints and forks that share
// a workspace's data by hard links cost their entries, not the data again:
// ten checkpoints and a fork of a 7 MB workspace fit a 16 MiB budget. The
// data is charged again when a copy diverges.
func TestPrincipalDiskBudgetSharedDataOnce(t *testing.T) {
	m := newTestManager(t, Config{MaxPrincipalDiskMiB: 16}, newFakeFactory("javascript"))
	ctx := context.Background()
	if _, err := m.WriteFile(ctx, "p", "w", "big.bin", make([]byte, 7_000_000)); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := m.Checkpoint(ctx, "p", "w", ""); err != nil {
			t.Fatalf("a checkpoint sharing its data: %v", err)
		}
	}
	if _, err := m.Fork(ctx, "p", "w", "f"); err != nil {
		t.Fatalf("a fork sharing its data: %v", err)
	}
	if used := m.budgetOf("p").Used(); used > 7_000_000+1<<20 {
		t.Errorf("budget used %d bytes for one 7 MB file shared by ten checkpoints and a fork", used)
	}
	// The fork's file diverges: its own copy of 7 MB is now charged, and
	// a third copy does not fit.
	if _, err := m.WriteFile(ctx, "p", "f", "big.bin", make([]byte, 7_000_000)); err != nil {
		t.Fatalf("the fork's own copy: %v", err)
	}
	_, err := m.WriteFile(ctx, "p", "w", "big.bin", bytes.Repeat([]byte("y"), 7_000_000))
	limitNamed(t, "a third 7 MB copy in 16 MiB", err, "workspace.max_principal_disk_mib")
}

// TestPrincipalDiskBudgetCountsImages: a hibernated interpreter's image is
// charged (hibernation itself is never refused: it must not lose state),
// and a checkpoint or a fork whose images do not fit is refused with
// nothing left behind.
func TestPrincipalDiskBudgetCountsImages(t *testing.T) {
	m := newTestManager(t, Config{MaxPrincipalDiskMiB: 8}, newFakeFactory("javascript"))
	ctx := context.Background()
	run(t, m, "p", "w", "set x "+strings.Repeat("v", 3_000_000))
	before := m.budgetOf("p").Used()
	if err := m.Hibernate(ctx, "p", "w"); err != nil {
		t.Fatal(err)
	}
	if grew := m.budgetOf("p").Used() - before; grew < 3_000_000 {
		t.Fatalf("hibernating a 3 MB interpreter charged %d bytes", grew)
	}
	// The restore removes the image and gives its bytes back.
	if out := run(t, m, "p", "w", "get x"); !out.Restored {
		t.Fatalf("not restored: %+v", out)
	}
	if used := m.budgetOf("p").Used(); used > before+64<<10 {
		t.Errorf("budget after the restore = %d, before the hibernation %d", used, before)
	}
	if _, err := m.Checkpoint(ctx, "p", "w", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Checkpoint(ctx, "p", "w", "b"); err != nil {
		t.Fatal(err)
	}
	_, err := m.Checkpoint(ctx, "p", "w", "c")
	limitNamed(t, "a third 3 MB image in 8 MiB", err, "workspace.max_principal_disk_mib")
	_, err = m.Fork(ctx, "p", "w", "f")
	limitNamed(t, "a fork whose image does not fit", err, "workspace.max_principal_disk_mib")
	if got := diskBytes(t, filepath.Join(m.cfg.DataDir, "p")); got > 8<<20 {
		t.Errorf("%d bytes on disk, over the 8 MiB budget", got)
	}
	if exists(filepath.Join(m.cfg.DataDir, "p", "f")) {
		t.Error("the refused fork left its workspace behind")
	}
}

// TestWorkspacesPerPrincipal: 1,000 forks used to make 1,000 workspaces.
// A principal has at most MaxWorkspacesPerPrincipal; a run, a write or a
// fork that would make one more is refused naming the limit, another
// principal is not affected, and deleting one makes room.
func TestWorkspacesPerPrincipal(t *testing.T) {
	m := newTestManager(t, Config{MaxWorkspacesPerPrincipal: 3}, newFakeFactory("javascript"))
	ctx := context.Background()
	run(t, m, "p", "a", "set x 1")
	if _, err := m.Fork(ctx, "p", "a", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteFile(ctx, "p", "c", "f.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err := m.Run(ctx, Request{Principal: "p", Workspace: "d", Language: "javascript", Code: "set x 1"})
	limitNamed(t, "a fourth workspace by a run", err, "workspace.max_workspaces_per_principal")
	_, err = m.Fork(ctx, "p", "a", "d")
	limitNamed(t, "a fourth workspace by a fork", err, "workspace.max_workspaces_per_principal")
	_, err = m.WriteFile(ctx, "p", "d", "f.txt", []byte("x"))
	limitNamed(t, "a fourth workspace by write_file", err, "workspace.max_workspaces_per_principal")
	if exists(filepath.Join(m.cfg.DataDir, "p", "d")) {
		t.Error("a refused workspace was made")
	}
	// The existing ones go on.
	if out := run(t, m, "p", "b", "get x"); value(out.Result) != "1" {
		t.Errorf("the fork: %+v", out.Result)
	}
	run(t, m, "q", "d", "set x 1")
	if err := m.Delete(ctx, "p", "c"); err != nil {
		t.Fatal(err)
	}
	run(t, m, "p", "d", "set x 1")
}

// TestPrincipalDiskBudgetMatchesDisk: after every kind of change — the
// guest's writes and appends, write_file, checkpoints and their restore,
// forks and their divergence, hibernation and restore, a reset with files,
// a deletion — the budget's running count is what measuring the
// principal's directory afresh gives (but for the small notes and
// directories of the state, which it does not follow).
func TestPrincipalDiskBudgetMatchesDisk(t *testing.T) {
	m := newTestManager(t, Config{MaxPrincipalDiskMiB: 64}, newFakeFactory("javascript", "python"))
	ctx := context.Background()
	check := func(step string) {
		t.Helper()
		want, err := guestfs.OwnUsage(filepath.Join(m.cfg.DataDir, "p"))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.budgetOf("p").Used(); got < want-16<<10 || got > want+16<<10 {
			t.Fatalf("after %s: the budget counts %d bytes, the disk holds %d", step, got, want)
		}
	}
	big := strings.Repeat("b", 1_000_000)
	run(t, m, "p", "w", "write a.txt "+big)
	runLang(t, m, "p", "w", "python", "set x "+big)
	check("a guest write")
	run(t, m, "p", "w", "append a.txt "+big)
	if _, err := m.WriteFile(ctx, "p", "w", "b.txt", []byte(big)); err != nil {
		t.Fatal(err)
	}
	check("write_file")
	if _, err := m.Checkpoint(ctx, "p", "w", "one"); err != nil {
		t.Fatal(err)
	}
	check("a checkpoint")
	run(t, m, "p", "w", "append a.txt more")
	run(t, m, "p", "w", "write b.txt "+big+big)
	check("changes to files a checkpoint shares")
	if err := m.Hibernate(ctx, "p", "w"); err != nil {
		t.Fatal(err)
	}
	check("a hibernation")
	if _, err := m.Fork(ctx, "p", "w", "f"); err != nil {
		t.Fatal(err)
	}
	check("a fork")
	run(t, m, "p", "f", "append a.txt fork")
	check("a fork's change")
	runLang(t, m, "p", "w", "python", "get x")
	check("a restore")
	if err := m.RestoreCheckpoint(ctx, "p", "w", "one"); err != nil {
		t.Fatal(err)
	}
	check("a checkpoint's restore")
	if err := m.Reset(ctx, "p", "f", true); err != nil {
		t.Fatal(err)
	}
	check("a reset with files")
	if err := m.Delete(ctx, "p", "w"); err != nil {
		t.Fatal(err)
	}
	check("a deletion")
}
