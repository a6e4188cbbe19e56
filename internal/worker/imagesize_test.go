package worker

import (
	"encoding/binary"
	"strings"
	"testing"
)

// riff is a WebP file whose first chunk is fourcc with payload p.
func riff(fourcc string, p []byte) []byte {
	b := []byte("RIFF\x00\x00\x00\x00WEBP" + fourcc + "\x00\x00\x00\x00")
	binary.LittleEndian.PutUint32(b[4:], uint32(12+len(p)))
	binary.LittleEndian.PutUint32(b[16:], uint32(len(p)))
	return append(b, p...)
}

// webpLossless is the header of a lossless WebP of w x h pixels (RFC 9649,
// section 3.2: the signature, then width-1 and height-1 in 14 bits each).
func webpLossless(w, h int) []byte {
	p := []byte{0x2f, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(p[1:], uint32(w-1)|uint32(h-1)<<14)
	return riff("VP8L", p)
}

func TestImageSize(t *testing.T) {
	t.Parallel()
	vp8 := func(frameTag byte, w, h uint16) []byte {
		p := []byte{frameTag, 0, 0, 0x9d, 0x01, 0x2a, 0, 0, 0, 0}
		binary.LittleEndian.PutUint16(p[6:], w)
		binary.LittleEndian.PutUint16(p[8:], h)
		return riff("VP8 ", p)
	}
	vp8x := riff("VP8X", []byte{0x10, 0, 0, 0, 0xff, 0x03, 0, 0x01, 0, 0})
	for _, c := range []struct {
		name string
		data []byte
		w, h int
		err  string // in the error; "" for none
	}{
		{"png", pngBytes, 3, 2, ""},
		{"jpeg", jpegBytes, 3, 2, ""},
		{"gif", gifBytes, 3, 2, ""},
		{"webp lossless", webpLossless(3, 2), 3, 2, ""},
		{"webp lossless, largest", webpLossless(16384, 16384), 16384, 16384, ""},
		{"webp lossy", vp8(0, 640|0xc000, 480), 640, 480, ""}, // the top two bits are the scale
		{"webp extended", vp8x, 1024, 2, ""},
		{"png signature only", []byte("\x89PNG\r\n\x1a\n"), 0, 0, "EOF"},
		{"png with a script", []byte("\x89PNG\r\n\x1a\n<script>alert(1)</script>"), 0, 0, "EOF"},
		{"png with a broken checksum", append(append([]byte(nil), pngBytes[:29]...), 0, 0, 0, 0), 0, 0, "checksum"},
		{"jpeg signature only", []byte("\xff\xd8\xff"), 0, 0, "EOF"},
		{"gif of 0x0", []byte("GIF89a\x00\x00\x00\x00\x00\x00\x00"), 0, 0, "0x0"},
		{"webp cut short", webpLossless(3, 2)[:22], 0, 0, "cut short"},
		{"webp with an unknown chunk", riff("ALPH", make([]byte, 10)), 0, 0, "none of"},
		{"webp lossy, not a key frame", vp8(1, 640, 480), 0, 0, "key frame"},
		{"webp lossy, 0 wide", vp8(0, 0, 480), 0, 0, "0x480"},
		{"webp lossless, bad signature", riff("VP8L", []byte{0x2e, 0, 0, 0, 0}), 0, 0, "lossless"},
		{"webp lossless, version 1", riff("VP8L", []byte{0x2f, 0, 0, 0, 0x20}), 0, 0, "lossless"},
		{"webp chunk size below its header", append(riff("VP8X", nil), make([]byte, 10)...), 0, 0, "cut short"},
	} {
		w, h, err := imageSize(ImageType(c.data), c.data)
		switch {
		case c.err == "" && (err != nil || w != c.w || h != c.h):
			t.Errorf("%s: %dx%d, %v; want %dx%d", c.name, w, h, err, c.w, c.h)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %dx%d, %v; want an error with %q", c.name, w, h, err, c.err)
		}
	}
	if _, _, err := imageSize("", pngBytes); err == nil {
		t.Error("an image of no type was read")
	}
}

// imageSize never panics, and what it accepts has a size.
func FuzzImageSize(f *testing.F) {
	for _, b := range [][]byte{pngBytes, jpegBytes, gifBytes, webpLossless(3, 2), riff("VP8X", make([]byte, 10)),
		riff("VP8 ", []byte{0, 0, 0, 0x9d, 0x01, 0x2a, 1, 0, 1, 0})} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		mime := ImageType(b)
		if mime == "" {
			return
		}
		if w, h, err := imageSize(mime, b); err == nil && (w <= 0 || h <= 0) {
			t.Fatalf("%s accepted at %dx%d", mime, w, h)
		}
	})
}
