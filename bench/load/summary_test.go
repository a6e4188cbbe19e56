package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The report's execd/peer column is the ratio of the median req/s and,
// beside it, the spread of the rounds' own ratios: a round where the whole
// machine was slow moves both servers, not their ratio.
func TestReportRatioAndRounds(t *testing.T) {
	var lines bytes.Buffer
	add := func(server string, round int, rps float64) {
		b, err := json.Marshal(summary{Label: "legacy, 1 clients", Server: server, Round: round, Scenario: "load", RPS: rps})
		if err != nil {
			t.Fatal(err)
		}
		lines.Write(append(b, '\n'))
	}
	// Round 2 is slow for both: each round execd is 0.9×, 1.0× and 0.8×.
	add("execd", 1, 900)
	add("peer", 1, 1000)
	add("execd", 2, 500)
	add("peer", 2, 500)
	add("execd", 3, 960)
	add("peer", 3, 1200)
	add("execd", 4, 1000) // a round the peer has not run: no ratio of its own
	path := filepath.Join(t.TempDir(), "results.jsonl")
	if err := os.WriteFile(path, lines.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printReport(&out, path); err != nil {
		t.Fatal(err)
	}
	// medians: execd 930 (of 500, 900, 960, 1000), peer 1000: 0.93×.
	want := "| legacy, 1 clients | 4 | 930 | 1000 | 0.93× (rounds 0.80–1.00) |"
	if !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant a row starting %q", out.String(), want)
	}
}
