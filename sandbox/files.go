package sandbox

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// mounts maps a language to the read-only file tree its guest needs besides
// /workspace: a zip built next to the module by build-python.sh, and where
// the guest expects it. Languages without an entry need none.
var mounts = map[string]struct{ zip, guestPath string }{
	"python": {"python-stdlib.zip", "/usr/local/lib/python3.11"},
}

var (
	filesMu    sync.Mutex
	filesCache = map[string]fs.FS{}
)

// Files returns the read-only file tree the guest for lang mounts at
// guestPath (Python: its standard library), or a nil fsys when the language
// needs none. The tree is read from the embedded zip (or EXECD_GUEST_DIR) on
// first use and shared by every caller; it is safe for concurrent use.
func Files(lang string) (fsys fs.FS, guestPath string, err error) {
	m, ok := mounts[lang]
	if !ok {
		return nil, "", nil
	}
	filesMu.Lock()
	defer filesMu.Unlock()
	if f, ok := filesCache[lang]; ok {
		return f, m.guestPath, nil
	}
	var ra io.ReaderAt
	var size int64
	if dir := os.Getenv("EXECD_GUEST_DIR"); dir != "" {
		b, rerr := os.ReadFile(filepath.Join(dir, m.zip))
		ra, size, err = bytes.NewReader(b), int64(len(b)), rerr
	} else {
		var f fs.File
		if f, err = guests.Open("guests/" + m.zip); err == nil {
			var st fs.FileInfo
			if st, err = f.Stat(); err == nil {
				ra, size = f.(io.ReaderAt), st.Size()
			}
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("guest %s files %s %w: run make guests", lang, m.zip, ErrNotBuilt)
	}
	if err != nil {
		return nil, "", fmt.Errorf("guest %s files: %w", lang, err)
	}
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return nil, "", fmt.Errorf("guest %s files %s: %w", lang, m.zip, err)
	}
	fsys = zipFS{zr}
	filesCache[lang] = fsys
	return fsys, m.guestPath, nil
}

// zipFS serves a zip archive as a read-only fs.FS whose regular files can
// seek and read at offsets (a guest's buffered I/O asks for both): each open
// inflates the member into memory, which for a standard library module is a
// few microseconds.
type zipFS struct{ zr *zip.Reader }

func (z zipFS) Open(name string) (fs.File, error) {
	f, err := z.zr.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		return f, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return &memFile{Reader: bytes.NewReader(b), info: st}, nil
}

// memFile is an inflated zip member.
type memFile struct {
	*bytes.Reader
	info fs.FileInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return fileInfo{f.info}, nil }
func (f *memFile) Close() error               { return nil }

// fileInfo reports members read-only whatever the zip says.
type fileInfo struct{ fs.FileInfo }

func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return i.FileInfo.ModTime() }
