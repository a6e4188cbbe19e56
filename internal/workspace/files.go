package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Files of a workspace as the client sees them from outside: read and
// written through the workspace's own Disk (the confinement and the quota
// of the guest's /workspace), holding the workspace's turn, and the files
// runs changed.

// FileInfo describes one file of a workspace.
type FileInfo struct {
	Workspace string
	// Path is relative to the workspace's directory (/workspace in the
	// guest), slash-separated, cleaned: "out/plot.png".
	Path     string
	Size     int64
	Modified time.Time
}

// FileData is part of a file's content, from ReadFile.
type FileData struct {
	FileInfo
	Offset int64
	Data   []byte
}

// MaxRecent is how many recently changed files RecentFiles keeps per
// principal.
const MaxRecent = 64

// CleanPath turns a path a client gave into one relative to the
// workspace's directory: "a/b.txt", "/workspace/a/b.txt" and "./a/b.txt"
// are all "a/b.txt". Absolute paths outside /workspace, ".." that climbs
// out, empty paths, NUL bytes and paths over 4096 bytes are refused
// (InvalidPath).
func CleanPath(p string) (string, error) {
	bad := func(why string) (string, error) {
		return "", &Error{Code: InvalidPath, Msg: fmt.Sprintf("invalid path %q: %s", clip(p), why)}
	}
	if len(p) > 4096 {
		return bad("longer than 4096 bytes")
	}
	if strings.ContainsRune(p, 0) {
		return bad("it contains a NUL byte")
	}
	rel := p
	if strings.HasPrefix(p, "/") {
		c := path.Clean(p)
		switch {
		case c == "/workspace":
			rel = "."
		case strings.HasPrefix(c, "/workspace/"):
			rel = strings.TrimPrefix(c, "/workspace/")
		default:
			return bad("a workspace's files are under /workspace")
		}
	}
	c := path.Clean(rel)
	if c == "." {
		return bad("it names the workspace's directory, not a file")
	}
	if !fs.ValidPath(c) {
		return bad("it leaves the workspace")
	}
	return c, nil
}

// fileError turns an error of a Disk about p (what the client named) into
// an *Error; what says what was being done ("read", "write").
func fileError(p string, err error, what string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "mkdir" {
		what, p = "make the directory", pe.Path
		if errors.Is(err, syscall.ENOTDIR) {
			return &Error{Code: InvalidPath, Msg: fmt.Sprintf("invalid path: %s is a file, not a directory", p)}
		}
	}
	switch {
	case errors.Is(err, syscall.EDQUOT):
		return &Error{Code: LimitReached, Msg: "the workspace's disk quota (workspace.max_disk_mib) is full; nothing was written"}
	case errors.Is(err, syscall.ENOSPC):
		return &Error{Code: LimitReached, Msg: "this token's disk budget (workspace.max_principal_disk_mib) is full; nothing was written"}
	case errors.Is(err, fs.ErrInvalid):
		return &Error{Code: InvalidPath, Msg: fmt.Sprintf("%s is not a regular file", p)}
	case errors.Is(err, syscall.ENOENT):
		return &Error{Code: FileNotFound, Msg: fmt.Sprintf("no file %s in the workspace", p)}
	case errors.Is(err, syscall.EPERM):
		return &Error{Code: InvalidPath, Msg: fmt.Sprintf("invalid path %s: it leaves the workspace", p)}
	case errors.Is(err, syscall.EISDIR):
		return &Error{Code: InvalidPath, Msg: fmt.Sprintf("%s is a directory, not a file", p)}
	case errors.Is(err, syscall.ENOTDIR):
		return &Error{Code: InvalidPath, Msg: fmt.Sprintf("invalid path %s: a part of it is a file, not a directory", p)}
	}
	errno := err
	if pe != nil {
		errno = pe.Err
	}
	return &Error{Code: StartFailed, Msg: fmt.Sprintf("could not %s %s: %v", what, p, errno), Err: err}
}

// ReadFile reads at most length bytes from offset of the file at p (see
// CleanPath) in an existing workspace. It takes the workspace's turn, so
// it waits for a run in progress and sees what the run left — but for a
// run whose code waits for input, which it reads beside. Reading at or
// past the end gives no data. Errors: NotFound (no such workspace),
// FileNotFound, InvalidPath.
func (m *Manager) ReadFile(ctx context.Context, principal, id, p string, offset, length int64) (FileData, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return FileData{}, err
	}
	if offset < 0 || length < 0 {
		return FileData{}, &Error{Code: InvalidPath, Msg: "offset and length must not be negative"}
	}
	var out FileData
	read := func(disk Disk) error {
		info, data, err := disk.ReadFile(rel, offset, length)
		if err != nil {
			return fileError(rel, err, "read")
		}
		out = FileData{FileInfo: FileInfo{Workspace: id, Path: rel, Size: info.Size(), Modified: info.ModTime()}, Offset: offset, Data: data}
		return nil
	}
	// While the code waits for input the files are read beside it, through
	// its own Disk (safe for concurrent use): a read must not wait for a
	// person's answer.
	asking := func(w *ws) error {
		m.mu.Lock()
		disk := w.disk
		m.mu.Unlock()
		if disk == nil {
			return &Error{Code: NotFound, Msg: fmt.Sprintf("workspace %q does not exist", id)}
		}
		return read(disk)
	}
	err = m.turnUnlessAsking(ctx, principal, id, true, asking, func(w *ws) error {
		disk, err := m.prepare(w)
		if err != nil {
			return err
		}
		return read(disk)
	})
	return out, err
}

