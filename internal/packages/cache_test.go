package packages

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The store keeps to a size by removing the least recently used entries
// nothing keeps, never one used since the grace's start, and never one
// kept.
func TestStoreEvictsLeastRecentlyUsed(t *testing.T) {
	s, err := newStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	add := func(addr string) {
		t.Helper()
		if _, err := s.ensure(addr, func(dir string) (entryMeta, error) {
			return entryMeta{Bytes: 100}, os.WriteFile(filepath.Join(dir, "pkg", "f"), []byte("x"), 0o644)
		}); err != nil {
			t.Fatal(err)
		}
	}
	has := func(addr string) bool { _, ok := s.readMeta(addr); return ok }
	start := time.Now()
	for _, a := range []string{"sha256-a", "sha256-b", "sha256-c", "sha256-d"} {
		add(a)
	}
	s.lookup("sha256-a") // used last
	free := func(string) int { return EvictFirst }
	if n, _, _ := s.evict(250, start, free); n != 0 {
		t.Errorf("entries all used since the grace began: %d removed", n)
	}
	add("sha256-e") // the total changes: evict looks again
	s.lookup("sha256-a")
	// a and b in use, c kept for last: d and e go first, and as they are
	// not enough, c.
	rank := map[string]int{"sha256-a": NeverEvict, "sha256-b": NeverEvict, "sha256-c": EvictLast}
	n, bytes, total := s.evict(250, time.Now(), func(a string) int { return rank[a] })
	if n != 3 || bytes != 300 || total != 200 {
		t.Errorf("evict = %d entries, %d bytes, %d left; want 3, 300, 200", n, bytes, total)
	}
	for a, want := range map[string]bool{"sha256-a": true, "sha256-b": true, "sha256-c": false, "sha256-d": false, "sha256-e": false} {
		if has(a) != want {
			t.Errorf("%s cached: %v, want %v", a, has(a), want)
		}
	}
	// All left in use: the next look, with nothing changed, reads no lock.
	asked := 0
	s.mu.Lock()
	s.stuck = 0
	s.mu.Unlock()
	if n, _, _ := s.evict(100, time.Now(), func(string) int { asked++; return NeverEvict }); n != 0 || asked == 0 {
		t.Fatalf("every entry kept: %d removed, rank asked %d times", n, asked)
	}
	asked = 0
	s.evict(100, time.Now(), func(string) int { asked++; return NeverEvict })
	if asked != 0 {
		t.Errorf("looked again with nothing changed: kept asked %d times", asked)
	}
	// A new store of the same directory knows what is left.
	s2, err := newStore(s.root)
	if err != nil {
		t.Fatal(err)
	}
	if s2.total != 200 || len(s2.entries) != 2 {
		t.Errorf("a new store: %d bytes in %d entries, want 200 in 2", s2.total, len(s2.entries))
	}
}
