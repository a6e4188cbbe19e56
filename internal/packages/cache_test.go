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
	if n, _, _ := s.evict(250, start, func(string) bool { return false }); n != 0 {
		t.Errorf("entries all used since the grace began: %d removed", n)
	}
	n, bytes, total := s.evict(250, time.Now(), func(a string) bool { return a == "sha256-b" })
	if n != 2 || bytes != 200 || total != 200 {
		t.Errorf("evict = %d entries, %d bytes, %d left; want 2, 200, 200", n, bytes, total)
	}
	for a, want := range map[string]bool{"sha256-a": true, "sha256-b": true, "sha256-c": false, "sha256-d": false} {
		if has(a) != want {
			t.Errorf("%s cached: %v, want %v", a, has(a), want)
		}
	}
	// All left in use: the next look, with nothing changed, reads no lock.
	asked := 0
	if n, _, _ := s.evict(100, time.Now(), func(string) bool { asked++; return true }); n != 0 || asked == 0 {
		t.Fatalf("every entry kept: %d removed, kept asked %d times", n, asked)
	}
	asked = 0
	s.evict(100, time.Now(), func(string) bool { asked++; return true })
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
