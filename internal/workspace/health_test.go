package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestIdleWorkspacesHoldFewDescriptors(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory("javascript", "python"))
	run(t, m, "p", "warm", "set x 1") // the data directory and log files settle
	base := openFDs(t)
	n := 2*IdleRootsKept + 50
	for i := range n {
		id := fmt.Sprintf("w%d", i)
		runLang(t, m, "p", id, "javascript", "write f.txt x")
		runLang(t, m, "p", id, "python", "set x 1")
	}
	// Other descriptors of the process may close meanwhile (an earlier
	// test's Manager finishing); at most the IdleRootsKept most recently
	// used idle workspaces hold one each.
	if got := openFDs(t) - base; got > IdleRootsKept {
		t.Errorf("%d idle live workspaces hold %d descriptors, want at most %d", n, got, IdleRootsKept)
	}
	if l := m.List("p"); len(l) != n+1 {
		t.Errorf("List: %d", len(l))
	}
	// The recently used ones are those: using them again opens nothing.
	before := openFDs(t)
	for i := n - IdleRootsKept/2; i < n; i++ {
		runLang(t, m, "p", fmt.Sprintf("w%d", i), "javascript", "write f.txt y")
	}
	if got := openFDs(t) - before; got > 0 {
		t.Errorf("using recently used workspaces again opened %d descriptors", got)
	}
}

func TestOutOfDescriptorsIsSaidClearly(t *testing.T) {
	core, logs := observer.New(zapcore.ErrorLevel)
	m, err := NewManager(Config{DataDir: t.TempDir()}, newFakeFactory(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	<-m.sweepDone // its directory reads hold descriptors for a moment
	run(t, m, "p", "warm", "set x 1")
	// Use up the process's descriptors (under a lowered limit).
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(openFDs(t) + 50)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var hog []*os.File
	release := func() {
		for _, f := range hog {
			f.Close()
		}
		hog = nil
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	defer release() // a failure below must not leave the tests after it without descriptors
	// fill opens descriptors until none is left. It runs before each try:
	// another part of the process (a file an earlier test dropped, closed
	// by its finalizer) may free one meanwhile.
	fill := func() {
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				return
			}
			hog = append(hog, f)
		}
	}
	// A workspace idle for long has no root open (the recent ones keep
	// theirs), so each try uses a new one. A try that runs found a
	// descriptor freed after fill; it does not count, but twenty such in a
	// row mean that a new workspace no longer needs one.
	var refused []string
	ran := 0
	var errs []error
	for try := 0; len(errs) < 2; try++ {
		if try == 20 {
			t.Fatalf("20 new workspaces ran with no descriptor left; %d refused", len(errs))
		}
		fill()
		id := fmt.Sprintf("cold%d", try)
		_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: id, Language: "js", Code: "set y 1"})
		if err == nil {
			ran++
			continue
		}
		errs = append(errs, err)
		refused = append(refused, id)
	}
	release()
	for _, err := range errs {
		var we *Error
		if !errors.As(err, &we) || we.Code != Exhausted || !strings.Contains(we.Msg, "run out of file descriptors") || !strings.Contains(we.Msg, "did not run") {
			t.Fatalf("out of descriptors: %v", err)
		}
	}
	if h := m.Health(); h.FDExhaustions != 2 || h.LastFDExhaustion.IsZero() {
		t.Errorf("Health = %+v", h)
	}
	if n := logs.FilterMessageSnippet("out of file descriptors").Len(); n != 1 {
		t.Errorf("%d log lines (one, then quiet for a while): %v", n, logs.All())
	}
	// With descriptors back, the workspace works again, state intact.
	if out := run(t, m, "p", "warm", "get x"); value(out.Result) != "1" || out.Result.Reset {
		t.Errorf("after descriptors came back: %+v", out)
	}
	for _, id := range refused {
		if out := run(t, m, "p", id, "set y 1"); out.Result.Status != StatusOK {
			t.Errorf("the refused workspace %s after descriptors came back: %+v", id, out)
		}
	}
	if ran > 0 {
		t.Logf("%d tries ran on a descriptor freed meanwhile", ran)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting descriptors: %v", err)
	}
	return len(ents)
}
