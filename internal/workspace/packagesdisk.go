package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"execd/internal/packages"
)

// A workspace's packages live in the shared cache, one copy for every
// workspace that uses them, not in the workspace's files. What they cost
// the workspace's disk quota (Config.MaxDiskMiB), and so its principal's
// disk budget (principal.go), is what is unique to it: the unpacked bytes
// of the cache entries its lock uses that no other workspace's lock (of
// any principal) uses. A package that another workspace uses too costs
// nothing. The charge stands: the ledger below follows every workspace's
// lock, and whenever one changes — an install, the code writing or
// removing it, a file tool, a fork, a restore, a reset, a deletion — the
// charges of every workspace the change makes an entry unique to, or
// shared by, move with it, on their open Disks (guestfs.FS.SetExtra) and
// their principals' Budgets. A workspace that a change leaves above its
// quota (another workspace dropped the last other use of its packages) is
// charged all the same: its writes fail until it frees room. The ledger
// is read from the locks on disk when first needed after the process
// starts. An install is refused when its lock would pass the quota or the
// budget; a lock no install of this process wrote (the code wrote it, or
// execd restarted) is held to them once more when the guest first asks
// for its tree, which fetches what the cache lacks: refused, its packages
// do not load. RATIONALE.md, "Why are packages charged by what is unique
// to a workspace?".

// pkgLedger is which cache entries each workspace's lock uses, and what
// each workspace and each principal is charged for them: a workspace the
// entries no other workspace's lock uses, a principal the entries no
// other principal's workspaces use (so that forking a workspace, or
// installing the same package in two, does not make a principal's
// packages free). Its mutex is taken before Manager.mu, never while
// holding it.
type pkgLedger struct {
	mu         sync.Mutex
	loaded     bool
	locks      map[key]*lockUse            // the workspaces with a lock
	users      map[string]map[key]struct{} // by cache address: whose locks use it
	sizes      map[string]int64            // unpacked bytes by address, of entries found in the cache
	unsized    map[string]bool             // addresses in use the cache lacked when last asked (resizeLocked)
	principals map[string]int64            // by principal directory: its charge, when not 0
	ops        int                         // installs and views under way (beginPackages)
}

// lockUse is one workspace's lock as the ledger last read it.
type lockUse struct {
	file   lockStamp
	addrs  []string
	charge int64 // the bytes of addrs no other lock uses
}

// lockStamp tells a lock file's versions apart without reading it; the
// zero value is no lock. The change time is in it because the guest can
// set the modification time back (utimes) but not the change time.
type lockStamp struct {
	size  int64
	mod   time.Time
	ino   uint64
	ctime int64
}

// stampLock is the stamp of the lock at p, through a link as the guest's
// view reads it (a link in a workspace points only within it): zero when
// there is none, or it is not a regular file (nothing then reads it as a
// lock).
func stampLock(p string) lockStamp {
	info, err := os.Stat(p)
	if err != nil || !info.Mode().IsRegular() {
		return lockStamp{}
	}
	s := lockStamp{size: info.Size(), mod: info.ModTime()}
	s.ino, s.ctime = inodeTimes(info)
	return s
}

// loadLedgerLocked reads every workspace's lock on disk into the ledger,
// once. Nothing is charged anywhere yet: Disks and Budgets opened
// afterwards take their charges from the ledger. The caller holds l.mu.
func (m *Manager) loadLedgerLocked() {
	l := &m.pkgs
	if l.loaded {
		return
	}
	l.loaded = true
	l.locks, l.users, l.sizes, l.unsized, l.principals = map[key]*lockUse{}, map[string]map[key]struct{}{}, map[string]int64{}, map[string]bool{}, map[string]int64{}
	paths, _ := filepath.Glob(filepath.Join(m.cfg.DataDir, "*", "*", LockPath))
	for _, p := range paths {
		rel, err := filepath.Rel(m.cfg.DataDir, p)
		if err != nil {
			continue
		}
		parts := strings.SplitN(rel, string(filepath.Separator), 3)
		k := key{pdir: parts[0], id: parts[1]}
		if ValidateID(k.id) != nil || strings.HasPrefix(k.pdir, tmpPrefix) {
			continue // a fork or a restore being built, not a workspace
		}
		if s := stampLock(p); s != (lockStamp{}) {
			m.setLockLocked(k, s, readLockFile(p).Addresses())
		}
	}
}

// ledgerChange is what one lock's change moved: the workspaces whose
// charge changed, and by how much each principal's did.
type ledgerChange struct {
	workspaces map[key]bool
	principals map[string]int64
}

