package workspace

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	wsys "github.com/tetratelabs/wazero/sys"
)

// ErrnoQuota is what a write, truncate or create beyond the disk quota
// returns. wazero v1.12's WASI layer knows no ENOSPC or EDQUOT: any errno
// outside its small set reaches the guest as EIO, so EIO is returned
// explicitly. [QuotaFS.Refused] lets the host say why in words.
const ErrnoQuota = sys.EIO

// entryCost is what every directory entry (file, directory, symlink) costs
// against the quota on top of a regular file's size, so that a loop creating
// empty files or directories runs out of quota too.
const entryCost = 256

// QuotaFS is a wazero file system rooted at one host directory. It confines
// every path to that directory and enforces a byte quota on the whole tree.
//
// Confinement: wazero's WASI layer already refuses absolute paths and ".."
// that climbs above the mount, but sysfs.DirFS itself does not, and DirFS
// follows symbolic links on the host, so a guest could create "esc -> ../.."
// and open "esc/etc/passwd". QuotaFS rejects lexical escapes itself and, before
// each operation, resolves the path through an [os.Root] of the directory; a
// path whose resolution (symlinks included) would leave the directory fails
// with EPERM. The check and the operation are two steps; that is sound because
// only the workspace's guest writes to the directory and a workspace runs one
// call at a time on a single-threaded guest.
//
// Quota: usage is the apparent size of regular files plus [entryCost] per
// directory entry, measured by walking the directory at creation and then
// tracked on every write, truncate, create and remove made through this FS.
// A write that would pass the limit is shortened to fit; a write with no room
// at all fails with [ErrnoQuota]. Hard links count once per name. The
// accounting is an estimate that errs on the side of charging.
//
// A QuotaFS is safe for concurrent use. Share one QuotaFS between all the
// runners of a workspace so the quota is per workspace, not per runner.
type QuotaFS struct {
	dir   string
	inner sys.FS
	root  *os.Root
	limit int64 // <= 0: unlimited

	mu   sync.Mutex // serialises accounting with the operation it accounts for
	used int64

	refused atomic.Int64
	closed  atomic.Bool
}

var _ sys.FS = (*QuotaFS)(nil)

// NewQuotaFS returns a [*QuotaFS] for dir, which must exist. limitBytes <= 0
// means no quota; paths are confined either way. Close the result (it holds
// an open directory) when no runner uses it any more.
func NewQuotaFS(dir string, limitBytes int64) (sys.FS, error) {
	return newQuotaFS(dir, limitBytes)
}

func newQuotaFS(dir string, limitBytes int64) (*QuotaFS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	used, err := diskUsage(abs)
	if err != nil {
		root.Close()
		return nil, err
	}
	return &QuotaFS{dir: abs, inner: sysfs.DirFS(abs), root: root, limit: limitBytes, used: used}, nil
}

// diskUsage is the quota charge of everything below dir (not dir itself).
// Entries that vanish during the walk are skipped.
func diskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == dir {
			return nil
		}
		total += entryCost
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total, err
}

// String returns the host directory.
func (q *QuotaFS) String() string { return q.dir }

// Used returns the bytes currently charged against the quota.
func (q *QuotaFS) Used() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// Limit returns the quota in bytes; <= 0 means none.
func (q *QuotaFS) Limit() int64 { return q.limit }

// Refused counts the operations refused for lack of quota since creation.
// A caller compares it before and after a run to tell the user why writes
// failed with an I/O error.
func (q *QuotaFS) Refused() int64 { return q.refused.Load() }

// Close releases the directory handle. Files already open stay usable; new
// path operations fail with EBADF. Close is idempotent.
func (q *QuotaFS) Close() error {
	if q.closed.Swap(true) {
		return nil
	}
	return q.root.Close()
}

// clean validates a guest path and returns it relative to the root ("." for
// the root itself). Absolute paths and ".." that leaves the root are EPERM,
// like wazero's WASI layer. A trailing slash is kept: it makes the OS insist
// on a directory.
func clean(p string) (string, sys.Errno) {
	if p == "" || p == "/" {
		return ".", 0
	}
	trailing := strings.HasSuffix(p, "/")
	c := path.Clean(p)
	if !fs.ValidPath(c) {
		return "", sys.EPERM
	}
	if trailing && c != "." {
		c += "/"
	}
	return c, 0
}

// isEscape reports whether err from an os.Root operation means the path
// resolved outside the root. Ordinary failures carry a syscall.Errno; the
// escape error of package os is a plain error value.
func isEscape(err error) bool {
	if err == nil {
		return false
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		var errno syscall.Errno
		return !errors.As(pe.Err, &errno)
	}
	return false
}