// WriteFile writes data as the whole content of the file at p (see
// CleanPath), making the directories above it, in the workspace — which
// is created if it does not exist yet, as a run would. It takes the
// workspace's turn. Data that would not fit in the workspace's disk quota
// is refused before anything is written (LimitReached). A file shared
// with a checkpoint or a fork is replaced, never written through.
func (m *Manager) WriteFile(ctx context.Context, principal, id, p string, data []byte) (FileInfo, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return FileInfo{}, err
	}
	var out FileInfo
	err = m.turn(ctx, principal, id, false, func(w *ws) error {
		disk, err := m.prepare(w)
		if err != nil {
			return err
		}
		if need, ok := disk.Fits(rel, int64(len(data))); !ok {
			return &Error{Code: LimitReached, Msg: fmt.Sprintf("writing %d bytes to %s would pass the workspace's disk quota (workspace.max_disk_mib = %d; %d bytes are in use, %d more are needed); nothing was written",
				len(data), rel, m.cfg.MaxDiskMiB, disk.Used(), need)}
		}
		if need, ok := disk.BudgetFits(rel, int64(len(data))); !ok {
			return m.principalDiskFull(m.budgetOf(w.key.pdir), fmt.Sprintf("writing %d bytes to %s", len(data), rel), need)
		}
		info, err := disk.WriteFile(rel, data)
		if err != nil {
			return fileError(rel, err, "write")
		}
		out = FileInfo{Workspace: id, Path: rel, Size: int64(len(data)), Modified: info.ModTime()}
		m.noteRecent(w.key, []FileInfo{out})
		return nil
	})
	return out, err
}

// changedFiles are the regular files among what disk recorded since Track,
// with their sizes now; they become the workspace's recent files too. The
// caller holds w's turn.
func (m *Manager) changedFiles(w *ws, disk Disk) ([]FileInfo, bool) {
	paths, more := disk.Touched()
	var files []FileInfo
	for _, p := range paths {
		info, err := disk.Info(p)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		files = append(files, FileInfo{Workspace: w.key.id, Path: p, Size: info.Size(), Modified: info.ModTime()})
	}
	m.noteRecent(w.key, files)
	return files, more
}

// noteRecent puts files at the head of their principal's recent files.
func (m *Manager) noteRecent(k key, files []FileInfo) {
	if len(files) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.recent[k.pdir]
	list := make([]FileInfo, 0, min(len(files)+len(old), MaxRecent))
	for i := len(files) - 1; i >= 0 && len(list) < MaxRecent; i-- {
		list = append(list, files[i])
	}
	for _, f := range old {
		if len(list) >= MaxRecent {
			break
		}
		if f.Workspace == k.id && containsPath(files, f.Path) {
			continue
		}
		list = append(list, f)
	}
	m.recent[k.pdir] = list
}

func containsPath(files []FileInfo, p string) bool {
	for _, f := range files {
		if f.Path == p {
			return true
		}
	}
	return false
}

// forgetRecent drops the recent files of a workspace after its files were
// replaced or deleted.
func (m *Manager) forgetRecent(k key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var list []FileInfo
	for _, f := range m.recent[k.pdir] {
		if f.Workspace != k.id {
			list = append(list, f)
		}
	}
	m.recent[k.pdir] = list
}

// RecentFiles lists the files the principal's runs and WriteFile changed
// lately, newest first, at most MaxRecent, as they are on disk now (a file
// since removed is left out). The list is kept in memory: it starts empty
// when execd starts.
func (m *Manager) RecentFiles(principal string) []FileInfo {
	pd, err := principalDir(principal)
	if err != nil {
		return nil
	}
	m.mu.Lock()
	list := append([]FileInfo(nil), m.recent[pd]...)
	m.mu.Unlock()
	out := list[:0]
	for _, f := range list {
		// Lstat: a path the guest turned into a symlink is not listed.
		st, err := os.Lstat(filepath.Join(m.cfg.DataDir, pd, f.Workspace, filepath.FromSlash(f.Path)))
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		f.Size, f.Modified = st.Size(), st.ModTime()
		out = append(out, f)
	}
	return out
}
