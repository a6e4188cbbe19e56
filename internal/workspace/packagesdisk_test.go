package workspace

// The disk charge of a workspace's packages (packagesdisk.go).

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"execd/internal/config"
	"execd/internal/packages"
	"execd/internal/packages/packagestest"
)

// TestPackagesCountByWhatIsUnique: a workspace's packages count against
// its disk quota (and its principal's disk budget) by the bytes no other
// workspace's lock uses; shared ones cost nothing.
func TestPackagesCountByWhatIsUnique(t *testing.T) {
	reg := packagestest.NewNPM(t)
	const size = 600_000 // two of them pass a quota of 1 MiB, one does not
	reg.Add(t, "big1", "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat("a", size)})
	reg.Add(t, "big2", "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat("b", size)})
	svc := newPackages(t, reg.URL(), "http://127.0.0.1:1/simple")
	m := newTestManager(t, Config{MaxDiskMiB: 1, Packages: svc}, newFakeFactory())
	ctx := context.Background()
	install := func(id, name string) error {
		_, err := m.InstallPackages(ctx, "p", id, "javascript", []string{name})
		return err
	}
	packagesOf := func(id string) string {
		for _, in := range m.List("p") {
			if in.ID == id {
				return names(in.Packages)
			}
		}
		return ""
	}
	refused := func(err error, key string) bool {
		var we *Error
		return errors.As(err, &we) && we.Code == LimitReached && strings.Contains(we.Msg, key) && strings.Contains(we.Msg, "nothing was")
	}

	entries := func() int {
		ents, err := os.ReadDir(svc.CacheDir())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") {
				n++
			}
		}
		return n
	}
	if err := install("a", "big1"); err != nil {
		t.Fatal(err)
	}
	if err := install("a", "big2"); !refused(err, "workspace.max_disk_mib = 1") || !strings.Contains(err.Error(), "only this workspace would use") {
		t.Fatalf("a second package unique to the workspace, past its quota: %v", err)
	}
	if n := entries(); n != 1 {
		t.Errorf("after the refused install the cache holds %d entries, want big1's only: what it fetched is charged to no one", n)
	}
	if got := packagesOf("a"); got != "big1@1.0.0" {
		t.Errorf("after the refusal the workspace has %q", got)
	}
	// b's files and a package a uses too fit: the shared one costs nothing.
	if _, err := m.WriteFile(ctx, "p", "b", "data.bin", make([]byte, 500_000)); err != nil {
		t.Fatal(err)
	}
	if err := install("b", "big1"); err != nil {
		t.Fatalf("a package another workspace uses too: %v", err)
	}
	if err := install("b", "big2"); !refused(err, "workspace.max_disk_mib") {
		t.Errorf("a package only b would use, past its quota: %v", err)
	}
	// Now that b uses big1 too, only big2 would be a's own.
	if err := install("a", "big2"); err != nil {
		t.Errorf("a's big1 is shared with b now: %v", err)
	}
	// b takes big2 too, which costs it nothing; then nothing is a's own,
	// and a's files may take what its packages took.
	if err := install("b", "big2"); err != nil {
		t.Errorf("b installing a package a uses: %v", err)
	}
	if _, err := m.WriteFile(ctx, "p", "a", "data.bin", make([]byte, 600_000)); err != nil {
		t.Fatal(err)
	}
	if err := install("a", "big1"); err != nil {
		t.Errorf("a's packages, all shared with b, with 600 kB of files: %v", err)
	}
	// Once b drops them, they are a's alone again: charged at once, and
	// an install is refused.
	if err := m.Reset(ctx, "p", "b", true); err != nil {
		t.Fatal(err)
	}
	if err := install("a", "big1"); !refused(err, "workspace.max_disk_mib") {
		t.Errorf("a's packages, b's lock gone: %v", err)
	}

	// The principal's budget counts them the same way.
	m2 := newTestManager(t, Config{MaxPrincipalDiskMiB: 1, Packages: svc}, newFakeFactory())
	if _, err := m2.WriteFile(ctx, "p", "c", "data.bin", make([]byte, 500_000)); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.InstallPackages(ctx, "p", "c", "javascript", []string{"big1"}); !refused(err, "workspace.max_principal_disk_mib = 1") {
		t.Errorf("past the principal's disk budget: %v", err)
	}
}