// confine checks that p, with its last element followed when follow is true,
// resolves inside the root. Errors other than an escape are left for the real
// operation to report.
func (q *QuotaFS) confine(p string, follow bool) sys.Errno {
	if q.closed.Load() {
		return sys.EBADF
	}
	target := strings.TrimSuffix(p, "/")
	if !follow {
		target = path.Dir(target)
	}
	if target == "." {
		return 0
	}
	if _, err := q.root.Stat(target); isEscape(err) {
		return sys.EPERM
	}
	return 0
}

// checked cleans and confines p.
func (q *QuotaFS) checked(p string, follow bool) (string, sys.Errno) {
	c, errno := clean(p)
	if errno != 0 {
		return "", errno
	}
	return c, q.confine(c, follow)
}

// charge reserves n bytes (n may be negative). It fails with ErrnoQuota when a
// positive n does not fit. Callers hold q.mu.
func (q *QuotaFS) charge(n int64) sys.Errno {
	if n > 0 && q.limit > 0 && q.used+n > q.limit {
		q.refused.Add(1)
		return ErrnoQuota
	}
	q.used += n
	if q.used < 0 {
		q.used = 0
	}
	return 0
}

// entryCharge is what removing the entry named p gives back (0 if absent).
func (q *QuotaFS) entryCharge(p string) int64 {
	st, errno := q.inner.Lstat(p)
	if errno != 0 {
		return 0
	}
	if st.Mode.IsRegular() {
		return entryCost + st.Size
	}
	return entryCost
}

