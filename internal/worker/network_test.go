package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/egress"
)

// The host side of the execd.net_* imports on a real instance's memory,
// with a fake Network; the guests' fetch, urllib and requests are tested in
// network_guest_test.go.

// fakeNet answers every request with its URL as the body, or waits for
// its context when the URL says /hang.
type fakeNet struct {
	mu      sync.Mutex
	got     []egress.Request
	ended   int // requests whose Do returned after their context ended
	maxBody int64
	open    int
}

func (f *fakeNet) Do(ctx context.Context, r *egress.Request) (*egress.Response, error) {
	f.mu.Lock()
	f.got = append(f.got, *r)
	f.mu.Unlock()
	if strings.HasSuffix(r.URL, "/hang") {
		<-ctx.Done()
		f.mu.Lock()
		f.ended++
		f.mu.Unlock()
		return nil, &egress.Error{Kind: egress.KindAborted, Message: "aborted"}
	}
	if strings.HasSuffix(r.URL, "/fail") {
		return nil, errors.New("plain failure")
	}
	return &egress.Response{Status: 200, StatusText: "OK", URL: r.URL, Header: [][2]string{{"A", "1"}}, Body: []byte(r.URL)}, nil
}
func (f *fakeNet) Env() [][2]string            { return [][2]string{{"K", "__EXECD_SECRET_K__"}} }
func (f *fakeNet) Reached() []egress.HostCount { return nil }
func (f *fakeNet) MaxRequestBytes() int64      { return f.maxBody }
func (f *fakeNet) MaxConcurrentRequests() int  { return f.open }

func netRunState(nw Network) (*runState, func()) {
	st := &runState{}
	return st, st.begin(context.Background(), nw)
}

// start hands a request head (and body) to net_start.
func start(t *testing.T, w *Worker, st *runState, head string, body []byte) int32 {
	t.Helper()
	h := guestBytes(t, w, []byte(head))
	var b uint32
	if len(body) > 0 {
		b = guestBytes(t, w, body)
	}
	return st.netStart(w.inst.mod, h, uint32(len(head)), b, uint32(len(body)))
}

// head reads net_head of id.
func head(t *testing.T, w *Worker, st *runState, id int32) map[string]any {
	t.Helper()
	buf := guestBytes(t, w, make([]byte, 4096))
	n := st.netCopy(w.inst.mod, id, buf, 4096, true)
	if n < 0 {
		t.Fatalf("net_head(%d) = %d", id, n)
	}
	b, _ := w.inst.mod.Memory().Read(buf, uint32(n))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("net_head(%d): %q: %v", id, b, err)
	}
	return m
}

