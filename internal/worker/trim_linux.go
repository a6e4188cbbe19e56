package worker

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// trimBase drops the page-table entries of the pages in the memory's first
// n bytes (the part mapped from the base image, see mapShared) that are
// still the base's own pages, and returns their bytes: what the process's
// resident set shrank by. Pages the guest wrote, pages never touched and
// everything beyond n are left alone (see classify). No call may run in
// the instance meanwhile: a page written between the read of its entry and
// the madvise would be lost.
func (m *linearMemory) trimBase(n uint64) (int64, error) {
	n = min(n, m.size.Load())
	runs, err := touchedPages(m.mem[:n])
	if err != nil {
		return 0, err
	}
	var freed int64
	for _, r := range runs.read {
		from, to := uint64(r.first)*imagePage, uint64(r.first+r.count)*imagePage
		if err := unix.Madvise(m.mem[from:to], unix.MADV_DONTNEED); err != nil {
			return freed, fmt.Errorf("madvise: %w", err)
		}
		freed += int64(to - from)
	}
	return freed, nil
}