// installedLock installs names (of lang) in a new workspace of m and
// returns the lock the install wrote; the workspace is deleted, its
// packages stay in the cache.
func installedLock(t *testing.T, m *Manager, lang string, names ...string) []byte {
	t.Helper()
	ctx := context.Background()
	id := m.NewID()
	if _, err := m.InstallPackages(ctx, "p", id, lang, names); err != nil {
		t.Fatal(err)
	}
	f, err := m.ReadFile(ctx, "p", id, LockPath, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "p", id); err != nil {
		t.Fatal(err)
	}
	return f.Data
}

// TestPackagesOfAWrittenLockCount: a lock the code writes, naming
// packages the cache lacks, is fetched when the guest asks for its tree,
// and counts as an install would.
func TestPackagesOfAWrittenLockCount(t *testing.T) {
	reg := packagestest.NewNPM(t)
	reg.Add(t, "big1", "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat("a", 600_000)})
	reg.Add(t, "big2", "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat("b", 600_000)})
	ctx := context.Background()
	elsewhere := newTestManager(t, Config{Packages: newPackages(t, reg.URL(), "http://127.0.0.1:1/simple")}, newFakeFactory())
	lock := installedLock(t, elsewhere, "javascript", "big1", "big2")
	m := newTestManager(t, Config{MaxDiskMiB: 1, Packages: newPackages(t, reg.URL(), "http://127.0.0.1:1/simple")}, newFakeFactory())
	if _, err := m.WriteFile(ctx, "p", "a", LockPath, lock); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // fetched by the first ask, still refused by the second
		if v := *run(t, m, "p", "a", `packages {"op":"npm"}`).Result.Value; !strings.Contains(v, "workspace.max_disk_mib = 1") || strings.Contains(v, `"tree"`) {
			t.Errorf("ask %d: the tree of a written lock past the quota: %s", i+1, v)
		}
	}
	// A lock an install wrote is not checked again by the view. big1 is
	// a's too: it costs b nothing, and b's files may use the quota.
	if _, err := m.InstallPackages(ctx, "p", "b", "javascript", []string{"big1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteFile(ctx, "p", "b", "data.bin", make([]byte, 500_000)); err != nil {
		t.Fatal(err)
	}
	if v := *run(t, m, "p", "b", `packages {"op":"npm"}`).Result.Value; !strings.Contains(v, `"tree"`) {
		t.Errorf("the tree of an installed lock: %s", v)
	}
}

// TestPackagesOfAWrittenLockCountPerLanguage: an npm install into a lock
// the code wrote holds its npm packages to the quota; its Python ones,
// not fetched yet, are held to it when the Python guest loads them.
func TestPackagesOfAWrittenLockCountPerLanguage(t *testing.T) {
	idx := packagestest.NewIndex(t)
	idx.Add(t, packagestest.Wheel{Project: "bigpy", Version: "1.0", Files: map[string]string{"bigpy/__init__.py": "#" + strings.Repeat("a", 1_200_000)}})
	reg := packagestest.NewNPM(t)
	reg.Add(t, "small", "1.0.0", nil, map[string]string{"index.js": ""})
	ctx := context.Background()
	elsewhere := newTestManager(t, Config{Packages: newPackages(t, reg.URL(), idx.URL())}, newFakeFactory("javascript", "python"))
	lock := installedLock(t, elsewhere, "python", "bigpy")
	m := newTestManager(t, Config{MaxDiskMiB: 1, Packages: newPackages(t, reg.URL(), idx.URL())}, newFakeFactory("javascript", "python"))
	if _, err := m.WriteFile(ctx, "p", "a", LockPath, lock); err != nil {
		t.Fatal(err)
	}
	if _, err := m.InstallPackages(ctx, "p", "a", "javascript", []string{"small"}); err != nil {
		t.Fatal(err)
	}
	if v := *runLang(t, m, "p", "a", "python", `packages {"op":"python"}`).Result.Value; !strings.Contains(v, "workspace.max_disk_mib = 1") || strings.Contains(v, `"paths"`) {
		t.Errorf("the Python packages of a written lock past the quota: %s", v)
	}
}

// TestPackagesChargeStands: what a workspace's packages cost its quota
// and its principal's budget follows every change of any lock — installs,
// another workspace taking or dropping the same package, a reset, a fork,
// a deletion, the code rewriting the lock — and is measured again when
// execd starts.
func TestPackagesChargeStands(t *testing.T) {
	reg := packagestest.NewNPM(t)
	reg.Add(t, "big1", "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat("a", 600_000)})
	svc := newPackages(t, reg.URL(), "http://127.0.0.1:1/simple")
	dir := t.TempDir()
	m := newTestManager(t, Config{DataDir: dir, MaxDiskMiB: 1, Packages: svc}, newFakeFactory())
	ctx := context.Background()
	write := func(m *Manager, id string, n int) error {
		_, err := m.WriteFile(ctx, "p", id, "data.bin", make([]byte, n))
		return err
	}
	full := func(err error) bool {
		var we *Error
		return errors.As(err, &we) && we.Code == LimitReached && strings.Contains(we.Msg, "max_disk_mib")
	}
	if _, err := m.InstallPackages(ctx, "p", "a", "javascript", []string{"big1"}); err != nil {
		t.Fatal(err)
	}
	if err := write(m, "a", 500_000); !full(err) {
		t.Fatalf("500 kB of files beside 600 kB of packages only a uses, in 1 MiB: %v", err)
	}
	if _, err := m.InstallPackages(ctx, "p", "b", "javascript", []string{"big1"}); err != nil {
		t.Fatal(err)
	}
	if err := write(m, "a", 500_000); err != nil {
		t.Fatalf("the package is b's too, a pays nothing for it: %v", err)
	}
	// b drops it: a pays it again, above its quota, and its code's writes fail.
	if err := m.Reset(ctx, "p", "b", true); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "a", "write note.txt hello"); !out.DiskFull {
		t.Errorf("a write of a's code after b dropped the shared package: %+v", out.Result)
	}
	// A fork shares a's lock: a pays nothing again; deleting the fork
	// charges a once more.
	if _, err := m.Fork(ctx, "p", "a", "c"); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "a", "write note.txt hello"); out.DiskFull || out.Result.Status != StatusOK {
		t.Errorf("a write of a's code with a fork sharing its package: %+v", out.Result)
	}
	if err := m.Delete(ctx, "p", "c"); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "a", "write note.txt hello!"); !out.DiskFull {
		t.Errorf("a write of a's code after the fork's deletion: %+v", out.Result)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A new process measures the same charge from the locks on disk.
	m2 := newTestManager(t, Config{DataDir: dir, MaxDiskMiB: 1, Packages: svc}, newFakeFactory())
	if err := write(m2, "a", 500_001); !full(err) {
		t.Fatalf("after a restart, a's files and its package past the quota: %v", err)
	}
	lock, err := m2.ReadFile(ctx, "p", "a", LockPath, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Above its quota, a's code can still remove; it removes the lock,
	// and nothing is charged for packages.
	if out := run(t, m2, "p", "a", "rm .execd/packages.lock.json"); out.Result.Status != StatusOK {
		t.Fatalf("removing the lock: %+v", out.Result)
	}
	if err := write(m2, "a", 900_000); err != nil {
		t.Errorf("a's lock removed: %v", err)
	}
	// Written back by a file tool (a lock fits), it is charged at once.
	if _, err := m2.WriteFile(ctx, "p", "a", LockPath, lock.Data); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m2, "p", "a", "write note.txt x"); !out.DiskFull {
		t.Errorf("a write of a's code after the lock came back: %+v", out.Result)
	}

	// The principal's budget counts the same charge.
	m3 := newTestManager(t, Config{MaxPrincipalDiskMiB: 1, Packages: svc}, newFakeFactory())
	if _, err := m3.InstallPackages(ctx, "p", "d", "javascript", []string{"big1"}); err != nil {
		t.Fatal(err)
	}
	budgetFull := func(err error) bool {
		var we *Error
		return errors.As(err, &we) && we.Code == LimitReached && strings.Contains(we.Msg, "max_principal_disk_mib")
	}
	if err := write(m3, "e", 500_000); !budgetFull(err) {
		t.Fatalf("another workspace's files beside d's own package, past the principal's 1 MiB: %v", err)
	}
	if _, err := m3.InstallPackages(ctx, "p", "e", "javascript", []string{"big1"}); err != nil {
		t.Fatal(err)
	}
	// Shared by two of its workspaces, the package is still the
	// principal's alone: it takes its budget once.
	if err := write(m3, "e", 500_000); !budgetFull(err) {
		t.Errorf("the principal's package used by two of its workspaces, beside 500 kB: %v", err)
	}
	if err := write(m3, "e", 300_000); err != nil {
		t.Errorf("the package counted once, 300 kB beside it: %v", err)
	}
	// Another principal using it too: it is shared, and costs p nothing.
	if _, err := m3.InstallPackages(ctx, "q", "f", "javascript", []string{"big1"}); err != nil {
		t.Fatal(err)
	}
	if err := write(m3, "e", 900_000); err != nil {
		t.Errorf("the package used by another principal too: %v", err)
	}
}

// TestPackagesCacheKeptToItsSize: past packages.max_cache_bytes, the
// entries no lock uses leave the cache, least recently used first, then
// if that is not enough those only a checkpoint's lock uses (a restore
// fetches them again); those a workspace's lock uses stay.
func TestPackagesCacheKeptToItsSize(t *testing.T) {
	reg := packagestest.NewNPM(t)
	for _, n := range []string{"big1", "big2", "big3", "big4"} {
		reg.Add(t, n, "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat(n[3:], 600_000)})
	}
	cfg := config.Default().Packages
	cfg.NPMRegistry, cfg.PythonIndex, cfg.MaxCacheBytes = reg.URL(), "http://127.0.0.1:1/simple", 1_300_000
	svc, err := packages.New(cfg, t.TempDir(), packages.Options{Log: zap.NewNop(), EvictGrace: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, Config{Packages: svc}, newFakeFactory())
	ctx := context.Background()
	install := func(id, name string) {
		t.Helper()
		if _, err := m.InstallPackages(ctx, "p", id, "javascript", []string{name}); err != nil {
			t.Fatal(err)
		}
	}
	cached := func() string { // the names in the cache entries' meta.json
		t.Helper()
		metas, _ := filepath.Glob(filepath.Join(svc.CacheDir(), "sha*", "meta.json"))
		var got []string
		for _, p := range metas {
			var meta struct{ Name string }
			if b, err := os.ReadFile(p); err != nil || json.Unmarshal(b, &meta) != nil {
				t.Fatalf("%s: %v", p, err)
			}
			got = append(got, meta.Name)
		}
		sort.Strings(got)
		return strings.Join(got, " ")
	}
	restored := func(fetched bool) {
		t.Helper()
		if err := m.RestoreCheckpoint(ctx, "p", "b", "kept"); err != nil {
			t.Fatal(err)
		}
		asked := len(reg.Requests())
		if v := *run(t, m, "p", "b", `packages {"op":"npm"}`).Result.Value; !strings.Contains(v, `"tree"`) || strings.Contains(v, "error") {
			t.Errorf("the restored checkpoint's packages: %s", v)
		}
		if got := reg.Requests()[asked:]; (len(got) != 0) != fetched {
			t.Errorf("the restored checkpoint's packages: fetched %v, want fetched %v", got, fetched)
		}
	}
	install("a", "big1")
	install("b", "big2")
	if _, err := m.Checkpoint(ctx, "p", "b", "kept"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := m.Reset(ctx, "p", id, true); err != nil {
			t.Fatal(err)
		}
	}
	install("c", "big3") // past the size: big1, used by no lock, goes
	if got := cached(); got != "big2 big3" {
		t.Errorf("after a's and b's resets and c's install: cached %q, want big2 (b's checkpoint uses it) and big3", got)
	}
	restored(false)
	if err := m.Reset(ctx, "p", "b", true); err != nil {
		t.Fatal(err)
	}
	install("d", "big4") // past the size again: only big2 can go
	if got := cached(); got != "big3 big4" {
		t.Errorf("after d's install: cached %q, want c's and d's packages", got)
	}
	restored(true)
	if got := cached(); got != "big2 big3 big4" {
		t.Errorf("after the restore's view: cached %q, want all three in use", got)
	}
}

// TestPackagesChargeALinkedLock: a lock that is a link to another file of
// the workspace is read through the link, by the guest's loader and by
// the charge alike.
func TestPackagesChargeALinkedLock(t *testing.T) {
	reg := packagestest.NewNPM(t)
	reg.Add(t, "big1", "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat("a", 600_000)})
	svc := newPackages(t, reg.URL(), "http://127.0.0.1:1/simple")
	m := newTestManager(t, Config{MaxDiskMiB: 1, Packages: svc}, newFakeFactory())
	ctx := context.Background()
	lock := installedLock(t, m, "javascript", "big1") // its package stays in the cache
	if _, err := m.WriteFile(ctx, "p", "b", ".execd/real.json", lock); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "b", "ln real.json .execd/packages.lock.json"); out.Result.Status != StatusOK {
		t.Fatalf("ln: %+v", out.Result)
	}
	if _, err := m.WriteFile(ctx, "p", "b", "data.bin", make([]byte, 500_000)); err == nil {
		t.Error("500 kB of files beside the 600 kB package a linked lock names, under 1 MiB: written")
	}
}

// TestPackagesChargeALockRewrittenInPlace: the code rewriting the lock in
// place at the same size, and setting its times back, is seen all the
// same.
func TestPackagesChargeALockRewrittenInPlace(t *testing.T) {
	reg := packagestest.NewNPM(t)
	reg.Add(t, "big1", "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat("a", 600_000)})
	reg.Add(t, "tiny", "1.0.0", nil, map[string]string{"index.js": "//x"})
	m := newTestManager(t, Config{MaxDiskMiB: 1, Packages: newPackages(t, reg.URL(), "http://127.0.0.1:1/simple")}, newFakeFactory())
	ctx := context.Background()
	big, small := installedLock(t, m, "javascript", "big1"), installedLock(t, m, "javascript", "tiny")
	for len(small) < len(big) { // the same size: JSON allows trailing spaces
		small = append(small, ' ')
	}
	for len(big) < len(small) {
		big = append(big, ' ')
	}
	if _, err := m.WriteFile(ctx, "p", "a", ".execd/big.json", big); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteFile(ctx, "p", "a", LockPath, small); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "a", "overwrite .execd/big.json .execd/packages.lock.json"); out.Result.Status != StatusOK {
		t.Fatalf("overwrite: %+v", out.Result)
	}
	if _, err := m.WriteFile(ctx, "p", "a", "data.bin", make([]byte, 500_000)); err == nil {
		t.Error("500 kB of files beside the 600 kB package of a lock rewritten in place, under 1 MiB: written")
	}
}

// TestPackagesChargeAFailedView: a lock the code wrote, naming packages
// the cache lacks, is charged for what its view fetched even when the
// view then fails (here: packages.max_total_bytes, known only once the
// packages are unpacked).
func TestPackagesChargeAFailedView(t *testing.T) {
	reg := packagestest.NewNPM(t)
	var names []string
	for _, n := range []string{"g1", "g2", "g3", "g4", "g5"} {
		reg.Add(t, n, "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat(n, 120_000)})
		names = append(names, n)
	}
	ctx := context.Background()
	elsewhere := newTestManager(t, Config{Packages: newPackages(t, reg.URL(), "http://127.0.0.1:1/simple")}, newFakeFactory())
	lock := installedLock(t, elsewhere, "javascript", names...)
	cfg := config.Default().Packages
	cfg.NPMRegistry, cfg.PythonIndex, cfg.MaxPackageBytes, cfg.MaxTotalBytes = reg.URL(), "http://127.0.0.1:1/simple", 1_000_000, 1_000_000
	svc, err := packages.New(cfg, t.TempDir(), packages.Options{Log: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, Config{MaxDiskMiB: 1, Packages: svc}, newFakeFactory())
	if _, err := m.WriteFile(ctx, "p", "a", LockPath, lock); err != nil {
		t.Fatal(err)
	}
	if v := *run(t, m, "p", "a", `packages {"op":"npm"}`).Result.Value; !strings.Contains(v, "max_total_bytes") {
		t.Fatalf("the view of a lock past packages.max_total_bytes: %s", v)
	}
	if _, err := m.WriteFile(ctx, "p", "a", "data.bin", make([]byte, 700_000)); err == nil {
		t.Error("700 kB of files beside 600 kB of packages a failed view fetched, under 1 MiB: written")
	}
}