func TestNetImports(t *testing.T) {
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "1", StatusOK)
	f := &fakeNet{maxBody: 8, open: 4}
	st, stop := netRunState(f)
	defer stop()
	mod := w.inst.mod

	if got := st.netWait(0, 0); got != netUnknown {
		t.Errorf("wait with nothing open = %d", got)
	}
	a := start(t, w, st, `{"method":"POST","url":"https://x.example/a","headers":[["X","1"]],"timeout":250,"redirect":"manual"}`, []byte("body"))
	if got := st.netWait(a, -1); got != a {
		t.Fatalf("wait(%d) = %d", a, got)
	}
	if h := head(t, w, st, a); h["status"] != 200.0 || h["length"] != float64(len("https://x.example/a")) || h["url"] != "https://x.example/a" {
		t.Errorf("head %v", h)
	}
	buf := guestBytes(t, w, make([]byte, 64))
	if n := st.netCopy(mod, a, buf, 5, false); n != 5 {
		t.Errorf("body part = %d", n)
	}
	if n := st.netCopy(mod, a, buf, 64, false); n != int32(len("https://x.example/a")-5) {
		t.Errorf("body rest = %d", n)
	}
	if n := st.netCopy(mod, a, buf, 64, false); n != 0 {
		t.Errorf("body after its end = %d", n)
	}
	f.mu.Lock()
	r := f.got[0]
	f.mu.Unlock()
	if r.Method != "POST" || string(r.Body) != "body" || r.BodySize != 4 || r.Timeout != 250*time.Millisecond || r.Redirect != "manual" || r.Header[0] != [2]string{"X", "1"} {
		t.Errorf("the network got %+v", r)
	}
	// A body over MaxRequestBytes is not copied (the policy refuses it by its size).
	big := start(t, w, st, `{"method":"POST","url":"https://x.example/b"}`, []byte("more than eight"))
	st.netWait(big, -1)
	f.mu.Lock()
	if r := f.got[1]; r.Body != nil || r.BodySize != 15 {
		t.Errorf("a large body: %+v", r)
	}
	f.mu.Unlock()
	// Malformed heads are errors of their request, not of the instance.
	bad := start(t, w, st, `{"url": 5`, nil)
	if h := head(t, w, st, bad); h["error"] != "fetch: the request is malformed" || h["kind"] != "refused" {
		t.Errorf("malformed head: %v", h)
	}
	plain := start(t, w, st, `{"url":"https://x.example/fail"}`, nil)
	st.netWait(plain, -1)
	if h := head(t, w, st, plain); h["error"] != "plain failure" || h["kind"] != "error" {
		t.Errorf("a plain error: %v", h)
	}
	for _, id := range []int32{a, big, bad, plain} {
		if hostClose(st, id) != 0 {
			t.Errorf("close(%d) failed", id)
		}
	}
	if hostClose(st, a) != netUnknown || st.netCopy(mod, a, buf, 64, true) != netUnknown || st.netWait(a, 0) != netUnknown {
		t.Error("a closed request is still known")
	}
	// At most MaxConcurrentRequests open; close aborts one in flight.
	var hangs []int32
	for i := 0; i < 4; i++ {
		hangs = append(hangs, start(t, w, st, `{"url":"https://x.example/hang"}`, nil))
	}
	if got := start(t, w, st, `{"url":"https://x.example/c"}`, nil); got != netTooMany {
		t.Errorf("a fifth open request = %d", got)
	}
	if got := st.netWait(0, 20); got != 0 {
		t.Errorf("wait with only hanging requests = %d", got)
	}
	hostClose(st, hangs[0])
	// The stop ends a wait already blocked and aborts the rest. The wait
	// must still be waiting 50 ms after it began (nothing it waits for
	// can finish), so the stop below meets it blocked, not at its start.
	began, waited := make(chan struct{}), make(chan int32, 1)
	go func() { close(began); waited <- st.netWait(0, -1) }()
	<-began
	select {
	case got := <-waited:
		t.Fatalf("a wait with only hanging requests returned %d before the stop", got)
	case <-time.After(50 * time.Millisecond):
	}
	st.interrupt.Store(true)
	stop()
	select {
	case got := <-waited:
		if got != netStopped {
			t.Errorf("wait at the stop = %d", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stop did not end a blocked wait")
	}
	if got := start(t, w, st, `{"url":"https://x.example/d"}`, nil); got != netStopped {
		t.Errorf("start after the stop = %d", got)
	}
	if !st.net.end(5 * time.Second) {
		t.Fatal("the requests' goroutines did not end")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended != 4 {
		t.Errorf("%d hanging requests saw their end, want 4", f.ended)
	}
}

func hostClose(st *runState, id int32) int32 {
	stack := []uint64{uint64(uint32(id))}
	hostNetClose(withRunState(context.Background(), st), nil, stack)
	return int32(stack[0])
}

// TestNetOutsideARun: an interpreter's start-up and a base image's preload
// have no network: the imports answer without one.
func TestNetOutsideARun(t *testing.T) {
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "1", StatusOK)
	st := &runState{}
	if got := st.netStart(w.inst.mod, 0, 0, 0, 0); got != netStopped {
		t.Errorf("start = %d", got)
	}
	if got := st.netWait(0, 0); got != netStopped {
		t.Errorf("wait = %d", got)
	}
	if got := st.netEnv(w.inst.mod, 0, 0); got != 0 {
		t.Errorf("env = %d", got)
	}
}

// FuzzNetStart: whatever head the guest hands over, net_start gives an id
// whose net_head is JSON, or a code; the instance is never harmed.
func FuzzNetStart(f *testing.F) {
	for _, s := range []string{`{"method":"GET","url":"https://x.example/"}`, `{"headers":[["a"],["b","c","d"]],"timeout":1e308}`, `[`, `{"timeout":-1,"url":7}`, ``} {
		f.Add([]byte(s))
	}
	e := testEngine(f, true)
	w, err := e.NewWorker(context.Background(), "javascript", WorkerOptions{})
	if err != nil {
		f.Fatal(err)
	}
	defer w.Close()
	nw := &fakeNet{maxBody: 1 << 20, open: 4}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, stop := netRunState(nw)
		defer stop()
		r, err := w.inst.alloc.Call(context.Background(), uint64(len(b)))
		if err != nil || r[0] == 0 {
			t.Fatal(err)
		}
		ptr := uint32(r[0])
		w.inst.mod.Memory().Write(ptr, b)
		id := st.netStart(w.inst.mod, ptr, uint32(len(b)), 0, 0)
		defer func() { _, _ = w.inst.mod.ExportedFunction(exportFree).Call(context.Background(), uint64(ptr)) }()
		if id <= 0 {
			t.Fatalf("net_start = %d", id)
		}
		if got := st.netWait(id, 5000); got != id {
			t.Fatalf("wait = %d", got)
		}
		n := st.netCopy(w.inst.mod, id, 0, 0, true)
		if n <= 0 {
			t.Fatalf("head length %d", n)
		}
		st.net.end(time.Second)
	})
}
