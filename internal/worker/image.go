package worker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Errors of images, matched with errors.Is.
var (
	// ErrImageCorrupt: the bytes are not a whole, intact image (truncated,
	// damaged, not an image at all).
	ErrImageCorrupt = errors.New("memory image corrupt")
	// ErrImageVersion: an image in a format version this build cannot read.
	ErrImageVersion = errors.New("memory image of another format version")
	// ErrImageStale: an intact image this engine cannot use: it was made by
	// another build of the guest module (or with the kill switch toggled),
	// or it needs more memory than the engine's limit allows.
	ErrImageStale = errors.New("memory image of another guest build")
	// ErrNotSnapshottable: the worker's state cannot be imaged now (no
	// instance, files open in the guest, a guest whose state is not only
	// memory and globals).
	ErrNotSnapshottable = errors.New("worker cannot be snapshotted")
)

// Image is one interpreter's state between runs, for one exact guest
// module: its linear memory and every mutable global, the guest's
// monotonic clock, and how the interpreter was initialised. It holds only
// the 4 KiB pages that differ from the base image it derives from (from
// zero pages when it has none), each as its XOR with the base's page, so
// that what changed is mostly zeros and compresses to little: an image of a
// workspace holding a few variables is a few kilobytes. An Image is
// immutable and safe for concurrent use.
type Image struct {
	lang    string
	module  [32]byte // sha256 of the module bytes as compiled (after prepareModule)
	init    initParams
	parent  [32]byte // content hash of the base image the pages differ from; zero: from zero memory
	memSize uint64   // linear memory size in bytes, a multiple of 64 KiB
	clock   int64    // the guest's monotonic clock when it was taken, ns
	globals []imageGlobal
	pages   []uint32 // indices of the stored pages, increasing
	data    []byte   // len(pages) * imagePage bytes: each page XOR the parent's (zero beyond it)
}

// initParams is how an interpreter was initialised: what a base image is
// built from besides the module, and so part of its identity.
type initParams struct {
	heapLimit uint32 // execd_init's argument
	preload   string // the cell run after init ("" for none)
}

type imageGlobal struct {
	typ byte
	val uint64
}

// imagePage is the granule of images: the operating system's page, so that
// a restore writes, and makes private, only the pages that differ.
const imagePage = 4096

// The encoded form (little endian):
//
//	"execdimg" | u32 version | u32 header length | header | payload | u32 CRC-32C
//
// header: u8 len, language | [32] module sha256 | u32 heap limit |
// u32 len, preload | [32] parent | u64 memory bytes | i64 clock |
// u16 count, then per global u8 type, u64 value | u32 page count |
// u32 payload length. payload: nothing when there are no pages, else one
// zstd frame of the page indices (u32 each) followed by the pages, each
// XORed with the parent's page of the same index (zero beyond the parent,
// or without one). The CRC covers everything before it.
const (
	imageMagic    = "execdimg"
	imageVersion  = 1
	maxHeaderLen  = 1 << 20
	maxMemorySize = 1 << 32 // wasm32
	maxGlobals    = 1 << 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(maxMemorySize/imagePage*(imagePage+4)))
)

// Language is the guest language the image is of.
func (img *Image) Language() string { return img.lang }

// MemoryBytes is the linear memory size the image represents (what a
// worker restored from it holds, and counts against the memory budget).
func (img *Image) MemoryBytes() int64 { return int64(img.memSize) }

// WriteTo writes the encoded, compressed image. It implements io.WriterTo.
func (img *Image) WriteTo(w io.Writer) (int64, error) {
	raw := make([]byte, 0, len(img.pages)*4+len(img.data))
	for _, p := range img.pages {
		raw = binary.LittleEndian.AppendUint32(raw, p)
	}
	raw = append(raw, img.data...)
	var payload []byte // none for an image without pages
	if len(raw) > 0 {
		payload = zenc.EncodeAll(raw, nil)
	}

	var h []byte
	h = append(h, byte(len(img.lang)))
	h = append(h, img.lang...)
	h = append(h, img.module[:]...)
	h = binary.LittleEndian.AppendUint32(h, img.init.heapLimit)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(img.init.preload)))
	h = append(h, img.init.preload...)
	h = append(h, img.parent[:]...)
	h = binary.LittleEndian.AppendUint64(h, img.memSize)
	h = binary.LittleEndian.AppendUint64(h, uint64(img.clock))
	h = binary.LittleEndian.AppendUint16(h, uint16(len(img.globals)))
	for _, g := range img.globals {
		h = append(h, g.typ)
		h = binary.LittleEndian.AppendUint64(h, g.val)
	}
	h = binary.LittleEndian.AppendUint32(h, uint32(len(img.pages)))
	h = binary.LittleEndian.AppendUint32(h, uint32(len(payload)))

	out := make([]byte, 0, 16+len(h)+len(payload)+4)
	out = append(out, imageMagic...)
	out = binary.LittleEndian.AppendUint32(out, imageVersion)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(h)))
	out = append(out, h...)
	out = append(out, payload...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
	n, err := w.Write(out)
	return int64(n), err
}

