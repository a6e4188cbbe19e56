package worker

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultTotalMemoryMiB is the default of Config.TotalMemoryMiB: 3/4 of the
// lower of the machine's memory (MemTotal in /proc/meminfo) and the memory
// limit of the process's cgroup (memory.max of cgroup v2, the lowest up
// the hierarchy, or memory.limit_in_bytes of cgroup v1), leaving a quarter
// to the daemon's own heap, the compiled guests and the page cache. Where
// neither can be read, 4096.
func DefaultTotalMemoryMiB() int {
	return defaultTotalMemoryMiB(os.ReadFile)
}

func defaultTotalMemoryMiB(read func(string) ([]byte, error)) int {
	limit := machineMemory(read)
	if c := cgroupMemory(read); c > 0 && (limit == 0 || c < limit) {
		limit = c
	}
	if limit == 0 {
		return 4096
	}
	return max(int(limit/4*3>>20), minTotalMemoryMiB)
}

// machineMemory is MemTotal in bytes, 0 when unknown.
func machineMemory(read func(string) ([]byte, error)) uint64 {
	b, err := read("/proc/meminfo")
	if err != nil {
		return 0
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// cgroupMemory is the lowest memory limit of the process's cgroup and its
// ancestors, in bytes; 0 when there is none or it cannot be read.
func cgroupMemory(read func(string) ([]byte, error)) uint64 {
	b, err := read("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	var lowest uint64
	take := func(path string) {
		v, err := read(path)
		if err != nil {
			return
		}
		// "max" (v2) does not parse, and v1 says "no limit" with a huge
		// number: neither is a limit.
		n, err := strconv.ParseUint(strings.TrimSpace(string(v)), 10, 64)
		if err == nil && n > 0 && n < 1<<60 && (lowest == 0 || n < lowest) {
			lowest = n
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // cgroup v2
			for dir := filepath.Join("/sys/fs/cgroup", parts[2]); ; dir = filepath.Dir(dir) {
				take(filepath.Join(dir, "memory.max"))
				if dir == "/sys/fs/cgroup" {
					break
				}
			}
		case strings.Contains(","+parts[1]+",", ",memory,"): // cgroup v1
			take(filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
		}
	}
	return lowest
}
