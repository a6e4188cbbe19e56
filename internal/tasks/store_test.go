package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func open(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func finish(t *testing.T, s *Store, principal, id string, result string) Record {
	t.Helper()
	rec, err := s.Update(principal, id, func(r *Record) {
		r.Status, r.Result = Completed, json.RawMessage(result)
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestRecordsBelongToTheirPrincipal(t *testing.T) {
	s := open(t, Config{})
	rec, err := s.Create("alice", New{Version: "2026-07-28", Tool: "execute_code", Message: "accepted"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.ID) != 32 || rec.Status != Working || rec.TTL != time.Hour || rec.Created.IsZero() {
		t.Errorf("new record: %+v", rec)
	}
	if _, ok := s.Get("bob", rec.ID); ok {
		t.Error("another principal found alice's task")
	}
	if _, err := s.Update("bob", rec.ID, func(r *Record) { r.Status = Cancelled }); !errors.Is(err, ErrNotFound) {
		t.Errorf("another principal's update: %v, want ErrNotFound", err)
	}
	if _, ok := s.Get("alice", "0123456789abcdef0123456789abcdef"); ok {
		t.Error("a made-up id was found")
	}
	got, ok := s.Get("alice", rec.ID)
	if !ok || got.Status != Working {
		t.Fatalf("alice's own task: %+v %v", got, ok)
	}
}

func TestTerminalStatusesAreFinal(t *testing.T) {
	s := open(t, Config{})
	rec, _ := s.Create("p", New{})
	finish(t, s, "p", rec.ID, `{"content":[]}`)
	got, err := s.Update("p", rec.ID, func(r *Record) { r.Status = Cancelled })
	if !errors.Is(err, ErrFinished) || got.Status != Completed || string(got.Result) != `{"content":[]}` {
		t.Errorf("update of a finished task: %+v %v; want it unchanged and ErrFinished", got, err)
	}
}

func TestCapDropsTheOldestFinishedFirst(t *testing.T) {
	s := open(t, Config{MaxPerPrincipal: 2})
	a, _ := s.Create("p", New{})
	b, _ := s.Create("p", New{})
	if _, err := s.Create("p", New{}); !errors.Is(err, ErrFull) {
		t.Fatalf("third task with two running: %v, want ErrFull", err)
	}
	if _, err := s.Create("q", New{}); err != nil {
		t.Fatalf("another principal is not capped by p's tasks: %v", err)
	}
	finish(t, s, "p", b.ID, `{}`)
	finish(t, s, "p", a.ID, `{}`)
	c, err := s.Create("p", New{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("p", b.ID); ok {
		t.Error("the record that finished first was kept")
	}
	if _, ok := s.Get("p", a.ID); !ok {
		t.Error("the record that finished last was dropped")
	}
	if _, ok := s.Get("p", c.ID); !ok {
		t.Error("the new task is missing")
	}
}

func TestFinishedRecordsExpireAfterTheirTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, Config{TTL: time.Minute})
		short, _ := s.Create("p", New{TTL: 10 * time.Second})
		long, _ := s.Create("p", New{TTL: time.Hour}) // more than Config.TTL: clamped
		running, _ := s.Create("p", New{})
		if long.TTL != time.Minute {
			t.Errorf("a TTL beyond Config.TTL: %s, want 1m", long.TTL)
		}
		finish(t, s, "p", short.ID, `{}`)
		finish(t, s, "p", long.ID, `{}`)
		time.Sleep(11 * time.Second)
		if _, ok := s.Get("p", short.ID); ok {
			t.Error("a record was found after its TTL")
		}
		if _, ok := s.Get("p", long.ID); !ok {
			t.Error("a record was dropped before its TTL")
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if _, ok := s.Get("p", running.ID); !ok {
			t.Error("a running task expired")
		}
		if n := s.Counts()[Completed]; n != 0 {
			t.Errorf("%d expired records still counted after the sweep", n)
		}
		s.Close()
	})
}

func TestRecordsOutliveTheStore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Config{Dir: dir})
	done, _ := s.Create("alice", New{Version: "2026-07-28", Tool: "execute_code", Tags: map[string]string{"workspace": "w"}})
	finish(t, s, "alice", done.ID, `{"content":[{"type":"text","text":"42"}],"isError":false}`)
	running, _ := s.Create("..", New{Message: "3/10 loading"})
	if _, err := os.Stat(filepath.Join(dir, "~2e2e", "~tasks", running.ID+".json")); err != nil {
		t.Errorf("the record of principal \"..\" is not under ~2e2e: %v", err)
	}
	s.Close()

	s2 := open(t, Config{Dir: dir})
	got, ok := s2.Get("alice", done.ID)
	if !ok || got.Status != Completed || string(got.Result) != `{"content":[{"type":"text","text":"42"}],"isError":false}` || got.Tags["workspace"] != "w" {
		t.Errorf("finished record after a restart: %+v %v", got, ok)
	}
	got, ok = s2.Get("..", running.ID)
	if !ok || got.Status != Failed || !got.Stopped || got.Message != "3/10 loading" {
		t.Errorf("record of a task running at the stop: %+v %v; want Failed and Stopped", got, ok)
	}
	s2.Close()
	s3 := open(t, Config{Dir: dir})
	if got, ok := s3.Get("..", running.ID); !ok || got.Status != Failed || !got.Stopped {
		t.Errorf("the stopped record was not saved so: %+v %v", got, ok)
	}
}

func TestLoadRemovesExpiredAndTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Config{Dir: dir, TTL: time.Second})
	rec, _ := s.Create("p", New{})
	rec = finish(t, s, "p", rec.ID, `{}`)
	s.Close()
	tdir := filepath.Join(dir, "p", "~tasks")
	os.WriteFile(filepath.Join(tdir, "~tmp123"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(tdir, "junk.json"), []byte("{"), 0o600)
	// Backdate the record by a minute: expired.
	rec.Updated = rec.Updated.Add(-time.Minute)
	b, _ := json.Marshal(rec)
	os.WriteFile(filepath.Join(tdir, rec.ID+".json"), b, 0o600)

	s2 := open(t, Config{Dir: dir, TTL: time.Second})
	if _, ok := s2.Get("p", rec.ID); ok {
		t.Error("an expired record was loaded")
	}
	ents, _ := os.ReadDir(tdir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "junk.json" {
		t.Errorf("left in ~tasks: %v; want only the unreadable junk.json", names)
	}
}

func TestWaitReturnsOnceFinished(t *testing.T) {
	s := open(t, Config{})
	rec, _ := s.Create("p", New{})
	got := make(chan Record, 1)
	go func() {
		r, err := s.Wait(context.Background(), "p", rec.ID)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	if _, err := s.Update("p", rec.ID, func(r *Record) { r.Status = InputRequired }); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("Wait returned for a task that has not finished: %+v", r)
	default:
	}
	finish(t, s, "p", rec.ID, `{"x":1}`)
	if r := <-got; r.Status != Completed || string(r.Result) != `{"x":1}` {
		t.Errorf("Wait: %+v", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	other, _ := s.Create("p", New{})
	if _, err := s.Wait(ctx, "p", other.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with an ended context: %v", err)
	}
	if _, err := s.Wait(context.Background(), "q", other.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Wait for another principal's task: %v", err)
	}
}

func TestListPagesOldestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, Config{})
		var ids []string
		for range 5 {
			r, _ := s.Create("p", New{})
			ids = append(ids, r.ID)
			time.Sleep(time.Millisecond)
		}
		s.Create("q", New{})
		var seen []string
		cursor := ""
		for pages := 0; ; pages++ {
			page, next, err := s.List("p", cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				seen = append(seen, r.ID)
			}
			if next == "" {
				if pages != 2 {
					t.Errorf("%d pages of 2 for 5 tasks", pages+1)
				}
				break
			}
			cursor = next
		}
		if fmt.Sprint(seen) != fmt.Sprint(ids) {
			t.Errorf("listed %v, want %v", seen, ids)
		}
		if _, _, err := s.List("q", ids[0], 2); !errors.Is(err, ErrBadCursor) {
			t.Errorf("another principal's id as cursor: %v", err)
		}
		s.Close()
	})
}

