package workspace

import "golang.org/x/sys/unix"

// exchange swaps the directories a and b atomically (renameat2
// RENAME_EXCHANGE).
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// renameNoReplace renames a to b unless b exists (renameat2
// RENAME_NOREPLACE): EEXIST then, and a stays where it was.
func renameNoReplace(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
}