// ReadImage decodes an image written by WriteTo. Its errors wrap
// ErrImageCorrupt (truncated, damaged or not an image) or ErrImageVersion
// (a format this build does not read). Nothing is trusted before the
// checksum matches, and what is read grows with the bytes that arrive, not
// with the sizes a header claims; but an intact image's pages are decoded
// whatever memory it claims (up to 4 GiB). Engine.ReadImage judges the
// header first.
func ReadImage(r io.Reader) (*Image, error) {
	return readImage(r, maxMemorySize/imagePage, nil)
}

// ReadImage is the package's ReadImage for images to restore on this
// engine: the header is judged by checkImage (the memory limit, and, once
// the guest is compiled, its module and globals) before the payload is
// read, so that an image the engine would refuse costs no more than its
// header and a pass over its bytes, however much memory it claims. Such an
// image's error wraps ErrImageStale when it is intact, ErrImageCorrupt
// otherwise.
func (e *Engine) ReadImage(r io.Reader) (*Image, error) {
	return readImage(r, maxMemorySize/imagePage, func(img *Image) error {
		var g *guest
		if gg, ok := e.guests[img.lang]; ok {
			select {
			case <-gg.ready:
				if gg.err == nil {
					g = gg
				}
			default: // still compiling: Restore judges the rest
			}
		}
		return e.checkImage(g, img)
	})
}

// checkImage is why img cannot be restored on this engine, wrapping
// ErrImageStale, or nil: more memory than Config.MemoryLimitMiB, and on
// g's guest (when g is not nil) another module, a guest whose state is not
// only memory and globals, or other globals. It is the one judge of an
// image's header, for ReadImage before the pages are read and for Restore.
func (e *Engine) checkImage(g *guest, img *Image) error {
	if limit := uint64(e.cfg.MemoryLimitMiB) << 20; img.memSize > limit {
		return fmt.Errorf("%w: the image holds %d MiB of memory, the limit is %d MiB", ErrImageStale, img.memSize>>20, limit>>20)
	}
	if g == nil {
		return nil
	}
	if img.module != g.sum {
		return fmt.Errorf("%w: the %s image was made by module %x, this engine runs %x", ErrImageStale, img.lang, img.module[:6], g.sum[:6])
	}
	if g.info.notImageable != "" {
		return fmt.Errorf("%w: the %s guest's state is not only memory and globals (%s)", ErrImageStale, g.lang, g.info.notImageable)
	}
	if len(img.globals) != len(g.info.globals) {
		return fmt.Errorf("%w: the image has %d globals, the module %d", ErrImageStale, len(img.globals), len(g.info.globals))
	}
	for i, gl := range img.globals {
		if gl.typ != g.info.globals[i].typ {
			return fmt.Errorf("%w: global %d has type 0x%02x, the module's 0x%02x", ErrImageStale, i, gl.typ, g.info.globals[i].typ)
		}
	}
	return nil
}

// readImage is ReadImage for images of at most maxPages stored pages.
// check, when not nil, judges the header before the payload is read; the
// image it refuses is only checksummed, as it streams, to tell whether its
// error or ErrImageCorrupt is returned.
func readImage(r io.Reader, maxPages uint64, check func(*Image) error) (*Image, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrImageCorrupt, fmt.Sprintf(format, args...))
	}
	var pre [16]byte
	if n, err := io.ReadFull(r, pre[:]); err != nil {
		k := min(n, len(imageMagic))
		if string(pre[:k]) != imageMagic[:k] {
			return nil, corrupt("not an execd memory image")
		}
		return nil, corrupt("truncated (%d bytes)", n)
	}
	if string(pre[:8]) != imageMagic {
		return nil, corrupt("not an execd memory image")
	}
	if v := binary.LittleEndian.Uint32(pre[8:]); v != imageVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrImageVersion, v, imageVersion)
	}
	hlen := binary.LittleEndian.Uint32(pre[12:])
	if hlen > maxHeaderLen {
		return nil, corrupt("header of %d bytes", hlen)
	}
	h, err := readN(r, int64(hlen))
	if err != nil {
		return nil, corrupt("truncated header")
	}
	img, np, plen, err := parseHeader(h)
	if err != nil {
		return nil, corrupt("%v", err)
	}
	raw := uint64(np) * (imagePage + 4)
	if uint64(np) > maxPages || uint64(plen) > raw+raw/64+1024 {
		return nil, corrupt("payload of %d bytes for %d pages", plen, np)
	}
	crc := crc32.Update(crc32.Checksum(pre[:], castagnoli), castagnoli, h)
	if check != nil {
		if err := check(img); err != nil {
			if ok, err := intact(r, crc, plen); err != nil {
				return nil, corrupt("truncated payload")
			} else if !ok {
				return nil, corrupt("checksum mismatch")
			}
			return nil, err
		}
	}
	rest, err := readN(r, int64(plen)+4)
	if err != nil {
		return nil, corrupt("truncated payload")
	}
	payload := rest[:plen]
	crc = crc32.Update(crc, castagnoli, payload)
	if got := binary.LittleEndian.Uint32(rest[plen:]); got != crc {
		return nil, corrupt("checksum mismatch")
	}
	if err := img.decodePayload(payload, int(np)); err != nil {
		return nil, corrupt("%v", err)
	}
	return img, nil
}