// OpenFile implements sys.FS.
func (q *QuotaFS) OpenFile(p string, flag sys.Oflag, perm fs.FileMode) (sys.File, sys.Errno) {
	c, errno := q.checked(p, flag&sys.O_NOFOLLOW == 0)
	if errno != 0 {
		return nil, errno
	}
	writes := flag&(sys.O_CREAT|sys.O_TRUNC) != 0
	if !writes {
		f, errno := q.inner.OpenFile(c, flag, perm)
		if errno != 0 {
			return nil, errno
		}
		return &quotaFile{File: f, q: q}, 0
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	before, exists := q.inner.Stat(c)
	var delta int64
	switch {
	case exists != 0 && flag&sys.O_CREAT != 0:
		delta = entryCost // a new entry
	case exists == 0 && flag&sys.O_TRUNC != 0 && before.Mode.IsRegular():
		delta = -before.Size
	}
	if delta > 0 && q.limit > 0 && q.used+delta > q.limit {
		q.refused.Add(1)
		return nil, ErrnoQuota
	}
	f, errno := q.inner.OpenFile(c, flag, perm)
	if errno != 0 {
		return nil, errno
	}
	q.charge(delta)
	return &quotaFile{File: f, q: q}, 0
}

// Lstat implements sys.FS.
func (q *QuotaFS) Lstat(p string) (wsys.Stat_t, sys.Errno) {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return q.inner.Lstat(c)
}

// Stat implements sys.FS.
func (q *QuotaFS) Stat(p string) (wsys.Stat_t, sys.Errno) {
	c, errno := q.checked(p, true)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return q.inner.Stat(c)
}

// Mkdir implements sys.FS.
func (q *QuotaFS) Mkdir(p string, perm fs.FileMode) sys.Errno {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.limit > 0 && q.used+entryCost > q.limit {
		q.refused.Add(1)
		return ErrnoQuota
	}
	if errno := q.inner.Mkdir(c, perm); errno != 0 {
		return errno
	}
	return q.charge(entryCost)
}

// Chmod implements sys.FS.
func (q *QuotaFS) Chmod(p string, perm fs.FileMode) sys.Errno {
	c, errno := q.checked(p, true)
	if errno != 0 {
		return errno
	}
	return q.inner.Chmod(c, perm)
}

// Rename implements sys.FS. A replaced destination gives its charge back.
func (q *QuotaFS) Rename(from, to string) sys.Errno {
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
	var freed int64
	if _, errno := q.inner.Lstat(f); errno == 0 {
		freed = q.entryCharge(t)
	}
	if errno := q.inner.Rename(f, t); errno != 0 {
		return errno
	}
	q.charge(-freed)
	return 0
}

// Rmdir implements sys.FS.
func (q *QuotaFS) Rmdir(p string) sys.Errno {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if errno := q.inner.Rmdir(c); errno != 0 {
		return errno
	}
	q.charge(-entryCost)
	return 0
}

// Unlink implements sys.FS.
func (q *QuotaFS) Unlink(p string) sys.Errno {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	freed := q.entryCharge(c)
	if errno := q.inner.Unlink(c); errno != 0 {
		return errno
	}
	q.charge(-freed)
	return 0
}

// Link implements sys.FS. The new name is charged like a copy.
func (q *QuotaFS) Link(oldPath, newPath string) sys.Errno {
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
	cost := q.entryCharge(o)
	if cost == 0 {
		cost = entryCost
	}
	if q.limit > 0 && q.used+cost > q.limit {
		q.refused.Add(1)
		return ErrnoQuota
	}
	if errno := q.inner.Link(o, n); errno != 0 {
		return errno
	}
	return q.charge(cost)
}

// Symlink implements sys.FS. The link text is stored as is (DirFS already
// refuses absolute targets); following the link later is what confinement
// checks, so a link pointing outside can be made but never used.
func (q *QuotaFS) Symlink(oldPath, linkName string) sys.Errno {
	l, errno := q.checked(linkName, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.limit > 0 && q.used+entryCost > q.limit {
		q.refused.Add(1)
		return ErrnoQuota
	}
	if errno := q.inner.Symlink(oldPath, l); errno != 0 {
		return errno
	}
	return q.charge(entryCost)
}

// Readlink implements sys.FS.
func (q *QuotaFS) Readlink(p string) (string, sys.Errno) {
	c, errno := q.checked(p, false)
	if errno != 0 {
		return "", errno
	}
	return q.inner.Readlink(c)
}

// Utimens implements sys.FS.
func (q *QuotaFS) Utimens(p string, atim, mtim int64) sys.Errno {
	c, errno := q.checked(p, true)
	if errno != 0 {
		return errno
	}
	return q.inner.Utimens(c, atim, mtim)
}

// quotaFile charges the growth of one open file.
type quotaFile struct {
	sys.File
	q *QuotaFS
}

// room returns how many of n bytes written at off fit, given the file's
// current size. Callers hold q.mu.
func (f *quotaFile) room(off int64, n int, size int64) int {
	q := f.q
	if q.limit <= 0 {
		return n
	}
	grow := off + int64(n) - size
	if grow <= 0 || q.used+grow <= q.limit {
		return n
	}
	fit := size - off + (q.limit - q.used) // largest write that fits
	if fit < 0 {
		fit = 0
	}
	if fit < int64(n) {
		return int(fit)
	}
	return n
}

func (f *quotaFile) write(buf []byte, off int64, pwrite bool) (int, sys.Errno) {
	q := f.q
	q.mu.Lock()
	defer q.mu.Unlock()
	st, errno := f.File.Stat()
	if errno != 0 || !st.Mode.IsRegular() {
		// Not a regular file (or unknown): let the file report its own error.
		if pwrite {
			return f.File.Pwrite(buf, off)
		}
		return f.File.Write(buf)
	}
	if !pwrite {
		if f.File.IsAppend() {
			off = st.Size
		} else if off, errno = f.File.Seek(0, io.SeekCurrent); errno != 0 {
			return 0, errno
		}
	}
	n := f.room(off, len(buf), st.Size)
	if n == 0 && len(buf) > 0 {
		q.refused.Add(1)
		return 0, ErrnoQuota
	}
	var written int
	if pwrite {
		written, errno = f.File.Pwrite(buf[:n], off)
	} else {
		written, errno = f.File.Write(buf[:n])
	}
	if grow := off + int64(written) - st.Size; grow > 0 {
		q.used += grow
	}
	return written, errno
}

// Write implements sys.File. A write that does not fit entirely is shortened
// (wazero drops the count of a write that also returns an errno).
func (f *quotaFile) Write(buf []byte) (int, sys.Errno) { return f.write(buf, 0, false) }

// Pwrite implements sys.File.
func (f *quotaFile) Pwrite(buf []byte, off int64) (int, sys.Errno) { return f.write(buf, off, true) }

// Truncate implements sys.File.
func (f *quotaFile) Truncate(size int64) sys.Errno {
	q := f.q
	q.mu.Lock()
	defer q.mu.Unlock()
	st, errno := f.File.Stat()
	if errno != 0 {
		return f.File.Truncate(size)
	}
	delta := size - st.Size
	if delta > 0 && q.limit > 0 && q.used+delta > q.limit {
		q.refused.Add(1)
		return ErrnoQuota
	}
	if errno := f.File.Truncate(size); errno != 0 {
		return errno
	}
	q.charge(delta)
	return 0
}