// setLockLocked records that k's lock (stamped s) uses addrs (none: k has
// no lock), and recomputes the charge of every workspace and principal
// this can change. The caller holds l.mu.
func (m *Manager) setLockLocked(k key, s lockStamp, addrs []string) ledgerChange {
	l := &m.pkgs
	old := l.locks[k]
	var before int64
	// The workspaces whose charge may move: those for which an entry k
	// takes or drops becomes shared or unique; the principals: every
	// principal using such an entry.
	near := map[key]bool{k: true}
	pdirs := map[string]bool{k.pdir: true}
	// An entry's other users matter when it is unique to one of them,
	// or to one principal, before or after.
	others := func(us map[key]struct{}) {
		if len(us) == 1 {
			for o := range us {
				near[o] = true
			}
		}
		if p, one := onePrincipal(us); one {
			pdirs[p] = true
		}
	}
	if old != nil {
		before = old.charge
		for _, a := range old.addrs {
			us := l.users[a]
			delete(us, k)
			others(us)
			if len(us) == 0 {
				delete(l.users, a)
				delete(l.unsized, a)
			}
		}
	}
	for _, a := range addrs {
		us := l.users[a]
		if us == nil {
			us = map[key]struct{}{}
			l.users[a] = us
		}
		others(us)
		us[k] = struct{}{}
		m.cfg.Packages.Keep(a)
		if !m.learnSizeLocked(a) {
			l.unsized[a] = true
		}
	}
	if len(addrs) == 0 {
		delete(l.locks, k)
	} else {
		l.locks[k] = &lockUse{file: s, addrs: addrs, charge: before}
	}
	ch := l.recomputeLocked(near, pdirs)
	if l.locks[k] == nil && before != 0 {
		ch.workspaces[k] = true
	}
	return ch
}

// resizeLocked asks the cache again for the entries in use it lacked
// (a lock names packages before a view or an install fetches them, and
// a fetch may end in a failure), and recomputes the charges of their
// users. The caller holds l.mu.
func (m *Manager) resizeLocked() ledgerChange {
	l := &m.pkgs
	near, pdirs := map[key]bool{}, map[string]bool{}
	for a := range l.unsized {
		if !m.learnSizeLocked(a) {
			continue
		}
		delete(l.unsized, a)
		for o := range l.users[a] {
			near[o], pdirs[o.pdir] = true, true
		}
	}
	return l.recomputeLocked(near, pdirs)
}

// learnSizeLocked makes sure the ledger knows the bytes of the entry at
// a, asking the cache if need be, and reports whether it does (false:
// the cache lacks the entry). The caller holds l.mu.
func (m *Manager) learnSizeLocked(a string) bool {
	l := &m.pkgs
	if _, ok := l.sizes[a]; ok {
		return true
	}
	n, ok := m.cfg.Packages.EntrySize(a)
	if ok {
		l.sizes[a] = n
	}
	return ok
}

// recomputeLocked computes again the charges of the workspaces near and
// the principals pdirs. The caller holds l.mu.
func (l *pkgLedger) recomputeLocked(near map[key]bool, pdirs map[string]bool) ledgerChange {
	ch := ledgerChange{workspaces: map[key]bool{}, principals: map[string]int64{}}
	for o := range near {
		u := l.locks[o]
		if u == nil {
			continue
		}
		was := u.charge
		u.charge = l.uniqueLocked(o, u.addrs)
		if u.charge != was {
			ch.workspaces[o] = true
		}
	}
	for pdir := range pdirs {
		n := l.principalChargeLocked(pdir, key{}, nil)
		if d := n - l.principals[pdir]; d != 0 {
			ch.principals[pdir] = d
		}
		if n == 0 {
			delete(l.principals, pdir)
		} else {
			l.principals[pdir] = n
		}
	}
	return ch
}

// onePrincipal is the principal directory of every workspace of us, if
// they are all of one.
func onePrincipal(us map[key]struct{}) (string, bool) {
	p := ""
	for o := range us {
		if p != "" && o.pdir != p {
			return "", false
		}
		p = o.pdir
	}
	return p, p != ""
}

// uniqueLocked is the bytes of the entries among addrs that no lock but
// k's uses (whether or not k's does now), as far as the cache knows
// them. The caller holds l.mu.
func (l *pkgLedger) uniqueLocked(k key, addrs []string) int64 {
	var n int64
	for _, a := range addrs {
		us := l.users[a]
		if _, mine := us[k]; len(us) > 1 || (len(us) == 1 && !mine) {
			continue
		}
		n += l.sizes[a]
	}
	return n
}

