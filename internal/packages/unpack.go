package packages

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// maxFiles bounds the entries of one package: the largest real packages
// have a few thousand files.
const maxFiles = 50_000

// extractor writes an archive's entries under root, refusing any that
// would land outside it and bounding the bytes written.
type extractor struct {
	root   string
	pkg    string
	max    int64 // packages.max_package_bytes
	bytes  int64
	files  int
	dirs   map[string]bool
	linked int // links inside the package, skipped
}

func newExtractor(root, pkg string, max int64) *extractor {
	return &extractor{root: root, pkg: pkg, max: max, dirs: map[string]bool{".": true}}
}

// entryPath is an archive entry's name made safe: slash-separated,
// relative, without "." or ".." parts. ok is false for an entry that
// names the root itself.
func entryPath(name string) (p string, ok bool, err error) {
	if strings.ContainsAny(name, "\x00\\") {
		return "", false, errors.New("has a NUL or a backslash")
	}
	if strings.HasPrefix(name, "/") {
		return "", false, errors.New("is an absolute path")
	}
	var parts []string
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return "", false, errors.New("goes up a directory")
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return "", false, nil
	}
	return strings.Join(parts, "/"), true, nil
}

func (x *extractor) unsafe(name, why string) error {
	return errorf(CodeUnsafe, x.pkg, "%s is not safe to unpack: entry %q %s", x.pkg, name, why)
}

func (x *extractor) mkdirAll(rel string) error {
	if x.dirs[rel] {
		return nil
	}
	if err := x.mkdirAll(path.Dir(rel)); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(x.root, filepath.FromSlash(rel)), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	x.dirs[rel] = true
	return nil
}

func (x *extractor) dir(rel string) error {
	x.files++
	if x.files > maxFiles {
		return errorf(CodeTooLarge, x.pkg, "%s has more than %d files", x.pkg, maxFiles)
	}
	return x.mkdirAll(rel)
}

// file writes one regular file; its bytes count against max, whatever
// the archive declared.
func (x *extractor) file(rel string, mode fs.FileMode, r io.Reader) error {
	if err := x.dir(path.Dir(rel)); err != nil {
		return err
	}
	perm := fs.FileMode(0o444)
	if mode&0o111 != 0 {
		perm = 0o555
	}
	dst := filepath.Join(x.root, filepath.FromSlash(rel))
	// O_NOFOLLOW: nothing here makes links, so none can be followed out.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if errors.Is(err, fs.ErrExist) {
		return x.unsafe(rel, "is in the archive twice")
	}
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, x.max-x.bytes+1))
	x.bytes += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if x.bytes > x.max {
		return errorf(CodeTooLarge, x.pkg, "%s unpacks to more than the %d bytes of packages.max_package_bytes", x.pkg, x.max)
	}
	return nil
}

// link checks a symbolic or hard link entry: one pointing out of the
// package is refused; one inside it is skipped, as npm itself skips
// links in package tarballs. hard is whether target is relative to the
// archive's root (a hard link) rather than to the link's directory;
// name is the entry as the archive names it, for the message.
func (x *extractor) link(name, rel, target string, hard bool) error {
	if rel == "" {
		return x.unsafe(name, "is a link in place of the package itself")
	}
	t := target
	if !hard {
		t = path.Join(path.Dir(rel), target)
	}
	if strings.HasPrefix(target, "/") || t == ".." || strings.HasPrefix(t, "../") || strings.ContainsAny(target, "\x00\\") {
		return x.unsafe(name, "is a link to "+quoteShort(target)+", outside the package")
	}
	x.linked++
	return nil
}

func quoteShort(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return `"` + s + `"`
}

