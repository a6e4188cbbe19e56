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

// A resident page of a private mapping of the base image is one of:
const (
	pageUntouched = iota // not present, or swapped out (a swap entry is never present)
	pageWritten          // a private anonymous copy (or the shared zero page beyond the base)
	pageRead             // present and a file page: the base's own page, only read
)

// classify says which kind of page the pagemap entry e is. Only pageRead
// entries may be dropped (trimBase): dropping a written page's entry
// would lose what it holds; an untouched one has nothing to drop.
func classify(e uint64) int {
	switch {
	case e&pmPresent == 0 || e&pmSwapped != 0:
		return pageUntouched
	case e&pmFile == 0:
		return pageWritten
	}
	return pageRead
}

// add appends the pages of entries, the pagemap entries of pages first
// on, to runs, joining runs of consecutive pages of one kind.
func (runs *pageRuns) add(first uint32, entries []uint64) {
	join := func(list *[]pageRun, p uint32) {
		if l := len(*list); l > 0 && (*list)[l-1].first+(*list)[l-1].count == p {
			(*list)[l-1].count++
			return
		}
		*list = append(*list, pageRun{first: p, count: 1})
	}
	for i, e := range entries {
		switch classify(e) {
		case pageWritten:
			join(&runs.written, first+uint32(i))
		case pageRead:
			join(&runs.read, first+uint32(i))
		}
	}
}
