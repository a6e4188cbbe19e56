package worker

import (
	"encoding/binary"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	pagemapPresent = 1 << 63
	pagemapFile    = 1 << 61 // a file page or shared anonymous: not a private copy
)

// touchedPages reads /proc/self/pagemap for mem and returns its pages that
// are resident, by whether they are the instance's own copies (written
// since the base was mapped) or still the base's pages (only read).
func touchedPages(mem []byte) (pageRuns, error) {
	var runs pageRuns
	if len(mem) == 0 {
		return runs, nil
	}
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return runs, err
	}
	defer f.Close()
	ps := uintptr(unix.Getpagesize())
	if ps != imagePage {
		return runs, nil // the runs are in image pages; other page sizes are not learned
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	n := len(mem) / imagePage
	buf := make([]byte, 8*n)
	if _, err := f.ReadAt(buf, int64(start/ps*8)); err != nil {
		return runs, err
	}
	add := func(list *[]pageRun, p uint32) {
		if l := len(*list); l > 0 && (*list)[l-1].first+(*list)[l-1].count == p {
			(*list)[l-1].count++
			return
		}
		*list = append(*list, pageRun{first: p, count: 1})
	}
	for i := range n {
		e := binary.LittleEndian.Uint64(buf[8*i:])
		switch {
		case e&pagemapPresent == 0:
		case e&pagemapFile == 0:
			add(&runs.written, uint32(i))
		default:
			add(&runs.read, uint32(i))
		}
	}
	return runs, nil
}

// prefault faults runs into mem. Errors (a kernel before 5.14 has neither
// advice) leave the pages to fault on first use, as without it.
func prefault(mem []byte, runs pageRuns) {
	apply := func(list []pageRun, advice int) {
		for _, r := range list {
			from, to := int(r.first)*imagePage, int(r.first+r.count)*imagePage
			if to > len(mem) {
				return
			}
			if unix.Madvise(mem[from:to], advice) != nil {
				return
			}
		}
	}
	apply(runs.written, unix.MADV_POPULATE_WRITE)
	apply(runs.read, unix.MADV_POPULATE_READ)
}
