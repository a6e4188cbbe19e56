package sandbox

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
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
// the guest expects it. Languages without an entry need none. Python's is
// /usr: the standard library in local/lib/python3.11, the kit of
// pure-Python packages in lib/python3/dist-packages, time zone data in
// share/zoneinfo.
var mounts = map[string]struct{ zip, guestPath string }{
	"python": {"python-stdlib.zip", "/usr"},
}

// tree is a language's loaded file tree.
type tree struct {
	fsys fs.FS
	sum  [32]byte // sha256 of the zip
}

var (
	filesMu    sync.Mutex
	filesCache = map[string]tree{}
)

// Files returns the read-only file tree the guest for lang mounts at
// guestPath (Python: its standard library, kit and time zones), or a nil fsys when the language
// needs none. The tree is read from the embedded zip (or EXECD_GUEST_DIR) on
// first use and shared by every caller; it is safe for concurrent use.
func Files(lang string) (fsys fs.FS, guestPath string, err error) {
	t, err := load(lang)
	return t.fsys, mounts[lang].guestPath, err
}

// FilesSum returns the sha256 of the read-only file tree of lang's guest
// (of its zip), the zero sum when the language needs none. What the guest
// read from those files at initialisation is in its memory, so the sum is
// part of the identity of a pre-initialised interpreter.
func FilesSum(lang string) ([32]byte, error) {
	t, err := load(lang)
	return t.sum, err
}

func load(lang string) (tree, error) {
	m, ok := mounts[lang]
	if !ok {
		return tree{}, nil
	}
	filesMu.Lock()
	defer filesMu.Unlock()
	if t, ok := filesCache[lang]; ok {
		return t, nil
	}
	var ra io.ReaderAt
	var size int64
	var err error
	if dir := os.Getenv("EXECD_GUEST_DIR"); dir != "" {
		b, rerr := os.ReadFile(filepath.Join(dir, m.zip))
		ra, size, err = bytes.NewReader(b), int64(len(b)), rerr
	} else {
		// The embedded file reads at offsets without a copy (ReadFile would
		// make one).
		var f fs.File
		if f, err = guests.Open("guests/" + m.zip); err == nil {
			var st fs.FileInfo
			if st, err = f.Stat(); err == nil {
				ra, size = f.(io.ReaderAt), st.Size()
			}
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return tree{}, fmt.Errorf("guest %s files %s %w: run make guests", lang, m.zip, ErrNotBuilt)
	}
	if err != nil {
		return tree{}, fmt.Errorf("guest %s files: %w", lang, err)
	}
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return tree{}, fmt.Errorf("guest %s files %s: %w", lang, m.zip, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(ra, 0, size)); err != nil {
		return tree{}, fmt.Errorf("guest %s files %s: %w", lang, m.zip, err)
	}
	t := tree{fsys: zipFS{zr}}
	h.Sum(t.sum[:0])
	filesCache[lang] = t
	return t, nil
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
