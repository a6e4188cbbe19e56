package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// An upstream's messages reach the SDK's decoder through a frameFilter,
// which bounds each one to Options.MaxResultBytes without holding more
// than that in memory: a larger message is read to its end unkept while an
// idScanner picks out its top-level "id", and, when it was a response, an
// error response for that id takes its place, so that the one call fails
// ("too large") and the connection lives on (RATIONALE.md, "How is a
// 50 MB answer refused?").

// frameMode is how an upstream's byte stream delimits messages.
type frameMode int

const (
	framesLines frameMode = iota // stdio: one message a line
	framesSSE                    // an SSE stream: one message per data: line
	framesWhole                  // an application/json body: one message
)

// tooLargeKey marks, in the data of an error response, one that a
// frameFilter made in place of an answer too large to keep; its value is
// the size of that answer.
const tooLargeKey = "execd.tooLarge"

type frameFilter struct {
	r    *bufio.Reader
	mode frameMode
	max  int
	// onDrop is told of each message dropped for its size; onNoise of each
	// stdio line that is not JSON (a banner or a log line printed to
	// stdout by mistake), which is dropped too. Either may be nil.
	onDrop  func(n int64, replaced bool)
	onNoise func(line []byte)

	out []byte // what Read hands on next
	err error  // after out
	acc []byte // a line longer than the reader's buffer, gathered
}

func newFrameFilter(r io.Reader, mode frameMode, max int) *frameFilter {
	return &frameFilter{r: bufio.NewReaderSize(r, 64<<10), mode: mode, max: max}
}

func (f *frameFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		if f.mode == framesWhole {
			f.whole()
		} else {
			f.line()
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// line sets out to the next line as it is passed on (possibly nothing).
// A line that fits in the reader's buffer is handed on from it without a
// copy: out is drained before the reader is read again.
func (f *frameFilter) line() {
	if cap(f.acc) > 1<<20 {
		f.acc = nil // kept for the next long line, unless it grew large
	}
	chunk, err := f.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		f.acc = append(f.acc[:0], chunk...)
		for err == bufio.ErrBufferFull && len(f.acc) <= f.max {
			chunk, err = f.r.ReadSlice('\n')
			f.acc = append(f.acc, chunk...)
		}
		if len(f.acc) > f.max {
			f.drop(f.acc, err)
			f.acc = f.acc[:0]
			return
		}
		chunk = f.acc
	}
	if len(chunk) > f.max+1 || len(chunk) > f.max && chunk[len(chunk)-1] != '\n' {
		f.drop(chunk, err)
		return
	}
	f.err = err
	if f.mode == framesLines {
		if c := firstByte(chunk); c != 0 && c != '{' && c != '[' {
			if f.onNoise != nil {
				f.onNoise(bytes.TrimRight(chunk, "\r\n"))
			}
			return
		}
	}
	f.out = chunk
}

// drop reads the rest of an oversized line, of which head was read (err
// is what reading it said: bufio.ErrBufferFull when the line goes on), and
// puts in out what replaces it.
func (f *frameFilter) drop(head []byte, err error) {
	var s idScanner
	n := int64(len(head))
	data := head
	if f.mode == framesSSE {
		if !bytes.HasPrefix(data, []byte("data:")) {
			s.fail()
		}
		data = bytes.TrimPrefix(data, []byte("data:"))
	}
	s.feed(data)
	for err == bufio.ErrBufferFull {
		var chunk []byte
		chunk, err = f.r.ReadSlice('\n')
		n += int64(len(chunk))
		s.feed(chunk)
	}
	f.err = err
	f.replace(&s, n)
}

// whole reads a message body whole, or drops it when it is too large.
func (f *frameFilter) whole() {
	b, err := io.ReadAll(io.LimitReader(f.r, int64(f.max)+1))
	if err != nil {
		f.err = err
		return
	}
	f.err = io.EOF
	if len(b) <= f.max {
		f.out = b
		return
	}
	var s idScanner
	s.feed(b)
	n := int64(len(b))
	buf := make([]byte, 64<<10)
	for {
		k, err := f.r.Read(buf)
		s.feed(buf[:k])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			f.err = err
			return
		}
	}
	f.replace(&s, n)
}

