package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestVersionFlag: -version prints the version the binary was built with
// and exits 0 without reading any configuration.
func TestVersionFlag(t *testing.T) {
	out, err := exec.Command(binPath, "-version", "-config", "/nonexistent/config.toml").Output()
	if err != nil {
		t.Fatalf("execd -version: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != "execd "+version {
		t.Fatalf("execd -version printed %q, want %q", got, "execd "+version)
	}
}