// Many goroutines create, update, read and list at once: every task ends
// in the status it was given, and the counts add up.
func TestHammer(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir(), MaxPerPrincipal: 1000})
	var wg sync.WaitGroup
	const workers, each = 8, 50
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("p%d", w%2)
			for range each {
				rec, err := s.Create(p, New{})
				if err != nil {
					t.Error(err)
					return
				}
				var inner sync.WaitGroup
				inner.Add(2)
				go func() {
					defer inner.Done()
					s.Update(p, rec.ID, func(r *Record) { r.Message = "halfway" })
				}()
				go func() {
					defer inner.Done()
					s.Get(p, rec.ID)
					s.List(p, "", 10)
				}()
				inner.Wait()
				finish(t, s, p, rec.ID, `{}`)
			}
		}()
	}
	wg.Wait()
	if n := s.Counts()[Completed]; n != workers*each {
		t.Errorf("%d completed, want %d", n, workers*each)
	}
	s.Close()
	s2 := open(t, Config{Dir: s.cfg.Dir, MaxPerPrincipal: 1000})
	if n := s2.Counts()[Completed]; n != workers*each {
		t.Errorf("after reopening: %d completed, want %d (a write lost or out of order)", n, workers*each)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"id":"ab","principal":"p","status":"working","created":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":"../x","principal":"p","status":"done"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(b)
		if err != nil {
			return
		}
		if !validID(rec.ID) || rec.Principal == "" {
			t.Fatalf("accepted %+v", rec)
		}
	})
}