// replace puts in out the error response that stands for a dropped
// response of n bytes; a dropped request or notification leaves nothing.
func (f *frameFilter) replace(s *idScanner, n int64) {
	id, ok := s.responseID()
	if f.onDrop != nil {
		f.onDrop(n, ok)
	}
	if !ok {
		if f.mode == framesWhole {
			f.err = errors.New("a message too large to read, and not a response")
		}
		return
	}
	msg := []byte(`{"jsonrpc":"2.0","id":`)
	msg = append(msg, id...)
	msg = append(msg, `,"error":{"code":-32603,"message":"answer too large","data":{"`+tooLargeKey+`":`...)
	msg = strconv.AppendInt(msg, n, 10)
	msg = append(msg, "}}}"...)
	switch f.mode {
	case framesLines:
		msg = append(msg, '\n')
	case framesSSE:
		msg = append(append([]byte("data: "), msg...), '\n')
	}
	f.out = msg
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// idScanner reads a JSON object a piece at a time, keeping only what
// answers "is this a response, and to which id?": the raw value of its
// top-level "id" (a string or number) and whether it has a top-level
// "method". It keeps a few bytes, whatever the size of the object.
type idScanner struct {
	state   int // one of scan*
	depth   int // nesting; the object itself is 1
	inStr   bool
	esc     bool
	key     []byte // the top-level key being read (its first maxKey bytes)
	keyLong bool
	cur     string // the top-level key whose value is being read
	// capture: the value of "id" is being copied into id.
	capture bool
	id      []byte
	idOK    bool
	method  bool
}

const (
	scanStart   = iota // before the object
	scanKey            // at depth 1, before a key (or the end)
	scanColon          // at depth 1, after a key
	scanValue          // at depth 1, before a value
	scanInValue        // inside a value (at any depth)
	scanDone
	scanBad
)

const maxKey, maxID = 8, 128

func (s *idScanner) fail() { s.state = scanBad }

func (s *idScanner) feed(b []byte) {
	for _, c := range b {
		if s.state == scanDone || s.state == scanBad {
			if s.state == scanDone && !space(c) {
				s.state = scanBad // something after the object
			}
			continue
		}
		s.step(c)
	}
}

func space(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func (s *idScanner) step(c byte) {
	if s.inStr {
		if s.capture {
			s.keep(c)
		}
		switch {
		case s.esc:
			s.esc = false
			s.addKey(c)
		case c == '\\':
			s.esc = true
			s.keyLong = true // an escaped key is none of those looked for
		case c == '"':
			s.inStr = false
			s.endString()
		default:
			s.addKey(c)
		}
		return
	}
	switch s.state {
	case scanStart:
		switch {
		case space(c):
		case c == '{':
			s.state, s.depth = scanKey, 1
		default:
			s.fail()
		}
	case scanKey:
		switch {
		case space(c):
		case c == '"':
			s.inStr, s.key, s.keyLong = true, s.key[:0], false
		case c == '}':
			s.state = scanDone
		default:
			s.fail()
		}
	case scanColon:
		switch {
		case space(c):
		case c == ':':
			s.state = scanValue
		default:
			s.fail()
		}
	case scanValue:
		switch {
		case space(c):
		case c == '"':
			s.state, s.inStr = scanInValue, true
			s.startValue(c, true)
		case c == '{' || c == '[':
			s.state = scanInValue
			s.depth++
			s.startValue(c, false)
		case c == ',' || c == '}' || c == ']' || c == ':':
			s.fail()
		default:
			s.state = scanInValue
			s.startValue(c, true)
		}
	case scanInValue:
		s.inValue(c)
	}
}

// inValue steps through a value of the top-level object, outside strings.
func (s *idScanner) inValue(c byte) {
	switch c {
	case '"':
		s.inStr = true
		if s.capture { // a string where a literal was being read
			s.fail()
		}
	case '{', '[':
		if s.capture {
			s.fail()
		}
		s.depth++
	case '}', ']':
		if s.depth > 1 {
			s.depth--
			if s.depth == 1 {
				s.endValue()
			}
			return
		}
		s.endValue()
		if c == '}' {
			s.state = scanDone
		} else {
			s.fail()
		}
	case ',':
		if s.depth == 1 {
			s.endValue()
			s.state = scanKey
		}
	default:
		if s.capture {
			if space(c) {
				s.endValue()
				return
			}
			s.keep(c)
		}
	}
}

func (s *idScanner) startValue(c byte, scalar bool) {
	if s.cur == "id" {
		s.idOK = false
		s.id = s.id[:0]
		if scalar {
			s.capture = true
			s.keep(c)
		}
	}
}

// endValue ends a top-level value; for "id", a literal ends here too.
func (s *idScanner) endValue() {
	if s.capture {
		s.capture = false
		s.idOK = len(s.id) <= maxID
	}
	s.cur = ""
}

func (s *idScanner) endString() {
	switch {
	case s.state == scanKey:
		s.state = scanColon
		s.cur = ""
		if !s.keyLong {
			s.cur = string(s.key)
		}
		if s.cur == "method" {
			s.method = true
		}
	case s.capture && s.depth == 1:
		s.endValue()
	}
}

func (s *idScanner) addKey(c byte) {
	if s.state != scanKey {
		return
	}
	if len(s.key) < maxKey {
		s.key = append(s.key, c)
	} else {
		s.keyLong = true
	}
}

func (s *idScanner) keep(c byte) {
	if len(s.id) <= maxID {
		s.id = append(s.id, c)
	}
}

// responseID is the id of the object read, when it was a whole object
// with a string or number id and no method: a response.
func (s *idScanner) responseID() ([]byte, bool) {
	if s.state != scanDone || !s.idOK || s.method || !json.Valid(s.id) {
		return nil, false
	}
	switch s.id[0] {
	case 'n', 't', 'f': // null, true, false: no id to answer
		return nil, false
	}
	return s.id, true
}
