package guestfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// clone makes dst, an empty file, a copy-on-write clone of src (FICLONE).
// It fails on file systems without shared extents (ext4, tmpfs); the
// caller then falls back to a hard link or a copy.
func clone(dst, src *os.File) error {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
}
