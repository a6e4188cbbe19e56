package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result is a tool's answer as code gets it.
type Result struct {
	// StructuredContent is the tool's structured answer; nil when it gave
	// none.
	StructuredContent json.RawMessage
	// Text is its text blocks, one after the other on lines of their own;
	// an embedded text resource counts as text, a resource link as its
	// URI. Audio and binary resources are left out.
	Text   string
	Images []Image
	// IsError: the tool failed, and says why in Text.
	IsError bool
}

// Image is one image block.
type Image struct {
	MIMEType string
	Data     []byte
}

// result converts the SDK's answer, with the bearer's value, should the
// upstream echo it, made "[secret]".
func (s *server) result(r *mcp.CallToolResult) *Result {
	out := &Result{IsError: r.IsError}
	var text []string
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			text = append(text, c.Text)
		case *mcp.ImageContent:
			out.Images = append(out.Images, Image{MIMEType: c.MIMEType, Data: c.Data})
		case *mcp.ResourceLink:
			text = append(text, c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				text = append(text, c.Resource.Text)
			}
		}
	}
	out.Text = s.redacted(strings.Join(text, "\n"))
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			if s.redact != nil {
				b = []byte(s.redact.Replace(string(b)))
			}
			out.StructuredContent = b
		}
	}
	return out
}

// progressSink hands one call's progress to its ProgressFunc on a
// goroutine of its own, keeping only the latest of what arrives while the
// function runs.
type progressSink struct {
	fn   ProgressFunc
	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	mu              sync.Mutex
	pending         bool // what follows has not been delivered yet
	progress, total float64
	msg             string
}

func (h *Hub) openProgress(token string, fn ProgressFunc) *progressSink {
	p := &progressSink{fn: fn, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	h.progress.Store(token, p)
	go p.run()
	return p
}

// closeProgress ends the sink; it returns once its function has returned,
// so that nothing is delivered after the call.
func (h *Hub) closeProgress(token string, p *progressSink) {
	h.progress.Delete(token)
	close(p.stop)
	<-p.done
}

// maxProgressMessage bounds a progress message handed on.
const maxProgressMessage = 1024

func (h *Hub) deliverProgress(pn *mcp.ProgressNotificationParams) {
	if pn == nil {
		return
	}
	token, ok := pn.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := h.progress.Load(token)
	if !ok {
		return
	}
	p := v.(*progressSink)
	p.mu.Lock()
	p.pending, p.progress, p.total, p.msg = true, pn.Progress, pn.Total, clip(pn.Message, maxProgressMessage)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *progressSink) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
		p.mu.Lock()
		pending, d, t, m := p.pending, p.progress, p.total, p.msg
		p.pending = false
		p.mu.Unlock()
		if pending {
			p.fn(d, t, m)
		}
	}
}

// Observer watches every call of a visible upstream (traces): UpstreamCall
// is called as it begins, its function when it ends, on the calling
// goroutine. The context it returns is the call's.
type Observer interface {
	UpstreamCall(ctx context.Context, c CallInfo) (context.Context, func(CallEnd))
}

// CallInfo is a call as it begins; Tool is the name the code gave.
type CallInfo struct {
	Principal, Upstream, Tool string
}

// CallEnd is how a call ended: OutcomeOK, OutcomeToolError or an error's
// Code.
type CallEnd struct {
	Outcome  Code
	Duration time.Duration
}
