package worker

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reserve maps n bytes of address space with no access: it costs neither
// memory nor commit charge until commit.
func reserve(n uint64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("reserve %d bytes: %w", n, err)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// commit makes b (page aligned: wasm pages are 64 KiB) readable and
// writable; its pages read as zero until written.
func commit(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Mprotect(b, unix.PROT_READ|unix.PROT_WRITE)
}

func release(b []byte) {
	if len(b) > 0 {
		_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
	}
}

// sharedPages is a base image's memory in a sealed memfd: the page cache
// holds it once, and every instance restored from it maps it privately.
type sharedPages struct {
	fd   int
	view []byte // read-only, shared: the base's bytes
}

// newSharedPages makes size bytes of shared pages that fill writes.
func newSharedPages(size uint64, fill func([]byte)) (*sharedPages, error) {
	fd, err := unix.MemfdCreate("execd-base", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	fail := func(err error) (*sharedPages, error) {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail(fmt.Errorf("ftruncate: %w", err))
	}
	if size > 0 {
		w, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return fail(fmt.Errorf("mmap: %w", err))
		}
		fill(w)
		if err := unix.Munmap(w); err != nil {
			return fail(fmt.Errorf("munmap: %w", err))
		}
	}
	// Sealed, the pages cannot change under the instances that map them.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		return fail(fmt.Errorf("seal: %w", err))
	}
	sp := &sharedPages{fd: fd}
	if size > 0 {
		p, err := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return fail(fmt.Errorf("mmap: %w", err))
		}
		sp.view = unsafe.Slice((*byte)(p), size)
	}
	return sp, nil
}

func (sp *sharedPages) bytes() []byte { return sp.view }

func (sp *sharedPages) close() {
	release(sp.view)
	sp.view = nil
	unix.Close(sp.fd)
}

// mapShared puts a private, copy-on-write mapping of sp's first n bytes
// over the memory's first n bytes, at the same addresses, so wazero's view
// of the memory stays valid. The memory must already be that large.
func (m *linearMemory) mapShared(sp *sharedPages, n uint64) error {
	if n == 0 {
		return nil
	}
	if n > m.size.Load() || n > uint64(len(sp.view)) {
		return fmt.Errorf("map %d shared bytes: memory has %d, base %d", n, m.size.Load(), len(sp.view))
	}
	addr := unsafe.Pointer(unsafe.SliceData(m.mem))
	if _, err := unix.MmapPtr(sp.fd, 0, addr, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED); err != nil {
		return fmt.Errorf("map the base image: %w", err)
	}
	return nil
}

// zero makes bytes [from, to) of the memory zero pages again (fresh
// anonymous ones: the old pages are freed, not written).
func (m *linearMemory) zero(from, to uint64) error {
	if to <= from {
		return nil
	}
	addr := unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.mem)), from)
	if _, err := unix.MmapPtr(-1, 0, addr, uintptr(to-from), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED); err != nil {
		return fmt.Errorf("zero memory: %w", err)
	}
	return nil
}

// executableMemory reports whether this process may map memory it wrote
// as executable, as wazero's compiler does with the machine code it
// makes. Without it (systemd's MemoryDenyWriteExecute=, an SELinux
// execmem denial), wazero runs the guests in its interpreter, several
// times slower, and says nothing.
func executableMemory() bool {
	b, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return false
	}
	defer unix.Munmap(b)
	return unix.Mprotect(b, unix.PROT_READ|unix.PROT_EXEC) == nil
}
