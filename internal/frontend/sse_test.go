package frontend

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recordingFlusher keeps what reached the client: bytes count only once
// flushed, as on a real connection.
type recordingFlusher struct {
	mu       sync.Mutex
	hdr      http.Header
	buf, out strings.Builder
	flushes  int
}

func (r *recordingFlusher) Header() http.Header { return r.hdr }
func (r *recordingFlusher) WriteHeader(int)     {}
func (r *recordingFlusher) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}
func (r *recordingFlusher) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out.WriteString(r.buf.String())
	r.buf.Reset()
	r.flushes++
}
func (r *recordingFlusher) sent() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String(), r.flushes
}

func TestSSESilentStreamShowsHeadersThenKeepAlives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &recordingFlusher{hdr: http.Header{}}
		sw := newSSE(w)
		sw.begin(time.Second, true)
		time.Sleep(headerDelay - time.Millisecond)
		synctest.Wait()
		if _, n := w.sent(); n != 0 {
			t.Fatalf("headers flushed before %v", headerDelay)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if out, n := w.sent(); n != 1 || out != "" || w.hdr.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("after the header delay: %d flushes, %q, %v; want the stream's headers alone", n, out, w.hdr)
		}
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		if out, _ := w.sent(); out != ": keepalive\n\n: keepalive\n\n" {
			t.Fatalf("after 2 keep-alive periods: %q", out)
		}
		sw.end()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if out, _ := w.sent(); strings.Count(out, "keepalive") != 2 {
			t.Fatalf("written after end: %q", out)
		}
	})
}

func TestSSEQuickAnswerIsOneWriteAndEndsTheStream(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			w := &recordingFlusher{hdr: http.Header{}}
			sw := newSSE(w)
			sw.begin(time.Second, lazy)
			if err := sw.last([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)); err != nil {
				t.Fatal(err)
			}
			// The timer may still fire before the handler's end: it must
			// not flush a half-made response nor add a keep-alive.
			time.Sleep(3 * time.Second)
			synctest.Wait()
			if _, n := w.sent(); n != 0 {
				t.Fatalf("%d flushes after the last event; net/http sends it when the handler returns", n)
			}
			if err := sw.event([]byte(`{}`)); err == nil {
				t.Fatal("an event after the last one was accepted")
			}
			sw.end()
			// A lazy stream's quick answer is the response itself, as JSON.
			want, ct := "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", "text/event-stream"
			if lazy {
				want, ct = `{"jsonrpc":"2.0","id":1,"result":{}}`, "application/json"
			}
			if got := w.buf.String(); got != want || w.hdr.Get("Content-Type") != ct {
				t.Fatalf("lazy %v: buffered %q as %q", lazy, got, w.hdr.Get("Content-Type"))
			}
		})
	}
}

// A lazy stream that sends an event first is a stream to the end.
func TestSSELazyStreamWithAnEventStaysAStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &recordingFlusher{hdr: http.Header{}}
		sw := newSSE(w)
		sw.begin(time.Second, true)
		if err := sw.event([]byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
		if err := sw.last([]byte(`{"id":1}`)); err != nil {
			t.Fatal(err)
		}
		sw.end()
		out, _ := w.sent()
		if got := out + w.buf.String(); got != "data: {\"n\":1}\n\ndata: {\"id\":1}\n\n" || w.hdr.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%q as %q", got, w.hdr.Get("Content-Type"))
		}
	})
}
