package guestfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// Confinement: wazero's WASI layer already refuses absolute paths and ".."
// that climbs above the mount, but sysfs.DirFS itself does not, and DirFS
// follows symbolic links on the host, so a guest could create "esc -> ../.."
// and open "esc/etc/passwd". An FS rejects lexical escapes itself and,
// before each operation, resolves the path through an [os.Root] of the
// directory; a path whose resolution (symlinks included) would leave the
// directory fails with EPERM. The check and the operation are two steps;
// that is sound because only the workspace's guest writes to the directory
// and a workspace runs one call at a time on a single-threaded guest.

// Acquire opens the handle that confinement resolves paths through, so that
// a caller learns before a run whether the process can still open files
// (an error wrapping syscall.EMFILE or ENFILE when it cannot; for a
// directory not made yet, EMFILE: see descriptorLeft). Path operations also
// open it on demand.
func (q *FS) Acquire() error {
	if q.unmade() {
		// Nothing to hold yet (trying would cost the call a failed open):
		// whether a descriptor is still to be had, for the first change.
		// Like a root held, one found stands until Release, so a workspace
		// used again costs no system call.
		if q.probed.Load() {
			return nil
		}
		if err := descriptorLeft(); err != nil {
			return err
		}
		q.probed.Store(true)
		return nil
	}
	_, err := q.openRoot()
	return err
}

// probeFD is a descriptor of the package's own plus one (0: not opened
// yet), which descriptorLeft duplicates.
var probeFD atomic.Int64

// descriptorLeft reports whether the process can still have a descriptor:
// an error wrapping syscall.EMFILE when it cannot (or ENFILE, before the
// probe is first opened). It costs a dup (close-on-exec: a child started
// meanwhile inherits nothing) and a close. A probe that cannot be opened
// for another reason (a / the process may not read) reports nothing.
func descriptorLeft() error {
	fd := probeFD.Load() - 1
	if fd < 0 {
		nfd, err := syscall.Open("/", syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_DIRECTORY, 0)
		if err != nil {
			if err == syscall.EMFILE || err == syscall.ENFILE {
				return &os.SyscallError{Syscall: "open", Err: err}
			}
			return nil
		}
		if !probeFD.CompareAndSwap(0, int64(nfd)+1) {
			syscall.Close(nfd)
		}
		fd = probeFD.Load() - 1
	}
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return &os.SyscallError{Syscall: "fcntl", Err: err}
	}
	return syscall.Close(d)
}

// Release closes the descriptor the FS holds for itself; the next path
// operation opens it again. Files the guest opened are the guest's and stay
// open. The workspace registry releases the roots of the workspaces idle
// the longest, so that thousands of idle workspaces hold few descriptors.
func (q *FS) Release() {
	q.handles.Lock()
	defer q.handles.Unlock()
	q.probed.Store(false)
	if q.root != nil {
		q.root.Close()
		q.root = nil
	}
}

func (q *FS) openRoot() (*os.Root, error) {
	if q.closed.Load() {
		return nil, fs.ErrClosed
	}
	q.handles.Lock()
	defer q.handles.Unlock()
	if q.root == nil {
		r, err := os.OpenRoot(q.dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && q.unmade() {
				return nil, errUnmade
			}
			return nil, err
		}
		q.root = r
	}
	return q.root, nil
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
func (q *FS) confine(p string, follow bool) sys.Errno {
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
	if err == errUnmade {
		return 0 // an empty tree: the operation finds nothing to follow
	}
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
func (q *FS) checked(p string, follow bool) (string, sys.Errno) {
	c, errno := clean(p)
	if errno != 0 {
		return "", errno
	}
	return c, q.confine(c, follow)
}

// resolve follows the symbolic links of p (inside the root: p was confined)
// and returns the path of the file itself relative to the root.
func (q *FS) resolve(p string) (string, sys.Errno) {
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
