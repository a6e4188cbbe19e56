package mcptest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// InProcess is an http.Client whose requests h serves in this process,
// without a network, for tests inside a testing/synctest bubble (where a
// goroutine blocked on a socket never lets fake time move). The response
// comes when h writes its header, writes or flushes, or returns; its body
// is what h writes, readable at once (writes never wait for the reader, as
// with a socket's buffers); closing the body cancels the request's context,
// as a client that goes away does.
func InProcess(h http.Handler) *http.Client {
	return &http.Client{Transport: inProcess{h}}
}

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	sreq := req.Clone(ctx)
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:1"
	w := &inProcessWriter{header: http.Header{}, ready: make(chan struct{}), body: &inProcessBody{more: make(chan struct{}, 1), cancel: cancel}}
	go func() {
		defer w.finish()
		t.h.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		cancel()
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          w.body,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// inProcessWriter is the handler's side.
type inProcessWriter struct {
	header http.Header
	once   sync.Once
	ready  chan struct{} // closed when status and sent are set
	status int
	sent   http.Header // the header as it was when the response began
	body   *inProcessBody
}

func (w *inProcessWriter) Header() http.Header { return w.header }

func (w *inProcessWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *inProcessWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.write(b)
}

// Flush is http.Flusher's: the body is readable as soon as it is written.
func (w *inProcessWriter) Flush() { w.WriteHeader(http.StatusOK) }

func (w *inProcessWriter) finish() {
	w.WriteHeader(http.StatusOK)
	w.body.close()
}

// inProcessBody is an unbounded buffer between the handler and the client.
type inProcessBody struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	done   bool // the handler returned
	gone   bool // the client closed the body
	more   chan struct{}
	cancel context.CancelFunc
}

func (b *inProcessBody) poke() {
	select {
	case b.more <- struct{}{}:
	default:
	}
}

func (b *inProcessBody) write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gone {
		return 0, io.ErrClosedPipe
	}
	b.buf.Write(p)
	b.poke()
	return len(p), nil
}

func (b *inProcessBody) close() {
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
	b.poke()
}

func (b *inProcessBody) Read(p []byte) (int, error) {
	for {
		b.mu.Lock()
		switch {
		case b.gone:
			b.mu.Unlock()
			return 0, io.ErrClosedPipe
		case b.buf.Len() > 0:
			n, _ := b.buf.Read(p)
			b.mu.Unlock()
			return n, nil
		case b.done:
			b.mu.Unlock()
			return 0, io.EOF
		}
		b.mu.Unlock()
		<-b.more
	}
}

func (b *inProcessBody) Close() error {
	b.mu.Lock()
	b.gone = true
	b.buf.Reset()
	b.mu.Unlock()
	b.poke()
	b.cancel()
	return nil
}
