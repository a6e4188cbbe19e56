package main

import (
	"math"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestParseMachineTimes(t *testing.T) {
	total, steal, err := parseMachineTimes("cpu  100 5 30 800 7 0 9 40 11 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if err != nil || total != 100+5+30+800+7+0+9+40 || steal != 40 {
		t.Errorf("total %d steal %d err %v; want 991, 40 (guest time is part of user)", total, steal, err)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x"} {
		if _, _, err := parseMachineTimes(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestCPUPerCallOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: not Linux")
	}
	pid := os.Getpid()
	a, r0 := readCPU(pid), rusage(t)
	// Spin until the kernel's other account, getrusage, says 200 ms of CPU
	// went by, however long that takes on a busy machine.
	for rusage(t)-r0 < 200*time.Millisecond {
	}
	b, r1 := readCPU(pid), rusage(t)
	if !a.ok || !b.ok {
		t.Fatal("counters not read")
	}
	s := summary{N: 1000}
	s.setCPU(a, b)
	// In /proc's ticks of 10 ms, over 1000 calls: getrusage's figure in µs
	// per call within three ticks either side (each of utime and stime is
	// rounded down). The server is this process, so the tool's figure is
	// the same but for one tick: readCPU reads the two stat files one after
	// the other, and a tick may fall between them.
	want := float64((r1-r0)/time.Microsecond) / 1000
	tick := 1e6 / clockTicks / float64(s.N)
	if s.ServerCPUUsPerCall < want-30 || s.ServerCPUUsPerCall > want+30 || math.Abs(s.LoadCPUUsPerCall-s.ServerCPUUsPerCall) > tick {
		t.Errorf("server %.0f µs, load %.0f µs per call; getrusage says %.0f", s.ServerCPUUsPerCall, s.LoadCPUUsPerCall, want)
	}
	if s.StealPct < 0 || s.StealPct > 100 {
		t.Errorf("steal %.1f %%", s.StealPct)
	}
	if none := readCPU(0); none.ok {
		t.Error("no pid: counters read")
	}
}

// rusage is this process's user and system time so far.
func rusage(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
