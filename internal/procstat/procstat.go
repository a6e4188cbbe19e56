// Package procstat reads what Linux reports of a process in
// /proc/PID/status: the resident set size that the daemon tests, the soak
// and the benchmarks watch. It imports nothing of execd, so that every
// test, tool and benchmark may use it.
package procstat

import (
	"bytes"
	"errors"
	"os"
	"strconv"
)

// RSSKiB returns the resident set size (VmRSS) of process pid, in KiB.
func RSSKiB(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	n, err := vmRSS(b)
	if err != nil {
		return 0, errors.New("/proc/" + strconv.Itoa(pid) + "/status: " + err.Error())
	}
	return n, nil
}

// SelfRSSKiB is RSSKiB of this process.
func SelfRSSKiB() (int64, error) { return RSSKiB(os.Getpid()) }

var errNoVmRSS = errors.New("no VmRSS line of the form \"VmRSS: <n> kB\"")

// vmRSS finds the line "VmRSS:\t<n> kB" of a status file (proc(5): the
// value is in kB, which the kernel means as KiB) and returns n.
func vmRSS(status []byte) (int64, error) {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		v, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(v)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, errNoVmRSS
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || n < 0 {
			return 0, errNoVmRSS
		}
		return n, nil
	}
	return 0, errNoVmRSS
}
