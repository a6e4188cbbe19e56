// Package jsonscan is a one-pass JSON reader: it validates exactly what
// encoding/json accepts and hands out the members of an object (or the
// items of an array) as raw byte ranges of the input, without building maps
// or reflecting. Only strings with escapes are unescaped, and only when a
// caller asks for them. The JSON-RPC decoder (internal/jsonrpc), the engine
// and the worker's result envelope read with it; it imports nothing of
// execd.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// ErrSyntax reports input that encoding/json would refuse; callers that
// need encoding/json's own wording ask it again.
var ErrSyntax = errors.New("invalid JSON")

// ErrNotObject and ErrNotArray report valid JSON of another kind.
var (
	ErrNotObject = errors.New("not a JSON object")
	ErrNotArray  = errors.New("not a JSON array")
)

// maxDepth is encoding/json's nesting limit: deeper input is refused.
const maxDepth = 10000

type reader struct {
	b     []byte
	i     int
	depth int
}

func (r *reader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// value skips one value, validating it.
func (r *reader) value() error {
	r.space()
	if r.i >= len(r.b) {
		return ErrSyntax
	}
	switch c := r.b[r.i]; {
	case c == '"':
		_, err := r.str()
		return err
	case c == '{':
		return r.object(nil)
	case c == '[':
		return r.array(nil)
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	}
	return ErrSyntax
}

func (r *reader) literal(lit string) error {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		return ErrSyntax
	}
	r.i += len(lit)
	return nil
}

// str skips a string starting at r.i and reports whether it has escapes.
func (r *reader) str() (escaped bool, err error) {
	r.i++ // the opening quote
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return escaped, nil
		case c == '\\':
			escaped = true
			if r.i+1 >= len(r.b) {
				return escaped, ErrSyntax
			}
			switch r.b[r.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				if r.i+6 > len(r.b) {
					return escaped, ErrSyntax
				}
				for _, h := range r.b[r.i+2 : r.i+6] {
					if !isHex(h) {
						return escaped, ErrSyntax
					}
				}
				r.i += 6
			default:
				return escaped, ErrSyntax
			}
		case c < 0x20:
			return escaped, ErrSyntax
		default:
			r.i++
		}
	}
	return escaped, ErrSyntax
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (r *reader) digits() int {
	n := 0
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
		n++
	}
	return n
}

// number skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (r *reader) number() error {
	if r.b[r.i] == '-' {
		r.i++
	}
	if r.i >= len(r.b) {
		return ErrSyntax
	}
	if r.b[r.i] == '0' {
		r.i++
	} else if r.digits() == 0 {
		return ErrSyntax
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if r.digits() == 0 {
			return ErrSyntax
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if r.digits() == 0 {
			return ErrSyntax
		}
	}
	return nil
}

// object reads an object starting at r.i; each (if not nil) gets every
// member's key and raw value.
func (r *reader) object(each func(key, value []byte) error) error {
	if r.depth++; r.depth > maxDepth {
		return ErrSyntax
	}
	defer func() { r.depth-- }()
	r.i++ // '{'
	r.space()
	if r.i < len(r.b) && r.b[r.i] == '}' {
		r.i++
		return nil
	}
	for {
		r.space()
		if r.i >= len(r.b) || r.b[r.i] != '"' {
			return ErrSyntax
		}
		ks := r.i
		escaped, err := r.str()
		if err != nil {
			return err
		}
		ke := r.i
		r.space()
		if r.i >= len(r.b) || r.b[r.i] != ':' {
			return ErrSyntax
		}
		r.i++
		r.space()
		vs := r.i
		if err := r.value(); err != nil {
			return err
		}
		if each != nil {
			key := r.b[ks+1 : ke-1]
			// Escapes, and invalid UTF-8 (U+FFFD for encoding/json), are
			// decoded as encoding/json decodes them.
			if escaped || !utf8.Valid(key) {
				var s string
				if json.Unmarshal(r.b[ks:ke], &s) != nil {
					return ErrSyntax
				}
				key = []byte(s)
			}
			if err := each(key, r.b[vs:r.i]); err != nil {
				return err
			}
		}
		if more, err := r.next('}'); !more {
			return err
		}
	}
}

