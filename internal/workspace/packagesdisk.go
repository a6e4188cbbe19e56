package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

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
// pass the quota or the budget is refused, and nothing is installed. A
// lock no install of this process wrote (the code wrote it, or execd
// restarted) is checked the same way, once, when the guest first asks for
// its tree (which fetches what the cache lacks): refused, its packages do
// not load.
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
	m.lockAddrs.others(filepath.Join(m.cfg.DataDir, "*", "*", LockPath), self, func(addrs []string) bool {
		for _, a := range addrs {
			delete(own, a)
		}
		return len(own) > 0
	})
	var n int64
	for _, b := range own {
		n += b
	}
	return n
}

// lockAddrCache keeps the cache addresses of each workspace's lock by
// path, with the size and time of the file they were read from, so that
// an install reads again only the locks that changed since the last one
// (a lock may be 16 MiB, and there is one per workspace). The zero value
// is empty and ready.
type lockAddrCache struct {
	mu    sync.Mutex
	locks map[string]lockAddrs
}

type lockAddrs struct {
	size  int64
	mod   time.Time
	addrs []string
}

// others calls f with the addresses of every lock matching pattern but
// self, until f returns false. A lock being written, or one that does not
// parse, uses nothing: the error is on the side of charging. Locks that
// are gone are forgotten.
func (c *lockAddrCache) others(pattern, self string, f func(addrs []string) bool) {
	paths, _ := filepath.Glob(pattern)
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]lockAddrs, len(paths))
	more := true
	for _, p := range paths {
		p = filepath.Clean(p)
		info, err := os.Stat(p)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		e, ok := c.locks[p]
		if !ok || e.size != info.Size() || !e.mod.Equal(info.ModTime()) {
			e = lockAddrs{size: info.Size(), mod: info.ModTime(), addrs: readLockFile(p).Addresses()}
		}
		seen[p] = e
		if more && p != self {
			more = f(e.addrs)
		}
	}
	c.locks = seen
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

// acceptedLocks are, by workspace directory and ecosystem ("npm" or
// "python", as the guest asks for a view), the generation of the lock
// whose packages of that ecosystem were last held to the workspace's
// disk quota: by the install that wrote it, or by the guest's first view
// of it (each view fetches only its ecosystem's packages). The zero value
// is empty and ready.
type acceptedLocks struct {
	mu   sync.Mutex
	gens map[[2]string]string
}

func (a *acceptedLocks) is(dir, eco, gen string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gens[[2]string{dir, eco}] == gen
}

func (a *acceptedLocks) set(dir, eco, gen string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gens == nil {
		a.gens = map[[2]string]string{}
	}
	a.gens[[2]string{dir, eco}] = gen
}
