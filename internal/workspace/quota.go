package workspace

import (
	"errors"
	"fmt"
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
	limit int64 // <= 0: unlimited

	// handles guards root, the os.Root that confinement resolves through:
	// opened on demand and closed by Release, so that a workspace idle for
	// a while holds no descriptor (see also rootDir).
	handles sync.Mutex
	root    *os.Root // nil until needed, or after Release

	mu   sync.Mutex // serialises accounting with the operation it accounts for
	used int64
	log  *touchLog // the paths changed since Track; nil when not tracking

	refused atomic.Int64
	closed  atomic.Bool
}

var _ sys.FS = (*QuotaFS)(nil)

// NewQuotaFS returns a [*QuotaFS] for dir, which must exist. limitBytes <= 0
// means no quota; paths are confined either way. Close the result when no
// runner uses it any more.
func NewQuotaFS(dir string, limitBytes int64) (sys.FS, error) {
	return newQuotaFS(dir, limitBytes)
}

func newQuotaFS(dir string, limitBytes int64) (*QuotaFS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(abs); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", abs)
	}
	used, err := diskUsage(abs)
	if err != nil {
		return nil, err
	}
	return &QuotaFS{dir: abs, inner: sysfs.DirFS(abs), limit: limitBytes, used: used}, nil
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

// Refused counts the operations refused for lack of quota since creation.
// A caller compares it before and after a run to tell the user why writes
// failed with an I/O error.
func (q *QuotaFS) Refused() int64 { return q.refused.Load() }

// Acquire opens the handle that confinement resolves paths through, so that
// a caller learns before a run whether the process can still open files
// (an error wrapping syscall.EMFILE or ENFILE when it cannot). Path
// operations also open it on demand.
func (q *QuotaFS) Acquire() error {
	_, err := q.openRoot()
	return err
}

// Release closes the descriptor the FS holds for itself; the next path
// operation opens it again. Files the guest opened are the guest's and stay
// open. The Manager calls it for the workspace idle the longest once more
// than IdleRootsKept idle workspaces keep their roots.
func (q *QuotaFS) Release() {
	q.handles.Lock()
	defer q.handles.Unlock()
	if q.root != nil {
		q.root.Close()
		q.root = nil
	}
}

func (q *QuotaFS) openRoot() (*os.Root, error) {
	if q.closed.Load() {
		return nil, fs.ErrClosed
	}
	q.handles.Lock()
	defer q.handles.Unlock()
	if q.root == nil {
		r, err := os.OpenRoot(q.dir)
		if err != nil {
			return nil, err
		}
		q.root = r
	}
	return q.root, nil
}

