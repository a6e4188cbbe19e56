package admin

import (
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
)

// RecentErrors keeps the last warnings and errors for the status page: the
// log lines at warn level and above (as a zapcore.Core teed beside the
// logger's own) and the requests that ended with a JSON-RPC error. It is
// safe for concurrent use.
type RecentErrors struct {
	mu   sync.Mutex
	ring []ErrorEntry
	next int
	full bool
}

// ErrorEntry is one recent error.
type ErrorEntry struct {
	Time    time.Time         `json:"time"`
	Level   string            `json:"level"`
	Logger  string            `json:"logger,omitempty"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// NewRecentErrors keeps the last n entries (n < 1 means 50).
func NewRecentErrors(n int) *RecentErrors {
	if n < 1 {
		n = 50
	}
	return &RecentErrors{ring: make([]ErrorEntry, n)}
}

// Add records e.
func (r *RecentErrors) Add(e ErrorEntry) {
	r.mu.Lock()
	r.ring[r.next] = e
	r.next = (r.next + 1) % len(r.ring)
	r.full = r.full || r.next == 0
	r.mu.Unlock()
}

// List returns the entries, newest first.
func (r *RecentErrors) List() []ErrorEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.ring)
	}
	out := make([]ErrorEntry, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.ring[(r.next-i+len(r.ring))%len(r.ring)])
	}
	return out
}

// Core is a zapcore.Core that records entries at warn level and above;
// tee it with the logger's core (zapcore.NewTee).
func (r *RecentErrors) Core() zapcore.Core { return &errorCore{r: r} }

type errorCore struct {
	r      *RecentErrors
	fields []zapcore.Field
}

func (c *errorCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c *errorCore) With(fs []zapcore.Field) zapcore.Core {
	return &errorCore{r: c.r, fields: append(append([]zapcore.Field(nil), c.fields...), fs...)}
}

func (c *errorCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *errorCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fs {
		f.AddTo(enc)
	}
	var fields map[string]string
	if len(enc.Fields) > 0 {
		fields = make(map[string]string, len(enc.Fields))
		for k, v := range enc.Fields {
			fields[k] = clip(toString(v), 300)
		}
	}
	c.r.Add(ErrorEntry{Time: e.Time, Level: e.Level.String(), Logger: e.LoggerName, Message: clip(e.Message, 300), Fields: fields})
	return nil
}

func (c *errorCore) Sync() error { return nil }
