package guestfs

import (
	"github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// rootDir is the handle wazero opens on the workspace directory for the
// /workspace preopen, and keeps for the instance's life. wazero opens it at
// the guest's start only to ask whether it is a directory (fd_prestat_get);
// rootDir answers that, and Stat, without a descriptor, and opens the
// directory only when the guest lists it through the preopen itself, which
// the guests' libc never does (opendir opens a handle of its own). So an
// instance holds no descriptor for its preopen.
type rootDir struct {
	sys.File // the opened directory; until then, ENOSYS for anything not declared here
	q        *FS
	opened   bool
}

func (q *FS) newRootDir() *rootDir {
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
	return d.q.rootStat()
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
	if errno := d.open(); errno == sys.ENOENT && d.q.unmade() {
		// No entries yet: an empty directory's handle lists them, and
		// rewinds, until the next Readdir finds the directory made.
		if d.File, errno = EmptyDir.OpenFile(".", sys.O_RDONLY, 0); errno != 0 {
			return nil, errno
		}
	} else if errno != 0 {
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
