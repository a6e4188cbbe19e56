package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"go.uber.org/zap"

	"execd/internal/guestfs"
)

// A principal's disk: everything it causes under data_dir/<principal>/ —
// its workspaces' files, the images of hibernated interpreters,
// checkpoints and forks — is charged to one guestfs.Budget of
// Config.MaxPrincipalDiskMiB, which counts data shared by hard links once
// (guestfs.OwnUsage). The guest's own writes are charged by the
// workspace's FS, in the Budget (openDisk); what the registry writes
// beside them goes through the functions below: what a checkpoint or a
// fork adds is taken before it appears (and refused when it does not
// fit), an image a hibernation writes is added whatever the Budget says
// (refusing it would lose the interpreter's state, which hibernation must
// not), and what a removal, a reset or a restore changes is measured
// around it. RATIONALE.md, "Why one disk budget per principal?".

// principalDisk is one principal's Budget, measured once when first used.
type principalDisk struct {
	once   sync.Once
	budget *guestfs.Budget
}

// budgetOf returns the Budget of the principal whose directory is pdir,
// measuring what the directory holds the first time, or nil when
// Config.MaxPrincipalDiskMiB is zero (nothing is counted).
func (m *Manager) budgetOf(pdir string) *guestfs.Budget {
	limit := int64(m.cfg.MaxPrincipalDiskMiB) << 20
	if limit <= 0 {
		return nil
	}
	m.mu.Lock()
	pd := m.disks[pdir]
	if pd == nil {
		pd = &principalDisk{}
		m.disks[pdir] = pd
	}
	m.mu.Unlock()
	pd.once.Do(func() {
		used, err := guestfs.OwnUsage(filepath.Join(m.cfg.DataDir, pdir))
		if err != nil {
			m.log.Warn("measure a principal's disk", zap.String("principal_dir", pdir), zap.Error(err))
		}
		m.principalPackages(pdir, func(pkgBytes int64) { pd.budget = guestfs.NewBudget(limit, used+pkgBytes) })
	})
	return pd.budget
}

// principalDiskFull is the refusal of what the principal's Budget cannot
// hold: what says what was refused.
func (m *Manager) principalDiskFull(b *guestfs.Budget, what string, need int64) *Error {
	return &Error{Code: LimitReached, Msg: fmt.Sprintf("%s would pass this token's disk budget "+
		"(workspace.max_principal_disk_mib = %d: %d MiB in use, counting every workspace's files, saved interpreters, checkpoints and forks; %d MiB more are needed); "+
		"nothing was changed: delete workspaces or files you no longer need, then try again",
		what, m.cfg.MaxPrincipalDiskMiB, b.Used()>>20, max((need+(1<<20)-1)>>20, 1))}
}

// takeDisk charges to w's principal what the trees at paths, just built
// and not yet in place, add to the disk, and returns it for a caller that
// fails to put them in place to give back; or refuses (nothing charged)
// when the Budget cannot hold it (what says what, for the refusal).
func (m *Manager) takeDisk(w *ws, what string, paths ...string) (int64, error) {
	b := m.budgetOf(w.key.pdir)
	if b == nil {
		return 0, nil
	}
	n, err := guestfs.OwnUsage(paths...)
	if err != nil {
		return 0, stateError("could not measure "+what, err)
	}
	if !b.Take(n) {
		return 0, m.principalDiskFull(b, what, b.Missing(n))
	}
	return n, nil
}

// addDisk charges what the files at paths, just written, add to the disk
// of w's principal, whatever the Budget's limit.
func (m *Manager) addDisk(w *ws, paths ...string) {
	if b := m.budgetOf(w.key.pdir); b != nil {
		n, _ := guestfs.OwnUsage(paths...)
		b.Add(n)
	}
}

// removeImage removes w's image of lang, if any, and gives its bytes back
// to the principal's Budget (those no checkpoint shares).
func (m *Manager) removeImage(w *ws, lang string) error {
	p := imagePath(w.state, lang)
	b := m.budgetOf(w.key.pdir)
	var n int64
	if b != nil {
		n, _ = guestfs.OwnUsage(p)
	}
	err := ignoreMissing(os.Remove(p))
	if err == nil {
		b.Add(-n)
	}
	return err
}

// metered runs op, which changes w's files or state directory as a whole
// (a reset, a deletion, a checkpoint's restore), and charges the change
// to the principal's Budget, and what it did to w's packages lock to the
// packages ledger. The caller holds w's turn.
func (m *Manager) metered(w *ws, op func() error) error {
	defer m.recheckPackages(w, false)
	b := m.budgetOf(w.key.pdir)
	if b == nil {
		return op()
	}
	before, _ := guestfs.OwnUsage(w.dir, w.state)
	err := op()
	after, _ := guestfs.OwnUsage(w.dir, w.state)
	b.Add(after - before)
	return err
}

// admitWorkspace runs admit, which checks w's directories and marks the
// record ready, within Config.MaxWorkspacesPerPrincipal when w is new.
// Workspaces are counted (workspaceIDs) under one lock, held until admit
// has marked w ready, so that calls at once cannot pass the cap together.
func (m *Manager) admitWorkspace(w *ws, admit func() error) error {
	if m.cfg.MaxWorkspacesPerPrincipal <= 0 || onDisk(w) {
		return admit()
	}
	m.createMu.Lock()
	defer m.createMu.Unlock()
	if err := m.roomForWorkspace(w.key.pdir); err != nil {
		return err
	}
	return admit()
}

// workspaceIDs returns the ids of the workspaces of the principal whose
// directory is pdir: those with a files or a state directory, and those
// held in memory, with live interpreters or admitted by a turn (ready) and
// not written yet. A workspace exists while it is in one of these places.
func (m *Manager) workspaceIDs(pdir string) map[string]bool {
	ids := map[string]bool{}
	m.mu.Lock()
	for k, w := range m.wss {
		if k.pdir == pdir && (w.ready || len(w.runners) > 0) {
			ids[k.id] = true
		}
	}
	m.mu.Unlock()
	pd := filepath.Join(m.cfg.DataDir, pdir)
	for _, d := range []string{pd, filepath.Join(pd, stateDirName)} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() && ValidateID(e.Name()) == nil {
				ids[e.Name()] = true
			}
		}
	}
	return ids
}

// onDisk reports whether w has a files or a state directory.
func onDisk(w *ws) bool { return isDir(w.dir) || isDir(w.state) }

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// roomForWorkspace refuses a new workspace of the principal whose
// directory is pdir when it has Config.MaxWorkspacesPerPrincipal already.
// The caller holds m.createMu.
func (m *Manager) roomForWorkspace(pdir string) error {
	if m.cfg.MaxWorkspacesPerPrincipal <= 0 {
		return nil
	}
	n := len(m.workspaceIDs(pdir))
	if n >= m.cfg.MaxWorkspacesPerPrincipal {
		return &Error{Code: LimitReached, Msg: fmt.Sprintf("this token has %d workspaces, the most workspace.max_workspaces_per_principal allows; "+
			"delete one you no longer need (delete_workspace) and try again; nothing was created", n)}
	}
	return nil
}