// principalChargeLocked is the bytes of the entries the workspaces of
// pdir use that no other principal's workspace uses; with k's lock taken
// as addrs instead when k is not the zero key (k is of pdir). The caller
// holds l.mu.
func (l *pkgLedger) principalChargeLocked(pdir string, k key, addrs []string) int64 {
	mine := map[string]bool{}
	for o, u := range l.locks {
		if o.pdir == pdir && o != k {
			for _, a := range u.addrs {
				mine[a] = true
			}
		}
	}
	for _, a := range addrs {
		mine[a] = true
	}
	var n int64
	for a := range mine {
		only := true
		for o := range l.users[a] {
			if o.pdir != pdir {
				only = false
				break
			}
		}
		if only {
			n += l.sizes[a]
		}
	}
	return n
}

// chargeLocked is what k is charged now. The caller holds l.mu.
func (l *pkgLedger) chargeLocked(k key) int64 {
	if u := l.locks[k]; u != nil {
		return u.charge
	}
	return 0
}

// applyLocked puts a change in place: each changed workspace's whole
// charge on its open Disk, each principal's change on its Budget, if
// measured. The caller holds l.mu.
func (m *Manager) applyLocked(ch ledgerChange) {
	for k := range ch.workspaces {
		m.mu.Lock()
		var disk Disk
		if w := m.wss[k]; w != nil {
			disk = w.disk
		}
		m.mu.Unlock()
		if disk != nil {
			disk.SetExtra(m.pkgs.chargeLocked(k))
		}
	}
	for pdir, d := range ch.principals {
		m.mu.Lock()
		pd := m.disks[pdir]
		m.mu.Unlock()
		if pd != nil && pd.budget != nil {
			pd.budget.Add(d)
		}
	}
}

// beginPackages marks an install or a view under way, and returns its
// end. When the last one under way ends, with nothing under way that
// could be about to use an entry another fetched: the sizes of entries
// that were fetched after a lock named them are charged
// (resizeLocked); the entries this process fetched that no lock uses —
// fetched by an install that was refused or failed — are removed, as
// they are charged to no one and would let refused installs fill the
// host's disk; and past packages.max_cache_bytes the least recently used
// entries no lock uses go, those only a checkpoint's lock uses last. An
// install or a view tells the ledger of its lock before it ends.
func (m *Manager) beginPackages() (end func()) {
	l := &m.pkgs
	l.mu.Lock()
	l.ops++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.ops--; l.ops > 0 {
			return
		}
		m.loadLedgerLocked()
		m.applyLocked(m.resizeLocked())
		var onDisk map[string]int
		rank := func(a string) int {
			if len(l.users[a]) > 0 {
				return packages.NeverEvict
			}
			if onDisk == nil {
				onDisk = m.locksOnDisk()
			}
			return onDisk[a]
		}
		n, b := m.cfg.Packages.DiscardUnkept(func(a string) bool { return rank(a) != packages.EvictFirst })
		if n > 0 {
			m.log.Info("removed packages no workspace kept", zap.Int("entries", n), zap.Int64("bytes", b))
		}
		n, b, total := m.cfg.Packages.Evict(rank)
		if n > 0 {
			m.log.Info("removed the least recently used packages no workspace uses (packages.max_cache_bytes)",
				zap.Int("entries", n), zap.Int64("bytes", b), zap.Int64("cache_bytes", total))
		}
	}
}

// locksOnDisk ranks for eviction the cache addresses the locks on disk
// use: NeverEvict for those of workspaces (read again, for another
// executor sharing data_dir may have written them) and of forks and
// restores being built, EvictLast for those only checkpoints use. A lock
// that does not parse uses nothing.
func (m *Manager) locksOnDisk() map[string]int {
	out := map[string]int{}
	for _, l := range []struct {
		pattern string
		rank    int
	}{
		{filepath.Join(m.cfg.DataDir, "*", "*", LockPath), packages.NeverEvict},
		{filepath.Join(m.cfg.DataDir, "*", stateDirName, "*", checkpointDirName, "*", filesDirName, LockPath), packages.EvictLast},
	} {
		paths, _ := filepath.Glob(l.pattern)
		for _, p := range paths {
			for _, a := range readLockFile(p).Addresses() {
				out[a] = max(out[a], l.rank)
			}
		}
	}
	return out
}

// recheckPackages reads w's lock again if it changed since the ledger
// read it (always with force: the cache may have gained its entries), and
// moves the charges it changes. The caller holds w's turn.
func (m *Manager) recheckPackages(w *ws, force bool) {
	if m.cfg.Packages == nil {
		return
	}
	l := &m.pkgs
	l.mu.Lock()
	defer l.mu.Unlock()
	m.recheckLocked(w, force)
}