func (r *reader) array(each func(item []byte) error) error {
	if r.depth++; r.depth > maxDepth {
		return ErrSyntax
	}
	defer func() { r.depth-- }()
	r.i++ // '['
	r.space()
	if r.i < len(r.b) && r.b[r.i] == ']' {
		r.i++
		return nil
	}
	for {
		r.space()
		vs := r.i
		if err := r.value(); err != nil {
			return err
		}
		if each != nil {
			if err := each(r.b[vs:r.i]); err != nil {
				return err
			}
		}
		if more, err := r.next(']'); !more {
			return err
		}
	}
}

// next reads what follows a member or an item: a comma (more follows) or
// the closing bracket.
func (r *reader) next(closing byte) (more bool, err error) {
	r.space()
	if r.i >= len(r.b) {
		return false, ErrSyntax
	}
	switch r.b[r.i] {
	case ',':
		r.i++
		return true, nil
	case closing:
		r.i++
		return false, nil
	}
	return false, ErrSyntax
}

// whole reads b, which must hold one value and nothing but white space
// around it: an object's members go to members when open is '{', an
// array's items to items when it is '['. wrongKind is returned (after
// validating all of b) when the value is valid JSON of another kind.
func whole(b []byte, open byte, members func(key, value []byte) error, items func(item []byte) error, wrongKind error) error {
	// The reader stays on the stack: it is passed to no function value.
	r := reader{b: b}
	r.space()
	if r.i < len(r.b) && r.b[r.i] == open {
		var err error
		if open == '{' {
			err = r.object(members)
		} else {
			err = r.array(items)
		}
		if err != nil {
			return err
		}
	} else {
		if err := r.value(); err != nil {
			return err
		}
		r.space()
		if r.i != len(r.b) {
			return ErrSyntax
		}
		return wrongKind
	}
	r.space()
	if r.i != len(r.b) {
		return ErrSyntax
	}
	return nil
}

// Object validates b as one JSON object and calls each for its members in
// order: the key (unescaped; the slice is valid only during the call) and
// the value's exact bytes. Duplicate keys are passed on as they come, so
// that a caller reading by key can refuse them. An error from each stops
// the walk and is returned; b that is not valid JSON yields an error
// whatever each did.
func Object(b []byte, each func(key, value []byte) error) error {
	return whole(b, '{', each, nil, ErrNotObject)
}

// Array validates b as one JSON array and calls each for its items.
func Array(b []byte, each func(item []byte) error) error {
	return whole(b, '[', nil, each, ErrNotArray)
}

// IsObject reports whether raw, a valid JSON value, is an object.
func IsObject(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

// String decodes raw, a valid JSON value, as a string; ok is false when raw
// is not a string. Strings without escapes are copied without the decoder.
func String(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 || c >= utf8.RuneSelf {
			// Escapes, and bytes that may be invalid UTF-8 (which
			// encoding/json turns into U+FFFD), take the decoder's way.
			if c >= utf8.RuneSelf && utf8.Valid(body) && !bytes.ContainsAny(body, "\\\"") {
				return string(body), true
			}
			if json.Unmarshal(raw, &s) != nil {
				return "", false
			}
			return s, true
		}
	}
	return string(body), true
}

// IsNull reports whether raw is absent or JSON null.
func IsNull(raw []byte) bool {
	return len(raw) == 0 || len(raw) == 4 && string(raw) == "null"
}

// IsNumber reports whether raw is exactly one JSON number, with nothing
// around it.
func IsNumber(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return false
	}
	r := &reader{b: raw}
	return r.number() == nil && r.i == len(raw)
}
