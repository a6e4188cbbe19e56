package guestfs

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// Quota: usage is the apparent size of regular files plus [entryCost] per
// directory entry, measured by walking the directory at creation (Usage)
// and then tracked on every write, truncate, create and remove made through
// the FS. A write that would pass the limit is shortened to fit; a write
// with no room at all fails with [ErrnoQuota]. Hard links count once per
// name. The accounting is an estimate that errs on the side of charging.
// Whether bytes fit is decided in one place, [Excess].

// ErrnoQuota is what a write, truncate or create beyond the disk quota
// returns to the guest. wazero v1.12's WASI layer knows no ENOSPC or EDQUOT:
// any errno outside its small set reaches the guest as EIO, so EIO is
// returned explicitly. [FS.Refused] lets the host say why in words; the
// host-side API (host.go) reports the same refusal as syscall.EDQUOT.
const ErrnoQuota = sys.EIO

// entryCost is what every directory entry (file, directory, symlink) costs
// against the quota on top of a regular file's size, so that a loop creating
// empty files or directories runs out of quota too.
const entryCost = 256

// Excess is by how many bytes a tree charged used bytes passes a quota of
// limit bytes once n more are charged (n may be negative): 0 when it stays
// within, and always 0 when limit <= 0 (no quota). It is the one formula of
// whether bytes fit: every refusal and every shortened write of an FS comes
// from it, and so does the registry's check that a fork's files fit.
func Excess(limit, used, n int64) int64 {
	if limit <= 0 {
		return 0
	}
	return max(used+n-limit, 0)
}

// Usage is the quota charge of everything below dir (not dir itself), as
// an FS made for dir starts with. Entries that vanish during the walk are
// skipped.
func Usage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == dir {
			return nil
		}
		total += entryCost
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total, err
}

// Used returns the bytes currently charged against the quota: the tree's
// and the extra (SetExtra).
func (q *FS) Used() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// Refused counts the operations refused for lack of quota or Budget since
// creation. A caller compares it before and after a run to tell the user
// why writes failed with an I/O error.
func (q *FS) Refused() int64 { return q.refused.Load() }

// BudgetRefused counts the operations among Refused that the Budget
// refused (the quota would have let them through).
func (q *FS) BudgetRefused() int64 { return q.budgetRefused.Load() }

// Fits reports whether writing n bytes as the whole content of the file at
// p (a guest path) stays within the quota, and if not how many bytes are
// missing. A new file costs its entry too; the directories above it are
// charged as they are made.
func (q *FS) Fits(p string, n int64) (missing int64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	grow := n + entryCost
	if c, errno := q.checked(p, false); errno == 0 {
		if st, errno := q.inner.Lstat(c); errno == 0 && st.Mode.IsRegular() {
			grow = n - st.Size
		}
	}
	missing = Excess(q.limit, q.used, grow)
	return missing, missing == 0
}

// BudgetFits is Fits for the Budget: whether writing n bytes as the whole
// content of p, replacing what p holds, stays within it. Data p shares
// with another name stays charged after the replacement.
func (q *FS) BudgetFits(p string, n int64) (missing int64, ok bool) {
	if q.budget == nil {
		return 0, true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	grow := n + entryCost
	if c, errno := q.checked(p, false); errno == 0 {
		if st, errno := q.inner.Lstat(c); errno == 0 && st.Mode.IsRegular() {
			grow = n
			if st.Nlink <= 1 {
				grow -= st.Size
			}
		}
	}
	missing = q.budget.Missing(grow)
	return missing, missing == 0
}

// reserve checks that n more bytes fit under the quota and takes shared
// bytes from the Budget (which counts data once, so shared may differ from
// n), and counts a refusal when either does not hold them. A change that
// frees bytes (<= 0) is never refused, even above a limit. A caller whose
// operation then fails gives shared back (q.budget.Add(-shared)). Callers
// hold q.mu.
func (q *FS) reserve(n, shared int64) sys.Errno {
	if n > 0 && Excess(q.limit, q.used, n) > 0 {
		q.refused.Add(1)
		return ErrnoQuota
	}
	if !q.budget.Take(shared) {
		q.refused.Add(1)
		q.budgetRefused.Add(1)
		return ErrnoQuota
	}
	return 0
}

// add applies a change of usage (n may be negative) made by a change of
// the tree, and counts the change. Callers hold q.mu.
func (q *FS) add(n int64) {
	q.used = max(q.used+n, 0)
	q.changes++
}

// SetExtra makes n bytes, held outside the tree, part of what the quota
// counts (Used), in place of what the last SetExtra gave, whatever the
// limit: what is already held elsewhere is charged, not refused, and
// writes then fail until the tree or the extra shrinks below the limit.
// The workspace registry charges a workspace's packages with it (they
// live in a shared cache, not in its files). The Budget is not touched:
// its owner charges it for the same bytes.
func (q *FS) SetExtra(n int64) {
	n = max(n, 0)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used = max(q.used-q.extra+n, 0)
	q.extra = n
}

// Changes counts the changes made to the tree through the FS (writes,
// truncations, creations, removals, renames, links) since it was made:
// a caller that saw the same count before knows nothing was changed
// through it since, without looking at the files.
func (q *FS) Changes() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changes
}

// charged runs op when n more bytes fit (reserve) and charges them once op
// succeeded: every operation that changes usage by a size known before it
// runs goes through here. Callers hold q.mu.
func (q *FS) charged(n int64, op func() sys.Errno) sys.Errno { return q.chargedAs(n, n, op) }

// chargedAs is charged for an operation that costs the Budget shared bytes
// rather than n (data shared with another name is charged to it once).
func (q *FS) chargedAs(n, shared int64, op func() sys.Errno) sys.Errno {
	if errno := q.reserve(n, shared); errno != 0 {
		return errno
	}
	if n > 0 { // it adds to the tree, which must exist (lazy.go)
		if errno := q.make(); errno != 0 {
			q.budget.Add(-shared)
			return errno
		}
	}
	if errno := op(); errno != 0 {
		q.budget.Add(-shared)
		return errno
	}
	q.add(n)
	return 0
}

// entryCharge is what removing the entry named p gives back (0 if absent):
// to the quota, and to the Budget, which gets the data back only with its
// last name.
func (q *FS) entryCharge(p string) (quota, budget int64) {
	st, errno := q.inner.Lstat(p)
	if errno != 0 {
		return 0, 0
	}
	if !st.Mode.IsRegular() {
		return entryCost, entryCost
	}
	if st.Nlink > 1 {
		return entryCost + st.Size, entryCost
	}
	return entryCost + st.Size, entryCost + st.Size
}
