// Package guestfs is the file system a guest sees at /workspace: one host
// directory, confined (no path, link or ".." leads out of it), under a byte
// quota over the whole tree, with a log of the paths a run changed.
//
// An [FS] is two things at once: a wazero experimental sys.FS, which the
// worker mounts, and a small host-side API in plain Go types (ReadFile,
// WriteFile, Info, Fits, Used, Refused, Track, Touched, Acquire, Release),
// through which the workspace registry drives it without knowing wazero.
// Both go through the same confinement and the same quota. Files shared
// with another tree (CopyTree, ShareFile) are unshared before any change
// made through an FS, so every copy behaves as independent.
package guestfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	wsys "github.com/tetratelabs/wazero/sys"
)

// FS is a wazero file system rooted at one host directory. It confines
// every path to that directory (confine.go) and enforces a byte quota on
// the whole tree (quota.go).
//
// An FS is safe for concurrent use. Share one FS between all the runners of
// a workspace so the quota is per workspace, not per runner.
type FS struct {
	dir    string
	inner  sys.FS
	limit  int64   // <= 0: unlimited
	budget *Budget // shared with other trees; nil: none

	// handles guards root, the os.Root that confinement resolves through:
	// opened on demand and closed by Release, so that a workspace idle for
	// a while holds no descriptor (see also rootDir).
	handles sync.Mutex
	root    *os.Root // nil until needed, or after Release

	mu      sync.Mutex // serialises accounting with the operation it accounts for
	used    int64      // the tree's charge, and extra
	extra   int64      // charged beside the tree (SetExtra)
	changes uint64     // changes made through the FS (Changes)
	log     *touchLog  // the paths changed since Track; nil when not tracking

	refused       atomic.Int64
	budgetRefused atomic.Int64
	closed        atomic.Bool

	// mkdir makes the directory of an FS made by NewLazy (nil: New's,
	// which exists); made is set once it exists (lazy.go).
	mkdir func() error
	made  atomic.Bool
	// probed: Acquire of the directory not made found a descriptor left,
	// which stands for the root until Release (confine.go).
	probed atomic.Bool
}

var _ sys.FS = (*FS)(nil)

// New returns an FS for dir, which must exist, with its usage measured by
// walking the tree (Usage). limitBytes <= 0 means no quota; paths are
// confined either way. Close the result when no runner uses it any more.
func New(dir string, limitBytes int64) (*FS, error) { return NewInBudget(dir, limitBytes, nil) }

// NewInBudget is New for a tree whose changes are charged to b as well
// (nil: none), which already counts what the tree holds (see [Budget]).
func NewInBudget(dir string, limitBytes int64, b *Budget) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(abs); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", abs)
	}
	used, err := Usage(abs)
	if err != nil {
		return nil, err
	}
	q := &FS{dir: abs, inner: sysfs.DirFS(abs), limit: limitBytes, budget: b, used: used}
	q.made.Store(true)
	return q, nil
}

// String returns the host directory.
func (q *FS) String() string { return q.dir }

// Close releases every handle of the FS. Files already open stay usable;
// new path operations fail with EBADF. Close is idempotent.
func (q *FS) Close() error {
	if q.closed.Swap(true) {
		return nil
	}
	q.Release()
	return nil
}

// writeFlags are the open flags that let the guest change a file.
const writeFlags = sys.O_WRONLY | sys.O_RDWR | sys.O_APPEND | sys.O_TRUNC