// recheckLocked is recheckPackages holding the ledger's mutex.
func (m *Manager) recheckLocked(w *ws, force bool) {
	l := &m.pkgs
	m.loadLedgerLocked()
	p := filepath.Join(w.dir, LockPath)
	s := stampLock(p)
	var was lockStamp
	if u := l.locks[w.key]; u != nil {
		was = u.file
	}
	if !force && s == was {
		return
	}
	var addrs []string
	if s != (lockStamp{}) {
		addrs = readLockFile(p).Addresses()
	}
	m.applyLocked(m.setLockLocked(w.key, s, addrs))
}

// settlePackages ends a turn of w: when a change was made through its
// Disk since the ledger last looked, the ledger looks at its lock again.
// A run that wrote no file costs one comparison. (What replaces the
// directory as a whole tells the ledger itself: metered, Fork.)
func (m *Manager) settlePackages(w *ws) {
	if m.cfg.Packages == nil {
		return
	}
	m.mu.Lock()
	disk, seen := w.disk, w.pkgSeen
	m.mu.Unlock()
	if disk == nil {
		return
	}
	changes := disk.Changes()
	if changes == seen {
		return
	}
	m.recheckPackages(w, false)
	m.mu.Lock()
	if w.disk == disk {
		w.pkgSeen = changes
	}
	m.mu.Unlock()
}

// openCharged opens w's Disk with its packages' charge on it, and makes
// it w's. The ledger's mutex is held from the charge to the Disk being
// w's, so that no change of the charge falls between.
func (m *Manager) openCharged(w *ws) (Disk, error) {
	disk, err := openDisk(w, m.cfg.diskQuota(), m.budgetOf(w.key.pdir), m.spares, m.langs.offered())
	if err != nil {
		return nil, err
	}
	if m.cfg.Packages == nil {
		m.mu.Lock()
		w.disk = disk
		m.mu.Unlock()
		return disk, nil
	}
	l := &m.pkgs
	l.mu.Lock()
	defer l.mu.Unlock()
	m.loadLedgerLocked()
	disk.SetExtra(l.chargeLocked(w.key))
	m.mu.Lock()
	w.disk, w.pkgSeen = disk, 0
	m.mu.Unlock()
	return disk, nil
}

// principalPackages calls set, under the ledger's mutex, with what the
// ledger charges the principal whose directory is pdir: for a Budget
// being measured, which no change may then pass by.
func (m *Manager) principalPackages(pdir string, set func(pkgBytes int64)) {
	if m.cfg.Packages == nil {
		set(0)
		return
	}
	l := &m.pkgs
	l.mu.Lock()
	defer l.mu.Unlock()
	m.loadLedgerLocked()
	set(l.principals[pdir])
}

// fitPackages runs op holding the ledger's mutex, with fit: a check
// that refuses a lock (lockBytes long) that w is to have, or has, when
// it, w's files and the packages only w would use with it would pass
// w's disk quota, or its principal's disk budget with the packages only
// the principal's workspaces would use, naming the key. op writes or
// reads the lock and tells the ledger (recheckLocked) before the mutex
// is let go, so that two installs at once cannot both fit where only one
// does.
func (m *Manager) fitPackages(w *ws, disk Disk, op func(fit func(lock *packages.Lock, lockBytes int) error)) {
	budget := m.budgetOf(w.key.pdir) // before the mutex: measuring it takes the mutex
	l := &m.pkgs
	l.mu.Lock()
	defer l.mu.Unlock()
	m.loadLedgerLocked()
	op(func(lock *packages.Lock, lockBytes int) error {
		if m.cfg.diskQuota() <= 0 && budget == nil {
			return nil
		}
		addrs := lock.Addresses()
		for _, a := range addrs {
			m.learnSizeLocked(a)
		}
		unique := l.uniqueLocked(w.key, addrs) // what w would pay with this lock
		current := l.chargeLocked(w.key)
		principalNow, principalWith := l.principals[w.key.pdir], l.principalChargeLocked(w.key.pdir, w.key, addrs)
		n := int64(lockBytes) + unique - current // the Disk counts current already
		if need, ok := disk.Fits(LockPath, n); !ok {
			return &Error{Code: LimitReached, Msg: fmt.Sprintf("these packages would pass the workspace's disk quota "+
				"(workspace.max_disk_mib = %d): its files and packages use %d bytes, and the packages only this workspace would use take %d "+
				"(packages other workspaces use too are not counted); %d more bytes are needed; nothing was installed: "+
				"delete files or packages (reset_workspace with files drops them) you no longer need, then try again",
				m.cfg.MaxDiskMiB, disk.Used(), unique, need)}
		}
		if need, ok := disk.BudgetFits(LockPath, int64(lockBytes)+principalWith-principalNow); !ok {
			return m.principalDiskFull(budget, fmt.Sprintf("installing these packages (%d bytes of packages only this token's workspaces would use)", principalWith), need)
		}
		return nil
	})
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
