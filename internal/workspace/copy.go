package workspace

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// copyTree makes dst (which must not exist) a copy of the tree at src, for
// checkpoints, their restore and forks. Each regular file is shared where
// the file system allows — a reflink (a copy-on-write clone: btrfs, XFS),
// else a hard link — and copied otherwise. A hard link shares the data, so
// QuotaFS unshares a file before the guest changes it (QuotaFS.unshare): to
// the user every copy is independent. Nothing else writes these trees.
// Directories are made 0700, symbolic links are copied as they are, other
// file types are skipped.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch t := d.Type(); {
		case t.IsDir():
			return os.Mkdir(to, 0o700)
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case t.IsRegular():
			return shareFile(p, to)
		}
		return nil
	})
}

// shareFile makes dst a copy of the regular file src: a reflink, a hard
// link, or a byte copy, whichever works first.
func shareFile(src, dst string) error {
	if reflink(src, dst) == nil {
		return nil
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	return copyFile(src, dst, info.Mode().Perm())
}

// copyFile copies the bytes of src to a new file dst with mode perm.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}

// unshareFile gives the file at host a data block of its own: a private
// copy is made beside it and renamed over it.
func unshareFile(host string, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(host), tmpPrefix+"*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	tmp.Close()
	os.Remove(name)
	if err := shareCopy(host, name, perm); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, host); err != nil {
		os.Remove(name)
		return fmt.Errorf("unshare: %w", err)
	}
	return nil
}

// shareCopy is a copy that never hard-links: a reflink or the bytes.
func shareCopy(src, dst string, perm fs.FileMode) error {
	if reflink(src, dst) == nil {
		return os.Chmod(dst, perm)
	}
	return copyFile(src, dst, perm)
}
