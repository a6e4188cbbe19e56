package guestfs

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	wsys "github.com/tetratelabs/wazero/sys"
)

// A lazy FS (NewLazy) stands for a directory that need not exist yet: a
// workspace that has written nothing has no directory on the host. Until it
// is made, the FS reads as an empty directory (the root's Stat, an empty
// listing; anything below it ENOENT), and the first change that adds an
// entry (a create, mkdir, link or symlink, a write_file, a chmod or utimes
// of the root) calls mkdir first, once the quota allowed it. Confinement
// needs no descriptor while there is no directory: nothing exists to be
// followed, and a directory just made holds nothing either.

// NewLazy is NewInBudget for a directory that need not exist: mkdir makes
// it (mode and parents are the caller's) and is called before the first
// change that needs it, until it succeeds; it may find the directory made
// already. An FS made by NewLazy for a directory that exists is
// NewInBudget's.
func NewLazy(dir string, limitBytes int64, b *Budget, mkdir func() error) (*FS, error) {
	q, err := NewInBudget(dir, limitBytes, b)
	if errors.Is(err, fs.ErrNotExist) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		return &FS{dir: abs, inner: sysfs.DirFS(abs), limit: limitBytes, budget: b, mkdir: mkdir}, nil
	}
	if err != nil {
		return nil, err
	}
	q.mkdir = mkdir
	return q, nil
}

// errUnmade is openRoot's error for a lazy FS whose directory does not
// exist (yet).
var errUnmade = errors.New("the directory is not made yet")

// unmade reports whether the FS is lazy and has not made its directory.
// A directory made from outside still reads as unmade here: path
// operations find it (openRoot opens it), make finds it made, and Acquire
// and the root's EISDIR answer alike for a directory made or not.
func (q *FS) unmade() bool { return q.mkdir != nil && !q.made.Load() }

// make makes the directory of a lazy FS unless it exists.
func (q *FS) make() sys.Errno {
	if !q.unmade() {
		return 0
	}
	if q.closed.Load() {
		return sys.EBADF
	}
	q.handles.Lock() // one mkdir at a time; Close's Release waits for it
	defer q.handles.Unlock()
	if q.made.Load() {
		return 0
	}
	if q.closed.Load() { // closed meanwhile: the workspace may be gone
		return sys.EBADF
	}
	if err := q.mkdir(); err != nil {
		return sys.UnwrapOSError(err)
	}
	q.made.Store(true)
	if q.root != nil { // of a directory made, and removed, from outside
		q.root.Close()
		q.root = nil
	}
	return 0
}

// rootStat describes the root: the directory's own Stat, or that of an
// empty 0700 directory while a lazy FS's directory does not exist.
func (q *FS) rootStat() (wsys.Stat_t, sys.Errno) {
	st, errno := q.inner.Stat(".")
	if errno == sys.ENOENT && q.unmade() {
		return wsys.Stat_t{Mode: fs.ModeDir | 0o700, Nlink: 2}, 0 // EmptyDir's times
	}
	return st, errno
}

// EmptyDir is a read-only, empty directory: what a lazy FS lists while its
// directory is not made, and a mount with nothing in it. Its times are the
// epoch, which no real directory has, so a guest caching a listing by
// modification time (Python's import system) sees a real directory as
// changed.
var EmptyDir sys.FS = &sysfs.AdaptFS{FS: emptyFS{}}

type emptyFS struct{}

func (emptyFS) Open(name string) (fs.File, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return emptyRoot{}, nil
}

type emptyRoot struct{}

func (emptyRoot) Stat() (fs.FileInfo, error) { return emptyRoot{}, nil }
func (emptyRoot) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: fs.ErrInvalid}
}
func (emptyRoot) Close() error { return nil }
func (emptyRoot) ReadDir(n int) ([]fs.DirEntry, error) {
	if n > 0 {
		return nil, io.EOF
	}
	return nil, nil
}
func (emptyRoot) Name() string       { return "." }
func (emptyRoot) Size() int64        { return 0 }
func (emptyRoot) Mode() fs.FileMode  { return fs.ModeDir | 0o555 }
func (emptyRoot) ModTime() time.Time { return time.Unix(0, 0) }
func (emptyRoot) IsDir() bool        { return true }
func (emptyRoot) Sys() any           { return nil }
