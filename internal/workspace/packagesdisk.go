package workspace

import (
	"fmt"
	"path/filepath"

	"execd/internal/packages"
)

// A workspace's packages live in the shared cache, one copy for every
// workspace that uses them, not in the workspace's files. What they cost
// the workspace's disk quota (Config.MaxDiskMiB), and so its principal's
// disk budget (principal.go), is what is unique to it: the unpacked bytes
// of the cache entries its lock uses that no other workspace's lock (of
// any principal) uses. A package that another workspace uses too costs
// nothing. The charge is taken when an install writes the lock: an install
// whose lock, with the workspace's files and its unique packages, would
// pass the quota or the budget is refused, and nothing is installed.
// Between installs the Disk counts the workspace's files only: a package
// that becomes unique because another workspace dropped it is charged at
// this workspace's next install. RATIONALE.md, "Why are packages charged
// by what is unique to a workspace, at install?".

// uniquePackageBytes are the unpacked bytes of the cache entries lock
// uses that no lock of another workspace uses; w is the workspace whose
// lock it is to be.
func (m *Manager) uniquePackageBytes(w *ws, lock *packages.Lock) int64 {
	own := m.cfg.Packages.EntryBytes(lock)
	if len(own) == 0 {
		return 0
	}
	self := filepath.Clean(filepath.Join(w.dir, LockPath))
	others, _ := filepath.Glob(filepath.Join(m.cfg.DataDir, "*", "*", LockPath))
	for _, p := range others {
		if len(own) == 0 {
			break
		}
		if filepath.Clean(p) == self {
			continue
		}
		// A lock being written or not parsing uses nothing: the error is
		// on the side of charging.
		for _, a := range readLockFile(p).Addresses() {
			delete(own, a)
		}
	}
	var n int64
	for _, b := range own {
		n += b
	}
	return n
}

// packagesFit refuses an install whose lock (lockBytes long) and whose
// packages unique to w would pass w's disk quota or its principal's disk
// budget, naming the key.
func (m *Manager) packagesFit(w *ws, disk Disk, lock *packages.Lock, lockBytes int) error {
	budget := m.budgetOf(w.key.pdir)
	if m.cfg.diskQuota() <= 0 && budget == nil {
		return nil
	}
	unique := m.uniquePackageBytes(w, lock)
	n := int64(lockBytes) + unique
	if need, ok := disk.Fits(LockPath, n); !ok {
		return &Error{Code: LimitReached, Msg: fmt.Sprintf("these packages would pass the workspace's disk quota "+
			"(workspace.max_disk_mib = %d): its files use %d bytes, and the packages only this workspace uses take %d "+
			"(packages other workspaces use too are not counted); %d more bytes are needed; nothing was installed: "+
			"delete files or packages (reset_workspace with files drops them) you no longer need, then try again",
			m.cfg.MaxDiskMiB, disk.Used(), unique, need)}
	}
	if need, ok := disk.BudgetFits(LockPath, n); !ok {
		return m.principalDiskFull(budget, fmt.Sprintf("installing these packages (%d bytes only this workspace uses)", unique), need)
	}
	return nil
}
