package workspace

import (
	"io/fs"

	"execd/internal/guestfs"
)

// Disk is a workspace's directory as the registry drives it: the files
// its runners see at /workspace, confined to the directory and under the
// workspace's disk quota, with a log of the paths each run changed. The
// Manager opens one per workspace in use (openDisk), shares it between the
// workspace's runners (Factory.NewRunner mounts it) and reads and writes
// the workspace's files through it, holding the workspace's turn.
// *guestfs.FS is the implementation; its package doc says how paths are
// confined and what the quota counts.
type Disk interface {
	// ReadFile reads at most length bytes from offset of the regular file
	// at p (a path relative to the directory) and describes it.
	ReadFile(p string, offset, length int64) (fs.FileInfo, []byte, error)
	// WriteFile writes data as the whole content of the file at p, making
	// the directories above it.
	WriteFile(p string, data []byte) (fs.FileInfo, error)
	// Info describes the entry at p, like os.Lstat.
	Info(p string) (fs.FileInfo, error)
	// Fits reports whether n bytes as the whole content of p stay within
	// the quota, and if not how many bytes are missing.
	Fits(p string, n int64) (missing int64, ok bool)
	// BudgetFits is Fits for the principal's disk budget the Disk
	// charges too (guestfs.Budget).
	BudgetFits(p string, n int64) (missing int64, ok bool)
	// Used is the bytes charged against the quota now: the files', and
	// the extra.
	Used() int64
	// SetExtra charges n bytes held outside the directory (the
	// workspace's packages, in the shared cache) against the quota, in
	// place of the last SetExtra's, whatever the limit.
	SetExtra(n int64)
	// Changes counts the changes made through the Disk since it opened.
	Changes() uint64
	// Refused counts the changes the quota or the budget refused since the
	// Disk opened; BudgetRefused those the budget refused.
	Refused() int64
	BudgetRefused() int64
	// Track starts recording the paths changed; Touched stops and returns
	// them (at most MaxTouched, in the order first changed) and whether
	// more were changed.
	Track()
	Touched() (paths []string, more bool)
	// Acquire opens the descriptor paths are resolved through (an error
	// when the process is out of descriptors); Release closes it until the
	// next use.
	Acquire() error
	Release()
	Close() error
}

// Errors of a Disk's ReadFile, WriteFile and Info are *fs.PathError
// wrapping a syscall.Errno, syscall.EDQUOT for the quota, syscall.ENOSPC
// for the principal's disk budget, or fs.ErrInvalid
// for what is not a regular file (fileError reads them).
var _ Disk = (*guestfs.FS)(nil)

// MaxTouched is the most files one run's Outcome names.
const MaxTouched = guestfs.MaxTouched

// openDisk opens the Disk of w's files directory, with a quota of
// limitBytes (<= 0: none), charging the principal's budget b too (nil:
// none). Until the directory exists the Disk reads as an empty one and
// makes it before the first change (makeFilesDir, from spares, with langs
// for an older execd's principal directory).
func openDisk(w *ws, limitBytes int64, b *guestfs.Budget, spares *spareDirs, langs []string) (Disk, error) {
	dir, state := w.dir, w.state
	d, err := guestfs.NewLazy(dir, limitBytes, b, func() error { return makeFilesDir(spares, dir, state, langs) })
	if err != nil {
		return nil, err
	}
	return d, nil
}

// diskQuota is MaxDiskMiB in bytes (0: none), the limit of every Disk.
func (c Config) diskQuota() int64 { return int64(c.MaxDiskMiB) << 20 }
