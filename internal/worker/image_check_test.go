package worker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"runtime"
	"testing"
)

// craftedImage is an intact image (its checksum matches) of lang claiming
// memSize bytes of memory, every page stored, whose payload is a zstd frame
// of run-length blocks: a few kilobytes that inflate to all of it.
func craftedImage(lang string, memSize uint64) []byte {
	pages := uint32(memSize / imagePage)
	raw := uint64(pages) * (imagePage + 4)
	const block = 128 << 10
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0} // magic; single segment, 8-byte content size
	frame = binary.LittleEndian.AppendUint64(frame, raw)
	for left := raw; left > 0; {
		n := min(left, block)
		left -= n
		hdr := uint32(n)<<3 | 1<<1 // an RLE block of n bytes
		if left == 0 {
			hdr |= 1 // the last
		}
		frame = append(frame, byte(hdr), byte(hdr>>8), byte(hdr>>16), 0)
	}
	var h []byte
	h = append(h, byte(len(lang)))
	h = append(h, lang...)
	h = append(h, make([]byte, 32)...) // module
	h = binary.LittleEndian.AppendUint32(h, 0)
	h = binary.LittleEndian.AppendUint32(h, 0) // no preload
	h = append(h, make([]byte, 32)...)         // no parent
	h = binary.LittleEndian.AppendUint64(h, memSize)
	h = binary.LittleEndian.AppendUint64(h, 0)
	h = binary.LittleEndian.AppendUint16(h, 0)
	h = binary.LittleEndian.AppendUint32(h, pages)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(frame)))
	out := []byte(imageMagic)
	out = binary.LittleEndian.AppendUint32(out, imageVersion)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(h)))
	out = append(out, h...)
	out = append(out, frame...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

// An image claiming more memory than the engine allows is refused from its
// header: stale when it is intact, corrupt when not, and in either case
// without inflating (allocating) the memory it claims.
func TestEngineReadImageJudgesTheHeaderFirst(t *testing.T) {
	e := testEngine(t, true)
	img := craftedImage("javascript", 1<<30)
	if len(img) > 64<<10 {
		t.Fatalf("the crafted image is %d bytes", len(img))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := e.ReadImage(bytes.NewReader(img))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrImageStale) {
		t.Errorf("ReadImage of a 1 GiB image under a %d MiB limit = %v, want ErrImageStale", e.cfg.MemoryLimitMiB, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("refusing it allocated %d MiB", got>>20)
	}
	damaged := bytes.Clone(img)
	damaged[len(damaged)-20] ^= 0x01
	if _, err := e.ReadImage(bytes.NewReader(damaged)); !errors.Is(err, ErrImageCorrupt) {
		t.Errorf("ReadImage of a damaged one = %v, want ErrImageCorrupt", err)
	}
	if _, err := e.ReadImage(bytes.NewReader(img[:len(img)-100])); !errors.Is(err, ErrImageCorrupt) {
		t.Errorf("ReadImage of a truncated one = %v, want ErrImageCorrupt", err)
	}
	// A small one of another module is stale from its header too; the
	// package's ReadImage, which does not judge headers, reads it through
	// to its pages (all zero: not increasing indices).
	small := craftedImage("javascript", 1<<20)
	if _, err := e.ReadImage(bytes.NewReader(small)); !errors.Is(err, ErrImageStale) {
		t.Errorf("Engine.ReadImage of an image of another module = %v, want ErrImageStale", err)
	}
	if _, err := ReadImage(bytes.NewReader(small)); !errors.Is(err, ErrImageCorrupt) {
		t.Errorf("ReadImage of it = %v, want ErrImageCorrupt (page indices)", err)
	}
}
