package worker

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// trimChunk is how many pagemap entries one read takes (32 KiB).
const trimChunk = 4096

// trimBase drops the page-table entries of the pages in the memory's first
// n bytes (the part mapped from the base image, see mapShared) that are
// still the base's own pages, and returns their bytes: what the process's
// resident set shrank by. Pages the guest wrote, pages never touched and
// everything beyond n are left alone (see unwrittenBasePage). No call may
// run in the instance meanwhile: a page written between the read of its
// entry and the madvise would be lost.
func (m *linearMemory) trimBase(n uint64) (int64, error) {
	n = min(n, m.size.Load())
	ps := uint64(os.Getpagesize())
	pages := n / ps
	if pages == 0 {
		return 0, nil
	}
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(m.mem))))
	buf := make([]byte, 8*min(pages, trimChunk))
	entries := make([]uint64, min(pages, trimChunk))
	var freed int64
	for p := uint64(0); p < pages; p += trimChunk {
		k := min(pages-p, trimChunk)
		if _, err := f.ReadAt(buf[:8*k], int64((start/ps+p)*8)); err != nil {
			return freed, fmt.Errorf("read /proc/self/pagemap: %w", err)
		}
		for i := range entries[:k] {
			entries[i] = binary.NativeEndian.Uint64(buf[8*i:])
		}
		err := runsOf(entries[:k], func(first, cnt int) error {
			off := (p + uint64(first)) * ps
			if err := unix.Madvise(m.mem[off:off+uint64(cnt)*ps], unix.MADV_DONTNEED); err != nil {
				return fmt.Errorf("madvise: %w", err)
			}
			freed += int64(cnt) * int64(ps)
			return nil
		})
		if err != nil {
			return freed, err
		}
	}
	return freed, nil
}
