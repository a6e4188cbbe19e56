package guestfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// tmpPrefix starts the names of the temporary files an unshare makes beside
// the file: the prefix of every temporary entry of the data directory.
const tmpPrefix = "~tmp"

// CopyTree makes dst (which must not exist) a copy of the tree at src, for
// checkpoints, their restore and forks. Each regular file is shared where
// the file system allows — a reflink (a copy-on-write clone: btrfs, XFS),
// else a hard link — and copied otherwise. A hard link shares the data, so
// an FS unshares a file before the guest changes it (FS.unshare): to the
// user every copy is independent. Nothing else writes these trees.
// Directories are made 0700, symbolic links are copied as they are, other
// file types are skipped.
func CopyTree(src, dst string) error {
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
			return ShareFile(p, to)
		}
		return nil
	})
}

// ShareFile makes dst a copy of the regular file src: a reflink, a hard
// link, or a byte copy, whichever works first. A file shared so must only
// ever be replaced, never changed in place, except through an FS.
func ShareFile(src, dst string) error {
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

// unshare gives the regular file at p a data block of its own before it is
// changed, when it shares one with another name (a hard link made by a
// checkpoint or a fork, see [CopyTree]): a change in one workspace must
// never show in another, or in a checkpoint. With truncate the content is
// not needed and the name is simply replaced by an empty file with the old
// mode. Links the guest made itself inside the workspace are unshared too:
// after a checkpoint they behave as copies. Callers hold q.mu.
func (q *FS) unshare(p string, truncate bool) sys.Errno {
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
