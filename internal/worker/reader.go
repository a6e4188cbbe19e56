package worker

import (
	"encoding/binary"
	"fmt"
)

// reader reads the binary formats of the worker: WebAssembly modules (LEB128
// numbers, names, sections; module.go, killswitch.go) and memory images
// (little-endian fixed-size fields; image.go). The first error sticks:
// later reads return zero values and leave the offset at the end, so a
// caller checks err once after a run of reads.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(msg string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at byte %d", msg, r.off)
	}
	r.off = len(r.b)
}

func (r *reader) peek() byte {
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	return r.b[r.off]
}

func (r *reader) byte() byte {
	c := r.peek()
	if r.err == nil {
		r.off++
	}
	return c
}

// bytes returns the next n bytes (a slice of the input, not a copy).
func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.off {
		r.fail("unexpected end")
		return nil
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

// leb skips a LEB128 number of at most max bytes.
func (r *reader) leb(max int) {
	for i := 0; i < max; i++ {
		if r.byte()&0x80 == 0 || r.err != nil {
			return
		}
	}
	r.fail("LEB128 number too long")
}

// u32 reads an unsigned LEB128 number of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail("u32 too long")
	return 0
}

func (r *reader) count() (uint32, error) {
	n := r.u32()
	return n, r.err
}

// name reads a WebAssembly name: a LEB128 length and that many bytes.
func (r *reader) name() string {
	n := r.u32()
	return string(r.bytes(int(n)))
}

// le16, le32 and le64 read little-endian fixed-size numbers.
func (r *reader) le16() uint16 {
	if s := r.bytes(2); s != nil {
		return binary.LittleEndian.Uint16(s)
	}
	return 0
}

func (r *reader) le32() uint32 {
	if s := r.bytes(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (r *reader) le64() uint64 {
	if s := r.bytes(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}
