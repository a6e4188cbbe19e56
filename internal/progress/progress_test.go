package progress

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type recorder struct {
	mu     sync.Mutex
	frames []Params
	fail   bool
	tries  int // calls of Notify, failed ones too
}

func (r *recorder) Notify(method string, params any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries++
	if r.fail {
		return errors.New("gone")
	}
	if method != "notifications/progress" {
		panic(method)
	}
	r.frames = append(r.frames, params.(Params))
	return nil
}

func (r *recorder) got() []Params {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Params(nil), r.frames...)
}

func strictlyIncreasing(t *testing.T, fs []Params) {
	t.Helper()
	for i := 1; i < len(fs); i++ {
		if fs[i].Progress <= fs[i-1].Progress {
			t.Fatalf("progress not strictly increasing: frame %d = %v after %v", i, fs[i].Progress, fs[i-1].Progress)
		}
	}
}

func TestTokenEchoedWithItsType(t *testing.T) {
	for _, tok := range []string{`7`, `"7"`, `"progress-test-1"`} {
		rec := &recorder{}
		r := New(rec, json.RawMessage(tok), Options{})
		r.Start("started")
		r.Stop()
		fs := rec.got()
		if len(fs) != 1 || string(fs[0].ProgressToken) != tok {
			t.Fatalf("token %s: frames %+v", tok, fs)
		}
		if fs[0].Total != nil {
			t.Errorf("total sent although unknown")
		}
	}
}

func TestNoTokenNoFrames(t *testing.T) {
	rec := &recorder{}
	r := New(rec, nil, Options{Heartbeat: time.Millisecond})
	r.Start("x")
	r.Progress(1, 2, "y")
	r.Flush()
	if len(rec.got()) != 0 || rec.tries != 0 {
		t.Fatal("a reporter without a token sent frames")
	}
}

func TestCoalescesFastReportsAndKeepsTheLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r := New(rec, json.RawMessage(`1`), Options{MinInterval: 250 * time.Millisecond})
		r.Start("started")
		for i := 1; i <= 100; i++ {
			r.Progress(float64(i), 100, "rows")
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Second)
		r.Stop()
		fs := rec.got()
		strictlyIncreasing(t, fs)
		if len(fs) > 3 {
			t.Errorf("100 reports in 100ms gave %d frames; want them coalesced", len(fs))
		}
		if last := fs[len(fs)-1].Message; last != "100/100 rows" {
			t.Errorf("last frame %q; want the newest report 100/100 rows", last)
		}
	})
}

func TestHeartbeatWhileSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r := New(rec, json.RawMessage(`"t"`), Options{Heartbeat: 10 * time.Second})
		r.Start("started")
		time.Sleep(35 * time.Second)
		r.Stop()
		fs := rec.got()
		if len(fs) != 4 { // start + beats at 10, 20, 30 s
			t.Fatalf("got %d frames in 35 s with a 10 s heartbeat: %+v", len(fs), fs)
		}
		strictlyIncreasing(t, fs)
		if fs[3].Message != "running 30.0 s" {
			t.Errorf("heartbeat message %q", fs[3].Message)
		}
	})
}

func TestNothingAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r := New(rec, json.RawMessage(`1`), Options{Heartbeat: time.Second, MinInterval: 250 * time.Millisecond})
		r.Start("started")
		r.Progress(1, 0, "first report goes out at once")
		r.Progress(2, 0, "pending when stopped")
		r.Stop()
		r.Progress(3, 0, "after")
		r.Flush()
		time.Sleep(10 * time.Second)
		if fs := rec.got(); len(fs) != 2 {
			t.Fatalf("frames after Stop: %+v", fs)
		}
	})
}

func TestFlushSendsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r := New(rec, json.RawMessage(`1`), Options{MinInterval: time.Second})
		r.Start("started")
		r.Progress(2, 3, "almost")
		r.Progress(3, 3, "done")
		r.Flush()
		r.Stop()
		fs := rec.got()
		if len(fs) != 3 || fs[2].Message != "3/3 done" {
			t.Fatalf("frames %+v", fs)
		}
	})
}

func TestBrokenStreamStops(t *testing.T) {
	rec := &recorder{fail: true}
	r := New(rec, json.RawMessage(`1`), Options{})
	r.Start("x")
	r.Say("y")
	r.Flush()
	if rec.tries != 1 {
		t.Fatalf("%d writes; after its stream failed the reporter must stop writing", rec.tries)
	}
}

func TestDescribeAndClip(t *testing.T) {
	for _, tc := range []struct {
		done, total float64
		msg, want   string
	}{
		{3, 10, "rows", "3/10 rows"},
		{42, 0, "rows", "42 rows"},
		{0, 0, "  queued  ", "queued"},
		{0.5, 1, "", "0.5/1"},
		{0, 0, "", ""},
	} {
		if got := Describe(tc.done, tc.total, tc.msg); got != tc.want {
			t.Errorf("Describe(%v,%v,%q) = %q; want %q", tc.done, tc.total, tc.msg, got, tc.want)
		}
	}
	long := make([]rune, 500)
	for i := range long {
		long[i] = 'é'
	}
	if n := len([]rune(clip(string(long)))); n != MaxMessage {
		t.Errorf("clipped to %d runes; want %d", n, MaxMessage)
	}
}
