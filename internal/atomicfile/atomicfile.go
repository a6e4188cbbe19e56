// Package atomicfile replaces files whole: a reader, or a process started
// after a crash, sees a file's old content or its new content, never a
// part. The new content is written to a temporary file in the same
// directory (so the rename that puts it in place never crosses file
// systems) and renamed over the old one.
package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// TempPrefix starts the name of every temporary file Write makes. A crash
// may leave such a file beside the one being replaced; whoever owns the
// directory removes them (workspace's sweepTemps does it for the data
// directory), and names of its own that start so are treated alike.
const TempPrefix = "~tmp"

// Durability says what Write waits for.
type Durability int

const (
	// Atomic: the replacement is all or nothing, but after a power cut
	// the file may hold its older content.
	Atomic Durability = iota
	// Durable: the temporary file is synced before the rename and the
	// directory after it, so once Write returns the new content survives
	// a power cut.
	Durable
)

// Write replaces the file at path with what write puts into f, a new file
// (unbuffered, opened for reading and writing, with mode perm) in path's
// directory, which must exist. When write or any step fails, path is left
// as it was and the temporary file is removed.
func Write(path string, perm fs.FileMode, d Durability, write func(f *os.File) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix+"*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := write(f); err != nil {
		return err
	}
	if d == Durable {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	ok = true
	if d == Durable {
		return SyncDir(dir)
	}
	return nil
}

// SyncDir makes the renames done in dir durable (for a rename of one's
// own, say of a directory built under TempPrefix).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ErrNotRegular is what Open and ReadFile return, wrapped in an
// *fs.PathError, for a path that names something other than a regular file
// (a FIFO, a device, a socket, a directory).
var ErrNotRegular = errors.New("not a regular file")

// Open opens the regular file at path for reading. It never waits: a FIFO
// is opened without blocking (O_NONBLOCK) and, like anything else that is
// not a regular file, refused with ErrNotRegular, so that a file planted
// where one of Write's belongs cannot hang its reader.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return f, nil
}

// ReadFile is os.ReadFile through Open.
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
