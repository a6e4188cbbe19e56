package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuSample is what the kernel has counted so far, in clock ticks: the
// server's and this process's CPU time, and the machine's time in all and
// stolen by the hypervisor. ok is false when pid's counters could not be
// read (no -pid, or not Linux).
type cpuSample struct {
	server, self, total, steal int64
	ok                         bool
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

func readCPU(pid int) cpuSample {
	if pid <= 0 {
		return cpuSample{}
	}
	server, err1 := procTimes(strconv.Itoa(pid))
	self, err2 := procTimes("self")
	total, steal, err3 := machineTimes()
	if err1 != nil || err2 != nil || err3 != nil {
		return cpuSample{}
	}
	return cpuSample{server: server, self: self, total: total, steal: steal, ok: true}
}

// procTimes returns utime+stime of /proc/<p>/stat.
func procTimes(p string) (int64, error) {
	b, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: no command name", p)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields", p, len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64) // field 14, utime
	if err != nil {
		return 0, err
	}
	s, err := strconv.ParseInt(f[12], 10, 64) // field 15, stime
	return u + s, err
}

// machineTimes returns the sum of the "cpu" line of /proc/stat and its
// steal column.
func machineTimes() (total, steal int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseMachineTimes(string(b))
}

func parseMachineTimes(stat string) (total, steal int64, err error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, v := range f[1:] {
		if i >= 8 { // guest and guest_nice are counted in user already
			break
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, err
		}
		total += n
		if i == 7 {
			steal = n
		}
	}
	return total, steal, nil
}

// setCPU fills the CPU figures from two samples around the measured phase.
func (s *summary) setCPU(a, b cpuSample) {
	if !a.ok || !b.ok || s.N == 0 {
		return
	}
	perCall := func(ticks int64) float64 { return float64(ticks) / clockTicks * 1e6 / float64(s.N) }
	s.ServerCPUUsPerCall = perCall(b.server - a.server)
	s.LoadCPUUsPerCall = perCall(b.self - a.self)
	if t := b.total - a.total; t > 0 {
		s.StealPct = float64(b.steal-a.steal) / float64(t) * 100
	}
}
