package worker

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pagemapChunk is how many pagemap entries one read takes (32 KiB).
const pagemapChunk = 4096

// touchedPages reads /proc/self/pagemap for mem (page aligned) and returns
// its resident pages: those that are the instance's own copies (written
// since the base was mapped) and those still the base's pages (only read);
// see classify.
func touchedPages(mem []byte) (pageRuns, error) {
	var runs pageRuns
	ps := uintptr(os.Getpagesize())
	if ps != imagePage {
		return runs, fmt.Errorf("page size %d, not %d", ps, imagePage)
	}
	pages := len(mem) / imagePage
	if pages == 0 {
		return runs, nil
	}
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return runs, err
	}
	defer f.Close()
	start := uintptr(unsafe.Pointer(unsafe.SliceData(mem))) / ps
	buf := make([]byte, 8*min(pages, pagemapChunk))
	entries := make([]uint64, min(pages, pagemapChunk))
	for p := 0; p < pages; p += pagemapChunk {
		k := min(pages-p, pagemapChunk)
		if _, err := f.ReadAt(buf[:8*k], int64((start+uintptr(p))*8)); err != nil {
			return runs, fmt.Errorf("read /proc/self/pagemap: %w", err)
		}
		for i := range entries[:k] {
			entries[i] = binary.NativeEndian.Uint64(buf[8*i:])
		}
		runs.add(uint32(p), entries[:k])
	}
	return runs, nil
}

// prefault faults runs into mem. Errors (a kernel before 5.14 has neither
// advice) leave the pages to fault on first use, as without it.
func prefault(mem []byte, runs pageRuns) {
	apply := func(list []pageRun, advice int) {
		for _, r := range list {
			from, to := int(r.first)*imagePage, int(r.first+r.count)*imagePage
			if to > len(mem) || unix.Madvise(mem[from:to], advice) != nil {
				return
			}
		}
	}
	apply(runs.written, unix.MADV_POPULATE_WRITE)
	apply(runs.read, unix.MADV_POPULATE_READ)
}
