package guestfs

import (
	"io/fs"
	"path"
	"syscall"
	"time"

	"github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// The host-side API: what the workspace registry does to a workspace's
// files from outside the guest, through the same confinement and quota as
// the guest. Paths are guest paths relative to the root. Errors are
// *fs.PathError whose Err matches, with errors.Is, a syscall.Errno
// (syscall.ENOENT, EPERM for a path that leaves the directory, EISDIR,
// ENOTDIR, …), syscall.EDQUOT when the quota refused the change,
// syscall.ENOSPC when the Budget did (NewInBudget), or
// fs.ErrInvalid when the path names something that is not a regular file.
// The caller must not run a guest on the FS meanwhile (it holds the
// workspace's turn), so that the quota's refusals are its own.

// ReadFile reads at most length bytes from offset of the regular file at
// p, and describes the file. Reading at or past the end gives no data.
func (q *FS) ReadFile(p string, offset, length int64) (fs.FileInfo, []byte, error) {
	// O_NONBLOCK: a FIFO is refused by OpenFile, and would not be waited
	// for even if it appeared after that check.
	f, errno := q.OpenFile(p, sys.O_RDONLY|sys.O_NONBLOCK, 0)
	if errno == sys.ENOTSUP {
		return nil, nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrInvalid}
	}
	if errno != 0 {
		return nil, nil, pathError("open", p, errno)
	}
	defer f.Close()
	st, errno := f.Stat()
	if errno != 0 {
		return nil, nil, pathError("read", p, errno)
	}
	if !st.Mode.IsRegular() {
		return nil, nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrInvalid}
	}
	info := statInfo(p, st)
	if offset >= st.Size || length <= 0 {
		return info, nil, nil
	}
	buf := make([]byte, min(length, st.Size-offset))
	n := 0
	for n < len(buf) {
		k, errno := f.Pread(buf[n:], offset+int64(n))
		if errno != 0 {
			return nil, nil, pathError("read", p, errno)
		}
		if k == 0 {
			break
		}
		n += k
	}
	return info, buf[:n], nil
}

// WriteFile writes data as the whole content of the file at p (mode 0644
// when it is new), making the directories above it (each charged like the
// guest's own mkdir). A file shared with a checkpoint or a fork is
// replaced, never written through. Call Fits first to refuse data that
// cannot fit before anything is written.
func (q *FS) WriteFile(p string, data []byte) (fs.FileInfo, error) {
	if dir := path.Dir(p); dir != "." {
		if err := q.mkdirAll(dir); err != nil {
			return nil, err
		}
	}
	refused, byBudget := q.Refused(), q.BudgetRefused()
	failed := func(op string, errno sys.Errno) error {
		if err := q.refusal(op, p, refused, byBudget); err != nil {
			return err
		}
		return pathError(op, p, errno)
	}
	f, errno := q.OpenFile(p, sys.O_WRONLY|sys.O_CREAT|sys.O_TRUNC, 0o644)
	if errno == sys.ENOTSUP {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrInvalid}
	}
	if errno != 0 {
		return nil, failed("open", errno)
	}
	for n := 0; n < len(data); {
		k, errno := f.Write(data[n:])
		if errno == 0 && k == 0 {
			errno = sys.EIO
		}
		if errno != 0 {
			f.Close()
			return nil, failed("write", errno)
		}
		n += k
	}
	if errno := f.Close(); errno != 0 {
		return nil, failed("write", errno)
	}
	if st, errno := q.Stat(p); errno == 0 {
		return statInfo(p, st), nil
	}
	return &fileInfo{name: path.Base(p), size: int64(len(data)), modTime: time.Now()}, nil
}

// mkdirAll makes dir and its parents. A part of dir that is not a
// directory fails with ENOTDIR naming that part.
func (q *FS) mkdirAll(dir string) error {
	st, errno := q.Stat(dir)
	if errno == 0 {
		if !st.Mode.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if errno != sys.ENOENT {
		return pathError("mkdir", dir, errno)
	}
	if parent := path.Dir(dir); parent != "." {
		if err := q.mkdirAll(parent); err != nil {
			return err
		}
	}
	refused, byBudget := q.Refused(), q.BudgetRefused()
	if errno := q.Mkdir(dir, 0o755); errno != 0 && errno != sys.EEXIST {
		if err := q.refusal("mkdir", dir, refused, byBudget); err != nil {
			return err
		}
		return pathError("mkdir", dir, errno)
	}
	return nil
}

// refusal is the error of an operation the quota (syscall.EDQUOT) or the
// Budget (syscall.ENOSPC) refused, given the counts of refusals before it;
// nil when neither did.
func (q *FS) refusal(op, p string, refused, byBudget int64) error {
	switch {
	case q.BudgetRefused() > byBudget:
		return &fs.PathError{Op: op, Path: p, Err: syscall.ENOSPC}
	case q.Refused() > refused:
		return &fs.PathError{Op: op, Path: p, Err: syscall.EDQUOT}
	}
	return nil
}

// Info describes the entry at p without following a link it names, like
// os.Lstat.
func (q *FS) Info(p string) (fs.FileInfo, error) {
	st, errno := q.Lstat(p)
	if errno != 0 {
		return nil, pathError("lstat", p, errno)
	}
	return statInfo(p, st), nil
}

// pathError wraps errno, whose Unwrap is the syscall.Errno.
func pathError(op, p string, errno sys.Errno) error {
	return &fs.PathError{Op: op, Path: p, Err: errno}
}

// fileInfo is an fs.FileInfo of an entry below the root.
type fileInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func statInfo(p string, st wsys.Stat_t) *fileInfo {
	return &fileInfo{name: path.Base(p), size: st.Size, mode: st.Mode, modTime: time.Unix(0, st.Mtim)}
}

func (i *fileInfo) Name() string       { return i.name }
func (i *fileInfo) Size() int64        { return i.size }
func (i *fileInfo) Mode() fs.FileMode  { return i.mode }
func (i *fileInfo) ModTime() time.Time { return i.modTime }
func (i *fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *fileInfo) Sys() any           { return nil }
