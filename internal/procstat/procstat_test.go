package procstat

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestVmRSS(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   int64
		ok     bool
	}{
		{"Name:\texecd\nVmPeak:\t  900 kB\nVmRSS:\t   51234 kB\nRssAnon:\t1 kB\n", 51234, true},
		{"VmRSS:\t0 kB", 0, true},
		{"Name:\tkthreadd\nThreads:\t1\n", 0, false}, // kernel threads have none
		{"VmRSS:\t12 MB\n", 0, false},
		{"VmRSS:\t-1 kB\n", 0, false},
		{"VmRSS:\n", 0, false},
		{"VmRSSX:\t5 kB\n", 0, false},
		{"", 0, false},
	} {
		got, err := vmRSS([]byte(tc.status))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("vmRSS(%q) = %d, %v; want %d, ok %v", tc.status, got, err, tc.want, tc.ok)
		}
	}
}

func TestSelfRSS(t *testing.T) {
	// A Go test binary is resident in at least a few MiB and far less than
	// the machine.
	n, err := SelfRSSKiB()
	if err != nil {
		t.Fatal(err)
	}
	if n < 1024 || n > 64<<20 {
		t.Fatalf("RSS of this process %d KiB", n)
	}
	if _, err := RSSKiB(-1); err == nil {
		t.Fatal("RSS of no process")
	}
}

// FuzzVmRSS: whatever the status file holds, the reader answers a
// non-negative count or an error, and a VmRSS line it can read gives back
// the number written into it.
func FuzzVmRSS(f *testing.F) {
	raw, _ := os.ReadFile("/proc/self/status")
	f.Add(string(raw), int64(7))
	f.Add("VmRSS:\t1 kB\n", int64(0))
	f.Add("VmRSS:", int64(1<<40))
	f.Fuzz(func(t *testing.T, junk string, n int64) {
		if got, err := vmRSS([]byte(junk)); err == nil && got < 0 {
			t.Fatalf("vmRSS(%q) = %d", junk, got)
		}
		if n < 0 || strings.Contains(junk, "VmRSS:") {
			return
		}
		status := fmt.Sprintf("%s\nVmRSS:\t%8d kB\n", junk, n)
		if got, err := vmRSS([]byte(status)); err != nil || got != n {
			t.Fatalf("vmRSS(%q) = %d, %v; want %d", status, got, err, n)
		}
	})
}
