package workspace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"execd/internal/atomicfile"
)

// An image file is the Factory's encoding of an image followed by a
// trailer that binds it to one workspace's interpreter of one language:
//
//	image | u8 len, principal directory | u8 len, id | u8 len, language | u16 length of those | "execdws" 0x01
//
// (a trailer, not a header, so that the file stays an image any reader of
// the Factory's encoding reads, which stops at the image's end). An image
// is restored only into the interpreter it is bound to: one copied from
// another workspace, another principal's or another language's file is
// ErrImageCorrupt (the workspace starts fresh, says so and logs a warning),
// never another user's state passed off as this one's. A file without the
// trailer that the Factory reads, an image of an execd that did not bind
// its images, cannot be told from a copy: ErrImageStale (so is a file
// whose trailer was damaged until it no longer reads as one). A fork rewrites
// the binding of every image it takes over (rebindImage); checkpoints are
// of the same workspace and share the files as they are.
const imageFileMagic = "execdws\x01"

// binding names the interpreter an image belongs to.
type binding struct {
	key
	lang string
}

// trailer is b's trailer.
func (b binding) trailer() []byte {
	var t []byte
	for _, s := range []string{b.pdir, b.id, b.lang} {
		t = append(t, byte(len(s)))
		t = append(t, s...)
	}
	t = binary.LittleEndian.AppendUint16(t, uint16(len(t)))
	return append(t, imageFileMagic...)
}

// errUnbound: the file has no trailer; it may be an image of an execd that
// did not bind its images.
var errUnbound = errors.New("the image file has no binding")

// readBinding reads the trailer of the size bytes of r and returns the
// binding and the length of the image before it; without a trailer,
// errUnbound and size.
func readBinding(r io.ReaderAt, size int64) (binding, int64, error) {
	var tail [2 + len(imageFileMagic)]byte
	end := int64(len(tail))
	if size < end {
		return binding{}, size, errUnbound
	}
	if _, err := r.ReadAt(tail[:], size-end); err != nil {
		return binding{}, size, err
	}
	if string(tail[2:]) != imageFileMagic {
		return binding{}, size, errUnbound
	}
	n := int64(binary.LittleEndian.Uint16(tail[:2]))
	if n > size-end {
		return binding{}, 0, fmt.Errorf("%w: image trailer of %d bytes in %d", ErrImageCorrupt, n, size)
	}
	t := make([]byte, n)
	if _, err := r.ReadAt(t, size-end-n); err != nil {
		return binding{}, 0, err
	}
	var f [3]string
	for i := range f {
		if len(t) == 0 || int(t[0]) > len(t)-1 {
			return binding{}, 0, fmt.Errorf("%w: damaged image trailer", ErrImageCorrupt)
		}
		f[i], t = string(t[1:1+int(t[0])]), t[1+int(t[0]):]
	}
	if len(t) != 0 {
		return binding{}, 0, fmt.Errorf("%w: damaged image trailer", ErrImageCorrupt)
	}
	return binding{key{f[0], f[1]}, f[2]}, size - end - n, nil
}

// writeImage writes img, bound to b, to b.lang's image file in stateDir
// atomically and durably, with its modification time set to lastUsed (the
// idle clock of idle_ttl). It returns the bytes written.
func writeImage(stateDir string, b binding, img Image, lastUsed time.Time) (int64, error) {
	if err := mkdirState(stateDir); err != nil { // made when first needed (checkDirs)
		return 0, err
	}
	return writeImageFile(imagePath(stateDir, b.lang), b, lastUsed, func(w io.Writer) (int64, error) { return img.WriteTo(w) })
}

func writeImageFile(p string, b binding, lastUsed time.Time, body func(io.Writer) (int64, error)) (int64, error) {
	var n int64
	err := atomicfile.Write(p, 0o600, atomicfile.Durable, func(f *os.File) error {
		bw := bufio.NewWriterSize(f, 256<<10)
		k, err := body(bw)
		if err != nil {
			return err
		}
		t := b.trailer()
		bw.Write(t)
		n = k + int64(len(t))
		return bw.Flush()
	})
	if err != nil {
		return 0, err
	}
	if !lastUsed.IsZero() {
		_ = os.Chtimes(p, lastUsed, lastUsed)
	}
	return n, nil
}

// openImage opens b.lang's image file in stateDir and checks that it is
// bound to b, and returns the image's encoding (all of the file, with
// errUnbound, when it has no trailer). An image that is not a regular file
// (a FIFO, a device) is corrupt, and never waited for.
func openImage(stateDir string, b binding) (*os.File, io.Reader, error) {
	file, err := atomicfile.Open(imagePath(stateDir, b.lang))
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil, fmt.Errorf("%w: the image file is missing", ErrImageCorrupt)
		case errors.Is(err, atomicfile.ErrNotRegular):
			return nil, nil, fmt.Errorf("%w: %w", ErrImageCorrupt, err)
		}
		return nil, nil, err
	}
	st, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, nil, err
	}
	got, n, err := readBinding(file, st.Size())
	if err == nil && got != b {
		err = fmt.Errorf("%w: the image belongs to another workspace or language", ErrImageCorrupt)
	}
	if err != nil && err != errUnbound {
		file.Close()
		return nil, nil, err
	}
	return file, bufio.NewReaderSize(io.NewSectionReader(file, 0, n), 256<<10), err
}

// errStaleUnbound is the error of an intact image without a binding.
var errStaleUnbound = fmt.Errorf("%w: the image was saved by an execd that did not bind images to their workspace", ErrImageStale)

// readImage decodes b.lang's image, bound to b, through the Factory.
func readImage(f Factory, stateDir string, b binding) (Image, error) {
	file, r, err := openImage(stateDir, b)
	if file != nil {
		defer file.Close()
	}
	if err == errUnbound {
		// Stale when the Factory reads it (an older execd's), else what
		// the Factory says (corrupt).
		if _, err := f.ReadImage(r); err != nil {
			return nil, err
		}
		return nil, errStaleUnbound
	}
	if err != nil {
		return nil, err
	}
	return f.ReadImage(r)
}

// rebindImage copies from's image file in fromDir to to's in toDir, bound
// to to (a fork takes over its source's hibernated images). The image
// itself is copied as it is, not decoded.
func rebindImage(fromDir string, from binding, toDir string, to binding) error {
	file, r, err := openImage(fromDir, from)
	if file != nil {
		defer file.Close()
	}
	if err == errUnbound {
		return errStaleUnbound
	}
	if err != nil {
		return err
	}
	var lastUsed time.Time // the idle clock goes on
	if st, err := file.Stat(); err == nil {
		lastUsed = st.ModTime()
	}
	_, err = writeImageFile(imagePath(toDir, to.lang), to, lastUsed, func(w io.Writer) (int64, error) { return io.Copy(w, r) })
	return err
}
