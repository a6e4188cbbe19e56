package main

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A shutdown that overruns its hard deadline ends the process with code
// 1, and says why in the log.
func TestHardDeadlineEndsTheProcess(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	codes := make(chan int, 1)
	armHardDeadline(20*time.Millisecond, zap.New(core), func(code int) { codes <- code })
	select {
	case code := <-codes:
		if code != 1 {
			t.Fatalf("exit code %d, want 1", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the hard deadline did not end the process")
	}
	if logs.FilterMessageSnippet("hard deadline").Len() != 1 {
		t.Fatalf("no log line says why: %v", logs.All())
	}
}