// OpenFile implements sys.FS. What is neither a regular file, a directory
// nor a link (a FIFO, a device, a socket: only the host can make one here)
// is not opened but refused with ENOTSUP: opening a FIFO waits for its
// other end, which would hang the run, and the Close of the daemon behind
// it, in a system call no interrupt reaches.
func (q *FS) OpenFile(p string, flag sys.Oflag, perm fs.FileMode) (sys.File, sys.Errno) {
	follow := flag&sys.O_NOFOLLOW == 0
	c, errno := q.checked(p, follow)
	if errno != 0 {
		return nil, errno
	}
	if c == "." && flag == sys.O_RDONLY {
		return q.newRootDir(), 0 // the preopen's handle, see rootDir
	}
	if q.special(c, follow) {
		return nil, sys.ENOTSUP
	}
	if c == "." && flag&(writeFlags|sys.O_CREAT) != 0 && q.unmade() {
		return nil, sys.EISDIR // as the empty directory it reads as would say
	}
	if flag&writeFlags == 0 && flag&sys.O_CREAT == 0 {
		f, errno := q.inner.OpenFile(c, flag, perm)
		if errno == sys.ENOENT && c == "." && q.unmade() {
			return q.newRootDir(), 0
		}
		if errno != 0 {
			return nil, errno
		}
		return &file{File: f, q: q, path: c, flag: flag}, 0
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	if flag&writeFlags != 0 {
		if errno := q.unshare(c, flag&sys.O_TRUNC != 0); errno != 0 {
			return nil, errno
		}
	}
	before, exists := q.inner.Stat(c)
	var delta int64
	switch {
	case exists != 0 && flag&sys.O_CREAT != 0:
		delta = entryCost // a new entry
	case exists == 0 && flag&sys.O_TRUNC != 0 && before.Mode.IsRegular():
		delta = -before.Size
	}
	var f sys.File
	if errno := q.charged(delta, func() (errno sys.Errno) {
		f, errno = q.inner.OpenFile(c, flag, perm)
		return errno
	}); errno != 0 {
		return nil, errno
	}
	q.touch(c)
	return &file{File: f, q: q, path: c, flag: flag}, 0
}

// special reports whether p names (through its links when follow) a file
// that is not regular, a directory or a link.
func (q *FS) special(p string, follow bool) bool {
	stat := q.inner.Lstat
	if follow {
		stat = q.inner.Stat
	}
	st, errno := stat(p)
	return errno == 0 && st.Mode.Type()&^(fs.ModeDir|fs.ModeSymlink) != 0
}

// Lstat implements sys.FS.
func (q *FS) Lstat(p string) (wsys.Stat_t, sys.Errno) {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	if c == "." {
		return q.rootStat()
	}
	return q.inner.Lstat(c)
}

// Stat implements sys.FS.
func (q *FS) Stat(p string) (wsys.Stat_t, sys.Errno) {
	c, errno := q.checked(p, true)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	if c == "." {
		return q.rootStat()
	}
	return q.inner.Stat(c)
}

// Mkdir implements sys.FS.
func (q *FS) Mkdir(p string, perm fs.FileMode) sys.Errno {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.charged(entryCost, func() sys.Errno { return q.inner.Mkdir(c, perm) })
}

// Chmod implements sys.FS. A file shared with a checkpoint or a fork is
// unshared first: the mode belongs to the data.
func (q *FS) Chmod(p string, perm fs.FileMode) sys.Errno {
	c, errno := q.checked(p, true)
	if errno != 0 {
		return errno
	}
	if c == "." {
		if errno := q.make(); errno != 0 {
			return errno
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if errno := q.unshare(c, false); errno != 0 {
		return errno
	}
	return q.inner.Chmod(c, perm)
}

// Rename implements sys.FS. A replaced destination gives its charge back.
func (q *FS) Rename(from, to string) sys.Errno {
	f, errno := q.checked(from, false)
	if errno != 0 {
		return errno
	}
	t, errno := q.checked(to, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var freed, freedData int64
	if _, errno := q.inner.Lstat(f); errno == 0 {
		freed, freedData = q.entryCharge(t)
	}
	if errno := q.chargedAs(-freed, -freedData, func() sys.Errno { return q.inner.Rename(f, t) }); errno != 0 {
		return errno
	}
	q.touch(t)
	return 0
}

// Rmdir implements sys.FS.
func (q *FS) Rmdir(p string) sys.Errno {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.charged(-entryCost, func() sys.Errno { return q.inner.Rmdir(c) })
}

// Unlink implements sys.FS.
func (q *FS) Unlink(p string) sys.Errno {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	freed, freedData := q.entryCharge(c)
	return q.chargedAs(-freed, -freedData, func() sys.Errno { return q.inner.Unlink(c) })
}

// Link implements sys.FS. The new name is charged like a copy against the
// quota, and as an entry against the Budget, which counts data once.
func (q *FS) Link(oldPath, newPath string) sys.Errno {
	o, errno := q.checked(oldPath, false)
	if errno != 0 {
		return errno
	}
	n, errno := q.checked(newPath, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	cost, _ := q.entryCharge(o)
	if cost == 0 {
		cost = entryCost
	}
	if errno := q.chargedAs(cost, entryCost, func() sys.Errno { return q.inner.Link(o, n) }); errno != 0 {
		return errno
	}
	q.touch(n)
	return 0
}

// Symlink implements sys.FS. The target must be a relative path that only
// descends (no "..", not absolute): such a link, seen from the directory
// holding it, can only name something inside the workspace, whatever other
// links it passes through, so no host tool that follows links is led out of
// the workspace by one the guest made. Other targets fail with EPERM.
// Following links is confined as well (confine.go), for links that reached
// the directory another way.
func (q *FS) Symlink(oldPath, linkName string) sys.Errno {
	if !descendingTarget(oldPath) {
		return sys.EPERM
	}
	l, errno := q.checked(linkName, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.charged(entryCost, func() sys.Errno { return q.inner.Symlink(oldPath, l) })
}

// Readlink implements sys.FS.
func (q *FS) Readlink(p string) (string, sys.Errno) {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return "", errno
	}
	return q.inner.Readlink(c)
}

// Utimens implements sys.FS. A file shared with a checkpoint or a fork is
// unshared first: its times belong to the data.
func (q *FS) Utimens(p string, atim, mtim int64) sys.Errno {
	c, errno := q.checked(p, true)
	if errno != 0 {
		return errno
	}
	if c == "." {
		if errno := q.make(); errno != 0 {
			return errno
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if errno := q.unshare(c, false); errno != 0 {
		return errno
	}
	return q.inner.Utimens(c, atim, mtim)
}