// intact reads the rest of an image, n bytes of payload and the CRC,
// continuing crc over the payload as it streams (nothing is kept), and
// reports whether the CRC matches.
func intact(r io.Reader, crc uint32, n uint32) (bool, error) {
	buf := make([]byte, 64<<10)
	for left := int64(n); left > 0; {
		k, err := io.ReadFull(r, buf[:min(left, int64(len(buf)))])
		if err != nil {
			return false, err
		}
		crc = crc32.Update(crc, castagnoli, buf[:k])
		left -= int64(k)
	}
	var sum [4]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return false, err
	}
	return binary.LittleEndian.Uint32(sum[:]) == crc, nil
}

// readN reads exactly n bytes, allocating as they arrive.
func readN(r io.Reader, n int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err == nil && int64(len(b)) != n {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

// parseHeader reads the header fields and checks each one's range; the
// page indices are checked by decodePayload.
func parseHeader(h []byte) (img *Image, pages, payload uint32, err error) {
	b := &reader{b: h}
	img = &Image{}
	img.lang = string(b.bytes(int(b.byte())))
	copy(img.module[:], b.bytes(32))
	img.init.heapLimit = b.le32()
	img.init.preload = string(b.bytes(int(b.le32())))
	copy(img.parent[:], b.bytes(32))
	img.memSize = b.le64()
	img.clock = int64(b.le64())
	ng := int(b.le16())
	if ng > maxGlobals {
		return nil, 0, 0, fmt.Errorf("%d globals", ng)
	}
	for i := 0; i < ng && b.err == nil; i++ {
		img.globals = append(img.globals, imageGlobal{typ: b.byte(), val: b.le64()})
	}
	pages = b.le32()
	payload = b.le32()
	switch {
	case b.err != nil:
		return nil, 0, 0, errors.New("header too short")
	case b.off != len(h):
		return nil, 0, 0, errors.New("trailing bytes in the header")
	case img.lang == "":
		return nil, 0, 0, errors.New("no language")
	case img.memSize > maxMemorySize || img.memSize%65536 != 0:
		return nil, 0, 0, fmt.Errorf("memory size %d", img.memSize)
	case uint64(pages) > img.memSize/imagePage:
		return nil, 0, 0, fmt.Errorf("%d pages in %d bytes of memory", pages, img.memSize)
	}
	return img, pages, payload, nil
}

// decodePayload inflates the n pages of an image and checks their indices.
func (img *Image) decodePayload(payload []byte, n int) error {
	raw := uint64(n) * (imagePage + 4)
	if n == 0 {
		if len(payload) != 0 {
			return errors.New("payload without pages")
		}
		return nil
	}
	var fh zstd.Header
	if err := fh.Decode(payload); err != nil {
		return fmt.Errorf("payload: %v", err)
	}
	if !fh.HasFCS || fh.FrameContentSize != raw {
		return fmt.Errorf("payload frame holds %d bytes, want %d", fh.FrameContentSize, raw)
	}
	out, err := zdec.DecodeAll(payload, make([]byte, 0, raw))
	if err != nil {
		return fmt.Errorf("payload: %v", err)
	}
	if uint64(len(out)) != raw {
		return fmt.Errorf("payload holds %d bytes, want %d", len(out), raw)
	}
	img.pages = make([]uint32, n)
	last := int64(-1)
	for i := range img.pages {
		p := binary.LittleEndian.Uint32(out[i*4:])
		if int64(p) <= last || uint64(p) >= img.memSize/imagePage {
			return fmt.Errorf("page index %d after %d", p, last)
		}
		img.pages[i], last = p, int64(p)
	}
	img.data = out[n*4:]
	return nil
}
