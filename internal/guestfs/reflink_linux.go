package guestfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// reflink makes dst a copy-on-write clone of src (FICLONE). It fails on
// file systems without shared extents (ext4, tmpfs); the caller then falls
// back to a hard link or a copy.
func reflink(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = clone(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return err
	}
	if info, err := in.Stat(); err == nil {
		os.Chmod(dst, info.Mode().Perm())
	}
	return nil
}

// clone makes dst, an empty file, a copy-on-write clone of src (FICLONE).
func clone(dst, src *os.File) error {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
}
