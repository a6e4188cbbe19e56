package worker

import (
	"strings"
	"testing"
)

func TestBoundedBuffer(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string
		trunc  bool
	}{
		{"empty", 10, nil, "", false},
		{"fits", 10, []string{"abc", "def"}, "abcdef", false},
		{"exactly", 10, []string{"0123456789"}, "0123456789", false},
		{"one over", 10, []string{"0123456789", "A"}, "01234\n... [1 bytes truncated] ...\n6789A", true},
		{"big write", 10, []string{strings.Repeat("x", 100) + "TAIL!"}, "xxxxx\n... [95 bytes truncated] ...\nTAIL!", true},
		{"many small", 6, []string{"a", "b", "c", "d", "e", "f", "g", "h"}, "abc\n... [2 bytes truncated] ...\nfgh", true},
		{"wrap", 8, []string{"head", "12", "345", "678"}, "head\n... [4 bytes truncated] ...\n5678", true},
	}
	for _, tc := range tests {
		b := newBoundedBuffer(tc.limit)
		for _, w := range tc.writes {
			if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("%s: Write = %d, %v", tc.name, n, err)
			}
		}
		if got := b.String(); got != tc.want || b.Truncated() != tc.trunc {
			t.Errorf("%s: String() = %q truncated=%v; want %q %v", tc.name, got, b.Truncated(), tc.want, tc.trunc)
		}
	}
}

func TestTruncateString(t *testing.T) {
	if s, cut := truncateString("short", 10); s != "short" || cut {
		t.Errorf("short: %q %v", s, cut)
	}
	s, cut := truncateString("0123456789abcdef", 8)
	if !cut || s != "0123\n... [8 bytes truncated] ...\ncdef" {
		t.Errorf("long: %q %v", s, cut)
	}
	// A cut inside a UTF-8 sequence does not leave half a character.
	s, _ = truncateString("ééééé", 5)
	if !strings.HasPrefix(s, "é\n") {
		t.Errorf("utf-8: %q", s)
	}
}

func FuzzBoundedBuffer(f *testing.F) {
	f.Add(7, []byte("hello world, this is a stream"), 3)
	f.Fuzz(func(t *testing.T, limit int, data []byte, chunk int) {
		if limit < 2 || limit > 1<<12 || chunk < 1 {
			return
		}
		b := newBoundedBuffer(limit)
		for i := 0; i < len(data); i += chunk {
			b.Write(data[i:min(i+chunk, len(data))])
		}
		got := b.String()
		if len(data) <= limit {
			if got != string(data) || b.Truncated() {
				t.Fatalf("untruncated: %q != %q", got, data)
			}
			return
		}
		if !b.Truncated() {
			t.Fatalf("not truncated at %d > %d", len(data), limit)
		}
	})
}