// Close releases every handle of the FS. Files already open stay usable;
// new path operations fail with EBADF. Close is idempotent.
func (q *QuotaFS) Close() error {
	if q.closed.Swap(true) {
		return nil
	}
	q.Release()
	return nil
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
	root, err := q.openRoot()
	if err != nil {
		return sys.UnwrapOSError(err)
	}
	q.handles.Lock() // Release must not close the root under the Stat
	defer q.handles.Unlock()
	if q.root != root {
		return sys.EBADF
	}
	if _, err := root.Stat(target); isEscape(err) {
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

// reserve checks that n more bytes fit under the quota (n <= 0 always
// fits) and counts a refusal when they do not. The caller applies the
// change with add once its operation succeeded. Callers hold q.mu.
func (q *QuotaFS) reserve(n int64) sys.Errno {
	if n > 0 && q.limit > 0 && q.used+n > q.limit {
		q.refused.Add(1)
		return ErrnoQuota
	}
	return 0
}

// add applies a change of usage (n may be negative). Callers hold q.mu.
func (q *QuotaFS) add(n int64) {
	q.used = max(q.used+n, 0)
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

// writeFlags are the open flags that let the guest change a file.
const writeFlags = sys.O_WRONLY | sys.O_RDWR | sys.O_APPEND | sys.O_TRUNC

// OpenFile implements sys.FS.
func (q *QuotaFS) OpenFile(p string, flag sys.Oflag, perm fs.FileMode) (sys.File, sys.Errno) {
	c, errno := q.checked(p, flag&sys.O_NOFOLLOW == 0)
	if errno != 0 {
		return nil, errno
	}
	if c == "." && flag == sys.O_RDONLY {
		return q.newRootDir(), 0 // the preopen's handle, see rootDir
	}
	if flag&writeFlags == 0 && flag&sys.O_CREAT == 0 {
		f, errno := q.inner.OpenFile(c, flag, perm)
		if errno != 0 {
			return nil, errno
		}
		return &quotaFile{File: f, q: q, path: c}, 0
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
	if errno := q.reserve(delta); errno != 0 {
		return nil, errno
	}
	f, errno := q.inner.OpenFile(c, flag, perm)
	if errno != 0 {
		return nil, errno
	}
	q.add(delta)
	q.touch(c)
	return &quotaFile{File: f, q: q, path: c}, 0
}

// unshare gives the regular file at p a data block of its own before it is
// opened for writing, when it shares one with another name (a hard link
// made by a checkpoint or a fork, see [copyTree]): a write in one workspace
// must never show in another, or in a checkpoint. With truncate the content
// is not needed and the name is simply unlinked (the open then creates it
// anew, with the old mode). Links the guest made itself inside the
// workspace are unshared too: after a checkpoint they behave as copies.
// Callers hold q.mu.
func (q *QuotaFS) unshare(p string, truncate bool) sys.Errno {
	st, errno := q.inner.Stat(p)
	if errno != 0 || !st.Mode.IsRegular() || st.Nlink <= 1 {
		return 0
	}
	name, errno := q.resolve(p)
	if errno != 0 {
		return errno
	}
	host := filepath.Join(q.dir, filepath.FromSlash(name))
	if !truncate {
		return sys.UnwrapOSError(unshareFile(host, st.Mode.Perm()))
	}
	tmp, err := os.CreateTemp(filepath.Dir(host), tmpPrefix+"*")
	if err != nil {
		return sys.UnwrapOSError(err)
	}
	tmp.Chmod(st.Mode.Perm())
	tmp.Close()
	if err := os.Rename(tmp.Name(), host); err != nil {
		os.Remove(tmp.Name())
		return sys.UnwrapOSError(err)
	}
	q.add(-st.Size) // the name now holds an empty file
	return 0
}

// resolve follows the symbolic links of p (inside the root: p was confined)
// and returns the path of the file itself relative to the root.
func (q *QuotaFS) resolve(p string) (string, sys.Errno) {
	p = strings.TrimSuffix(p, "/")
	for range 40 { // the kernel's own limit on links in a path
		st, errno := q.inner.Lstat(p)
		if errno != 0 {
			return "", errno
		}
		if st.Mode&fs.ModeSymlink == 0 {
			dir, base := path.Split(p)
			if dir == "" {
				return base, 0
			}
			d, errno := q.resolve(path.Clean(dir))
			if errno != 0 {
				return "", errno
			}
			return path.Join(d, base), 0
		}
		target, errno := q.inner.Readlink(p)
		if errno != 0 {
			return "", errno
		}
		p = path.Join(path.Dir(p), target)
		if !fs.ValidPath(p) {
			return "", sys.EPERM
		}
	}
	return "", sys.ELOOP
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
	if errno := q.reserve(entryCost); errno != 0 {
		return errno
	}
	if errno := q.inner.Mkdir(c, perm); errno != 0 {
		return errno
	}
	q.add(entryCost)
	return 0
}

// Chmod implements sys.FS. A file shared with a checkpoint or a fork is
// unshared first: the mode belongs to the data.
func (q *QuotaFS) Chmod(p string, perm fs.FileMode) sys.Errno {
	c, errno := q.checked(p, true)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if errno := q.unshare(c, false); errno != 0 {
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
	q.add(-freed)
	q.touch(t)
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
	q.add(-entryCost)
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
	q.add(-freed)
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
	if errno := q.reserve(cost); errno != 0 {
		return errno
	}
	if errno := q.inner.Link(o, n); errno != 0 {
		return errno
	}
	q.add(cost)
	q.touch(n)
	return 0
}

// Symlink implements sys.FS. The target must be a relative path that only
// descends (no "..", not absolute): such a link, seen from the directory
// holding it, can only name something inside the workspace, whatever other
// links it passes through, so no host tool that follows links is led out of
// the workspace by one the guest made. Other targets fail with EPERM.
// Following links is confined as well (see [QuotaFS]), for links that
// reached the directory another way.
func (q *QuotaFS) Symlink(oldPath, linkName string) sys.Errno {
	if !descendingTarget(oldPath) {
		return sys.EPERM
	}
	l, errno := q.checked(linkName, false)
	if errno != 0 {
		return errno
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if errno := q.reserve(entryCost); errno != 0 {
		return errno
	}
	if errno := q.inner.Symlink(oldPath, l); errno != 0 {
		return errno
	}
	q.add(entryCost)
	return 0
}

// descendingTarget reports whether a symlink target is relative and free of
// ".." elements ("." and empty elements are harmless).
func descendingTarget(target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return false
	}
	for _, e := range strings.Split(target, "/") {
		if e == ".." {
			return false
		}
	}
	return true
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
	q.mu.Lock()
	defer q.mu.Unlock()
	if errno := q.unshare(c, false); errno != 0 {
		return errno
	}
	return q.inner.Utimens(c, atim, mtim)
}

// quotaFile charges the growth of one open file.
type quotaFile struct {
	sys.File
	q    *QuotaFS
	path string // as opened, relative to the root
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
	fit := max(size-off+(q.limit-q.used), 0) // largest write that fits
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
		q.add(grow)
	}
	if written > 0 {
		q.touch(f.path)
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
	if errno := q.reserve(delta); errno != 0 {
		return errno
	}
	if errno := f.File.Truncate(size); errno != 0 {
		return errno
	}
	q.add(delta)
	q.touch(f.path)
	return 0
}

// MaxTouched is the most paths one Track records.
const MaxTouched = 256

// touchLog is the paths changed since Track, in the order first changed.
type touchLog struct {
	paths []string
	seen  map[string]bool
	more  bool // paths beyond MaxTouched were changed
}

// Track starts recording the paths that writes, truncations, creations,
// renames (the new name) and links (the new name) change, until Touched.
// The Manager tracks each run, so that its result can name the files the
// code changed.
func (q *QuotaFS) Track() {
	q.mu.Lock()
	q.log = &touchLog{seen: map[string]bool{}}
	q.mu.Unlock()
}

// Touched stops recording and returns the paths recorded since Track
// (relative to the root, cleaned, in the order first changed; at most
// MaxTouched) and whether more were changed. A path may name what no
// longer exists, or a directory.
func (q *QuotaFS) Touched() (paths []string, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.log
	q.log = nil
	if l == nil {
		return nil, false
	}
	return l.paths, l.more
}

// touch records p. Callers hold q.mu.
func (q *QuotaFS) touch(p string) {
	l := q.log
	if l == nil {
		return
	}
	p = strings.TrimSuffix(p, "/")
	if p == "." || l.seen[p] {
		return
	}
	if len(l.paths) >= MaxTouched {
		l.more = true
		return
	}
	l.seen[p] = true
	l.paths = append(l.paths, p)
}

// rootDir is the handle wazero opens on the workspace directory for the
// /workspace preopen, and keeps for the instance's life. wazero opens it at
// the guest's start only to ask whether it is a directory (fd_prestat_get);
// rootDir answers that, and Stat, without a descriptor, and opens the
// directory only when the guest lists it through the preopen itself, which
// the guests' libc never does (opendir opens a handle of its own). So an
// instance holds no descriptor for its preopen.
type rootDir struct {
	sys.File // the opened directory; until then, ENOSYS for anything not declared here
	q        *QuotaFS
	opened   bool
}

func (q *QuotaFS) newRootDir() *rootDir {
	return &rootDir{File: sys.UnimplementedFile{}, q: q}
}

func (d *rootDir) open() sys.Errno {
	if d.opened {
		return 0
	}
	if d.q.closed.Load() {
		return sys.EBADF
	}
	f, errno := d.q.inner.OpenFile(".", sys.O_RDONLY, 0)
	if errno != 0 {
		return errno
	}
	d.File, d.opened = f, true
	return 0
}

func (d *rootDir) IsDir() (bool, sys.Errno) { return true, 0 }

func (d *rootDir) Stat() (wsys.Stat_t, sys.Errno) {
	if d.opened {
		return d.File.Stat()
	}
	return d.q.inner.Stat(".")
}

func (d *rootDir) Dev() (uint64, sys.Errno) {
	st, errno := d.Stat()
	return st.Dev, errno
}

func (d *rootDir) Ino() (wsys.Inode, sys.Errno) {
	st, errno := d.Stat()
	return st.Ino, errno
}

func (d *rootDir) Readdir(n int) ([]sys.Dirent, sys.Errno) {
	if errno := d.open(); errno != 0 {
		return nil, errno
	}
	return d.File.Readdir(n)
}

func (d *rootDir) Utimens(atim, mtim int64) sys.Errno { return d.q.Utimens(".", atim, mtim) }

func (d *rootDir) Close() sys.Errno {
	if !d.opened {
		return 0
	}
	d.opened = false
	return d.File.Close()
}