// untarGz unpacks an npm package tarball under root: every entry's first
// path part ("package/") is dropped, as npm does. The gzip stream is read
// at most twice max_package_bytes (file bytes count against it once, tar
// headers and padding make the rest), so a gzip bomb stops early.
func untarGz(r io.Reader, root, pkg string, max int64) (*extractor, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, errorf(CodeUnsafe, pkg, "%s is not a gzip file: %v", pkg, err)
	}
	limit := &limitedReader{r: zr, n: 2*max + 1<<20}
	tr := tar.NewReader(limit)
	x := newExtractor(root, pkg, max)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if limit.n <= 0 {
				return nil, errorf(CodeTooLarge, pkg, "%s unpacks to more than the %d bytes of packages.max_package_bytes", pkg, max)
			}
			return nil, errorf(CodeUnsafe, pkg, "%s is not a valid tarball: %v", pkg, err)
		}
		rel, ok, err := entryPath(h.Name)
		if err != nil {
			return nil, x.unsafe(h.Name, err.Error())
		}
		if !ok {
			continue
		}
		_, rel, _ = strings.Cut(rel, "/") // the first part, "package"
		switch h.Typeflag {
		case tar.TypeReg: // archive/tar reads the old TypeRegA as TypeReg
			if rel == "" {
				continue
			}
			err = x.file(rel, h.FileInfo().Mode(), tr)
		case tar.TypeDir:
			if rel == "" {
				continue
			}
			err = x.dir(rel)
		case tar.TypeSymlink:
			// Checked where it lands, the first part dropped: "package/l"
			// linking to "../x" points out of the package.
			err = x.link(h.Name, rel, h.Linkname, false)
		case tar.TypeLink:
			// A hard link names its target from the archive's root.
			lt, ok, lerr := entryPath(h.Linkname)
			_, lt, _ = strings.Cut(lt, "/")
			if lerr != nil || !ok || lt == "" {
				return nil, x.unsafe(h.Name, "is a link to "+quoteShort(h.Linkname)+", outside the package")
			}
			err = x.link(h.Name, rel, lt, true)
		default:
			continue // devices, FIFOs: nothing a package needs
		}
		if err != nil {
			if limit.n <= 0 {
				return nil, errorf(CodeTooLarge, pkg, "%s unpacks to more than the %d bytes of packages.max_package_bytes", pkg, max)
			}
			return nil, err
		}
	}
	if x.files == 0 {
		return nil, errorf(CodeUnsafe, pkg, "%s is an empty tarball", pkg)
	}
	return x, nil
}

// limitedReader is io.LimitedReader whose n says afterwards whether the
// limit was reached.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("over the size limit")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// unzip unpacks a wheel under root. rename maps an entry's safe path to
// where it goes ("" to skip it). The sizes the archive declares are added
// up first and refused over max; then every file is read with the bytes
// left as its limit, whatever it declared.
func unzip(f io.ReaderAt, size int64, root, pkg string, max int64, rename func(string) string) (*extractor, error) {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return nil, errorf(CodeUnsafe, pkg, "%s is not a zip file: %v", pkg, err)
	}
	if len(zr.File) > maxFiles {
		return nil, errorf(CodeTooLarge, pkg, "%s has more than %d files", pkg, maxFiles)
	}
	var declared uint64
	for _, zf := range zr.File {
		declared += zf.UncompressedSize64
		if declared > uint64(max) {
			return nil, errorf(CodeTooLarge, pkg, "%s declares more than the %d bytes of packages.max_package_bytes unpacked", pkg, max)
		}
	}
	x := newExtractor(root, pkg, max)
	for _, zf := range zr.File {
		rel, ok, err := entryPath(zf.Name)
		if err != nil {
			return nil, x.unsafe(zf.Name, err.Error())
		}
		if !ok {
			continue
		}
		mode := zf.Mode()
		if mode&fs.ModeSymlink != 0 {
			target, err := readSmall(zf)
			if err != nil {
				return nil, errorf(CodeUnsafe, pkg, "%s is not a valid zip file: %v", pkg, err)
			}
			if err := x.link(zf.Name, rel, target, false); err != nil {
				return nil, err
			}
			continue
		}
		if rel = rename(rel); rel == "" {
			continue
		}
		if mode.IsDir() || strings.HasSuffix(zf.Name, "/") {
			if err := x.dir(rel); err != nil {
				return nil, err
			}
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, errorf(CodeUnsafe, pkg, "%s is not a valid zip file: %v", pkg, err)
		}
		err = x.file(rel, mode, rc)
		rc.Close()
		if err != nil {
			var e *Error
			if !errors.As(err, &e) && (errors.Is(err, zip.ErrChecksum) || errors.Is(err, zip.ErrFormat) || errors.Is(err, io.ErrUnexpectedEOF)) {
				return nil, errorf(CodeUnsafe, pkg, "%s is not a valid zip file: %v", pkg, err)
			}
			return nil, err
		}
	}
	return x, nil
}

func readSmall(zf *zip.File) (string, error) {
	rc, err := zf.Open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 4096))
	return string(b), err
}
