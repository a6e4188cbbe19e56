package worker

// Trimming: an idle instance gives back the page-table entries of the base
// image pages it only read (Worker.Trim). Linux counts every page a mapping
// has an entry for in the process's resident set, so without this an idle
// worker shows in ps and top the few MiB of base pages its calls read
// (and their fault-around neighbours), although the page cache holds them
// once for every instance. Dropping the entries costs nothing in memory:
// the pages stay in the base's memfd; the next call that reads them maps
// them again (a minor fault each). See RATIONALE.md, "Why do idle workers
// give back the base pages they only read?".

// Bits of a /proc/self/pagemap entry (the kernel's
// Documentation/admin-guide/mm/pagemap.rst): one native-endian 64-bit word
// per page of the process's address space.
const (
	pmPresent = 1 << 63 // a page frame is mapped
	pmSwapped = 1 << 62 // the entry is a swap entry (private memory swapped out)
	pmFile    = 1 << 61 // the page is a file page or shared anonymous memory
)

// unwrittenBasePage reports whether the pagemap entry e, of a page of a
// private mapping of the base image, is the base's own page: present and
// a file page. A page the guest wrote is a private anonymous copy (file
// bit clear), a page it never touched is not present, and a swapped
// private page is a swap entry: dropping the entry of any of those would
// lose what it holds or gain nothing, so only these are dropped.
func unwrittenBasePage(e uint64) bool {
	return e&(pmPresent|pmSwapped|pmFile) == pmPresent|pmFile
}

// runsOf calls drop(first, n) for every maximal run of n consecutive
// entries, from index first on, that unwrittenBasePage accepts.
func runsOf(entries []uint64, drop func(first, n int) error) error {
	first := -1
	for i, e := range entries {
		switch {
		case unwrittenBasePage(e) && first < 0:
			first = i
		case !unwrittenBasePage(e) && first >= 0:
			if err := drop(first, i-first); err != nil {
				return err
			}
			first = -1
		}
	}
	if first >= 0 {
		return drop(first, len(entries)-first)
	}
	return nil
}
