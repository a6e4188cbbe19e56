package worker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
)

// imageSize reads the width and height of an image the code shows, of the
// media type ImageType gave it, from as much of it as its format needs to
// state them: PNG's header chunk (its checksum included) and JPEG's frame
// header through the standard library's decoders, GIF's logical screen,
// WebP's first chunk (RFC 9649, section 2.5 and 2.7). Magic numbers alone
// would let show() attach any bytes behind "\x89PNG\r\n\x1a\n" to a result
// that a client renders as an image. An error says why b is not one.
func imageSize(mime string, b []byte) (width, height int, err error) {
	var cfg image.Config
	switch mime {
	case "image/png":
		cfg, err = png.DecodeConfig(bytes.NewReader(b))
	case "image/jpeg":
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(b))
	case "image/gif":
		cfg, err = gif.DecodeConfig(bytes.NewReader(b))
	case "image/webp":
		cfg.Width, cfg.Height, err = webpSize(b)
	default:
		err = fmt.Errorf("%q is not an image type execd shows", mime)
	}
	if err == nil && (cfg.Width <= 0 || cfg.Height <= 0) {
		err = fmt.Errorf("%s of %dx%d pixels", mime, cfg.Width, cfg.Height)
	}
	if err != nil {
		return 0, 0, err
	}
	return cfg.Width, cfg.Height, nil
}

var errWebPShort = errors.New("webp: the first chunk is cut short")

// webpSize reads a WebP file's canvas size from its first chunk: "VP8 "
// (lossy: a key frame's header), "VP8L" (lossless: the image header) or
// "VP8X" (extended: the canvas size).
func webpSize(b []byte) (int, int, error) {
	le24 := func(p []byte) int { return int(p[0]) | int(p[1])<<8 | int(p[2])<<16 }
	if len(b) < 20 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return 0, 0, errors.New("webp: no RIFF WEBP header")
	}
	chunk, size, p := string(b[12:16]), binary.LittleEndian.Uint32(b[16:20]), b[20:]
	need := map[string]uint32{"VP8 ": 10, "VP8L": 5, "VP8X": 10}[chunk]
	if need == 0 {
		return 0, 0, fmt.Errorf("webp: first chunk %q is none of VP8, VP8L, VP8X", chunk)
	}
	if size < need || len(p) < int(need) {
		return 0, 0, errWebPShort
	}
	switch chunk {
	case "VP8 ":
		// A 3-byte frame tag whose bit 0 is clear for a key frame, the
		// start code 9d 01 2a, then 14-bit width and height (RFC 6386,
		// section 9.1).
		if p[0]&1 != 0 || p[3] != 0x9d || p[4] != 0x01 || p[5] != 0x2a {
			return 0, 0, errors.New("webp: VP8 data does not start with a key frame")
		}
		return int(binary.LittleEndian.Uint16(p[6:8]) & 0x3fff), int(binary.LittleEndian.Uint16(p[8:10]) & 0x3fff), nil
	case "VP8L":
		// The signature 0x2f, then width-1 and height-1 in 14 bits each,
		// an alpha bit and a 3-bit version that must be 0.
		bits := binary.LittleEndian.Uint32(p[1:5])
		if p[0] != 0x2f || bits>>29 != 0 {
			return 0, 0, errors.New("webp: VP8L data has no lossless image header")
		}
		return int(bits&0x3fff) + 1, int(bits>>14&0x3fff) + 1, nil
	default: // VP8X: flags, 3 reserved bytes, canvas width-1 and height-1 in 24 bits each
		return le24(p[4:7]) + 1, le24(p[7:10]) + 1, nil
	}
}
