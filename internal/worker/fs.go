package worker

import (
	"io/fs"
	"sync/atomic"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"execd/internal/guestfs"
)

// openFiles counts the files a guest holds open through its mounts. A
// memory image cannot carry them: wazero's descriptor table is on the host,
// so a restored guest would hold descriptors that name nothing, or, once
// it opens another file, the wrong one. Snapshot refuses while any is open.
//
// Each mount's root directory is opened lazily by wazero itself (the
// preopen, when the guest first uses its descriptor directly) and stays
// open for the instance's life: the first open of "." that is still open
// is not counted. A guest that holds one more directory handle on a mount's
// root while the preopen is unused is the one case this misses.
type openFiles struct {
	n atomic.Int64
}

func (o *openFiles) count() int64 { return o.n.Load() }

// countingFS counts the files opened through it in o.
type countingFS struct {
	experimentalsys.FS
	o    *openFiles
	root atomic.Bool // a root open is outstanding and not counted
}

func (c *countingFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	f, errno := c.FS.OpenFile(path, flag, perm)
	if errno != 0 {
		return f, errno
	}
	cf := &countedFile{File: f, c: c}
	if (path == "." || path == "") && c.root.CompareAndSwap(false, true) {
		cf.root = true
	} else {
		c.o.n.Add(1)
	}
	return cf, 0
}

type countedFile struct {
	experimentalsys.File
	c      *countingFS
	root   bool
	closed atomic.Bool
}

func (f *countedFile) Close() experimentalsys.Errno {
	if f.closed.CompareAndSwap(false, true) {
		if f.root {
			f.c.root.Store(false)
		} else {
			f.c.o.n.Add(-1)
		}
	}
	return f.File.Close()
}

// emptyDir is the read-only, empty /workspace of a worker that mounts none
// and of the instance a base image is made from: every instance has the
// same mounts in the same order, so the descriptor numbers the guest's libc
// recorded at init (its preopen table, in linear memory) match every
// instance restored from the image.
var emptyDir = guestfs.EmptyDir
