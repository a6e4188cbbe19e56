package guestfs

import (
	"io"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// file is a file the guest opened through an FS: it charges the file's
// growth against the quota and logs the change.
type file struct {
	sys.File
	q    *FS
	path string    // as opened, relative to the root
	flag sys.Oflag // as opened
}

// room returns how many of n bytes written at off fit, given the file's
// current size. Callers hold q.mu.
func (f *file) room(off int64, n int, size int64) int {
	grow := off + int64(n) - size
	if grow <= 0 {
		return n
	}
	// The write fits but for its excess; a write past the end may have
	// no room at all.
	return int(max(int64(n)-Excess(f.q.limit, f.q.used, grow), 0))
}

func (f *file) write(buf []byte, off int64, pwrite bool) (int, sys.Errno) {
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
	// The Budget shortens the write as the quota does; what it takes is
	// settled with what was written.
	var taken int64
	if grow := off + int64(n) - st.Size; grow > 0 && n > 0 {
		if miss := q.budget.Missing(grow); miss > 0 {
			n = int(max(int64(n)-miss, 0))
			grow = off + int64(n) - st.Size
		}
		switch {
		case n == 0:
		case grow <= 0:
		case q.budget.Take(grow):
			taken = grow
		default: // taken by another tree meanwhile
			n = 0
		}
		if n == 0 {
			q.budgetRefused.Add(1)
		}
	}
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
	grow := max(off+int64(written)-st.Size, 0)
	q.add(grow)
	q.budget.Add(grow - taken)
	if written > 0 {
		q.touch(f.path)
	}
	return written, errno
}

// Write implements sys.File. A write that does not fit entirely is shortened
// (wazero drops the count of a write that also returns an errno).
func (f *file) Write(buf []byte) (int, sys.Errno) { return f.write(buf, 0, false) }

// Pwrite implements sys.File.
func (f *file) Pwrite(buf []byte, off int64) (int, sys.Errno) { return f.write(buf, off, true) }

// Truncate implements sys.File.
func (f *file) Truncate(size int64) sys.Errno {
	q := f.q
	q.mu.Lock()
	defer q.mu.Unlock()
	st, errno := f.File.Stat()
	if errno != 0 {
		return f.File.Truncate(size)
	}
	if errno := q.charged(size-st.Size, func() sys.Errno { return f.File.Truncate(size) }); errno != 0 {
		return errno
	}
	q.touch(f.path)
	return 0
}

// Utimens implements sys.File. The times belong to the data: a file shared
// with a checkpoint or a fork is unshared first (unshareOpen), as a change
// through its name would be.
func (f *file) Utimens(atim, mtim int64) sys.Errno {
	q := f.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if errno := f.unshareOpen(); errno != 0 {
		return errno
	}
	return f.File.Utimens(atim, mtim)
}

// unshareOpen gives the open file a data block of its own when it shares
// one (FS.unshare), and moves the handle to the private copy: reopened
// with its flags and at its offset. An open for writing was unshared
// already; this is for a handle opened only for reading. A shared file
// whose name no longer names it (renamed since it was opened) cannot be
// unshared by name: EACCES (not EPERM, on which wazero retries by the name
// the file was opened with, which may now be another file's). Callers hold
// q.mu.
func (f *file) unshareOpen() sys.Errno {
	st, errno := f.File.Stat()
	if errno != 0 || !st.Mode.IsRegular() || st.Nlink <= 1 {
		return 0
	}
	stat := f.q.inner.Stat
	if f.flag&sys.O_NOFOLLOW != 0 {
		stat = f.q.inner.Lstat
	}
	if now, errno := stat(f.path); errno != 0 || now.Ino != st.Ino || now.Dev != st.Dev {
		return sys.EACCES
	}
	off, errno := f.File.Seek(0, io.SeekCurrent)
	if errno != 0 {
		return errno
	}
	if errno := f.q.unshare(f.path, false); errno != 0 {
		return errno
	}
	nf, errno := f.q.inner.OpenFile(f.path, f.flag&^(sys.O_CREAT|sys.O_EXCL|sys.O_TRUNC), 0)
	if errno != 0 {
		return errno
	}
	if _, errno := nf.Seek(off, io.SeekStart); errno != 0 {
		nf.Close()
		return errno
	}
	f.File.Close()
	f.File = nf
	return 0
}
