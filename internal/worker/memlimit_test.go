package worker

import (
	"io/fs"
	"testing"
)

func TestDefaultTotalMemory(t *testing.T) {
	const meminfo = "MemTotal:       25165824 kB\nMemFree:         1000 kB\n" // 24 GiB
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int
	}{
		{"machine only", map[string]string{"/proc/meminfo": meminfo}, 18432},
		{"cgroup v2 without a limit", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/a/b\n",
			"/sys/fs/cgroup/a/b/memory.max": "max\n"}, 18432},
		{"cgroup v2, an ancestor's limit is lower", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/a/b\n",
			"/sys/fs/cgroup/a/b/memory.max": "8589934592\n", "/sys/fs/cgroup/a/memory.max": "4294967296\n"}, 3072},
		{"cgroup v1", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "4:memory:/x\n3:cpu:/\n",
			"/sys/fs/cgroup/memory/x/memory.limit_in_bytes": "2147483648\n"}, 1536},
		{"cgroup v1 without a limit", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "4:cpuacct,memory:/x\n",
			"/sys/fs/cgroup/memory/x/memory.limit_in_bytes": "9223372036854771712\n"}, 18432},
		{"a cgroup limit above the machine", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/\n",
			"/sys/fs/cgroup/memory.max": "107374182400\n"}, 18432},
		{"a tiny cgroup", map[string]string{"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "33554432\n"}, minTotalMemoryMiB},
		{"nothing readable", nil, 4096},
	} {
		read := func(path string) ([]byte, error) {
			if s, ok := tc.files[path]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
		if got := defaultTotalMemoryMiB(read); got != tc.want {
			t.Errorf("%s: %d MiB; want %d", tc.name, got, tc.want)
		}
	}
}
