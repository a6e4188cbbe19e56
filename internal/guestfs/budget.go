package guestfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// Budget is a byte limit that several trees share: a principal's disk,
// over its workspaces' files and the state the registry keeps beside them
// (images, checkpoints, forks). Its usage counts data once however many
// names share it: a hard link costs its entry, and the bytes are charged
// while any name of them is left. [OwnUsage] is that formula for whole
// trees; every FS made with [NewInBudget] charges its changes to the
// Budget with it too, and refuses what the Budget cannot hold exactly as
// what its own quota cannot (the host API then says syscall.ENOSPC,
// where the quota says syscall.EDQUOT).
//
// A Budget is safe for concurrent use. Its usage is an estimate kept by
// deltas from its measurement (OwnUsage of the trees at its creation):
// changes made at once to two names of the same data may both see the
// data shared, and then neither gives it back; the estimate errs on the
// side of charging, and is measured anew when the process starts.
type Budget struct {
	limit   int64 // <= 0: unlimited (usage is still counted)
	mu      sync.Mutex
	used    int64
	refused atomic.Int64
}

// NewBudget returns a Budget of limit bytes (<= 0: unlimited) of which
// used are in use.
func NewBudget(limit, used int64) *Budget { return &Budget{limit: limit, used: max(used, 0)} }

// Limit is the Budget's limit in bytes (<= 0: unlimited).
func (b *Budget) Limit() int64 { return b.limit }

// Used is the bytes charged now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Refused counts the charges the Budget refused.
func (b *Budget) Refused() int64 { return b.refused.Load() }

// Take charges n bytes if they fit, and reports whether they did; a
// change that frees bytes (n <= 0) is always applied. A nil Budget takes
// everything.
func (b *Budget) Take(n int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > 0 && Excess(b.limit, b.used, n) > 0 {
		b.refused.Add(1)
		return false
	}
	b.used = max(b.used+n, 0)
	return true
}

// Add charges n bytes (n may be negative) whether or not they fit: for
// what is already on disk, or must be (an interpreter saved so as not to
// lose its state). A nil Budget ignores it.
func (b *Budget) Add(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used = max(b.used+n, 0)
	b.mu.Unlock()
}

// Missing is by how many bytes n more would pass the limit (0: they fit).
func (b *Budget) Missing(n int64) int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return Excess(b.limit, b.used, n)
}

// OwnUsage is what the trees at paths (directories or files) cost a
// Budget on their own: [entryCost] per entry below a directory root (the
// root itself is not charged, as in [Usage]) or per file root, plus the
// size of each regular file's data once, and only if every name of that
// data is among them — data that another name outside still holds is not
// freed by removing them, nor new when they were made by linking to it.
// So the charge of a checkpoint or a fork built of hard links is its
// entries and its unshared data, and removing a workspace gives back what
// only it held. Paths that do not exist cost nothing.
func OwnUsage(paths ...string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	type seen struct {
		names, nlink uint64
		size         int64
	}
	files := map[inode]*seen{}
	var total int64
	visit := func(p string, d fs.DirEntry) {
		total += entryCost
		if !d.Type().IsRegular() {
			return
		}
		info, err := d.Info()
		if err != nil {
			return
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok { // no link counts: charge the bytes
			total += info.Size()
			return
		}
		k := inode{uint64(st.Dev), uint64(st.Ino)}
		s := files[k]
		if s == nil {
			s = &seen{nlink: uint64(st.Nlink), size: info.Size()}
			files[k] = s
		}
		s.names++
	}
	for _, root := range paths {
		info, err := os.Lstat(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if !info.IsDir() {
			visit(root, fs.FileInfoToDirEntry(info))
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if p != root {
				visit(p, d)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	for _, s := range files {
		if s.names >= s.nlink {
			total += s.size
		}
	}
	return total, nil
}
