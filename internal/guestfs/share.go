package guestfs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tetratelabs/wazero/experimental/sys"

	"execd/internal/atomicfile"
)

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
// ever be replaced, never changed in place, except through an FS. A src
// that is not a regular file is refused (atomicfile.ErrNotRegular), never
// waited for.
func ShareFile(src, dst string) error {
	in, err := atomicfile.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if reflink(in, dst, info.Mode().Perm()) == nil {
		return nil
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	return copyFile(in, dst, info.Mode().Perm())
}

// reflink makes dst, a new file with mode perm, a copy-on-write clone of
// in. It fails on file systems without shared extents (ext4, tmpfs).
func reflink(in *os.File, dst string, perm fs.FileMode) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = clone(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, perm)
	}
	if err != nil {
		os.Remove(dst)
	}
	return err
}

// copyFile copies the bytes of in to a new file dst with mode perm.
func copyFile(in *os.File, dst string, perm fs.FileMode) error {
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
// mode. Either way the name is replaced by a new file (atomicfile), never
// half written. Links the guest made itself inside the workspace are
// unshared too: after a checkpoint they behave as copies. Callers hold q.mu.
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
	// A copy of the data is new data to the Budget; an empty file is not.
	var copied int64
	if !truncate {
		copied = st.Size
	}
	if !q.budget.Take(copied) {
		q.refused.Add(1)
		q.budgetRefused.Add(1)
		return ErrnoQuota
	}
	err := atomicfile.Write(host, st.Mode.Perm(), atomicfile.Atomic, func(f *os.File) error {
		if truncate {
			return nil // the content is not needed
		}
		return copyInto(f, host)
	})
	if err != nil {
		q.budget.Add(-copied)
		return sys.UnwrapOSError(err)
	}
	if truncate {
		q.add(-st.Size) // the name now holds an empty file; its old data stays charged to the Budget with its other names
	}
	return 0
}

// copyInto copies the file at src into the empty file f without sharing
// its data with src by a link: a reflink (which shares only until either
// changes) or the bytes.
func copyInto(f *os.File, src string) error {
	in, err := atomicfile.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if clone(f, in) == nil {
		return nil
	}
	_, err = io.Copy(f, in)
	return err
}
