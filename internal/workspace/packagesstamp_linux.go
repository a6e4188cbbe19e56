package workspace

import (
	"io/fs"
	"syscall"
)

// inodeTimes are the inode number and the change time (ns) of info.
func inodeTimes(info fs.FileInfo) (ino uint64, ctime int64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino, st.Ctim.Nano()
	}
	return 0, 0
}
