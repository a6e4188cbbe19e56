package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// Files of a workspace as the client sees them from outside: read and
// written through the workspace's own QuotaFS (the confinement and the
// quota of the guest's /workspace), holding the workspace's turn, and the
// files runs changed.

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

// fileErrno turns a QuotaFS errno on path p into an *Error.
func fileErrno(p string, errno sys.Errno, what string) error {
	switch errno {
	case sys.ENOENT:
		return &Error{Code: FileNotFound, Msg: fmt.Sprintf("no file %s in the workspace", p)}
	case sys.EPERM:
		return &Error{Code: InvalidPath, Msg: fmt.Sprintf("invalid path %s: it leaves the workspace", p)}
	case sys.EISDIR:
		return &Error{Code: InvalidPath, Msg: fmt.Sprintf("%s is a directory, not a file", p)}
	case sys.ENOTDIR:
		return &Error{Code: InvalidPath, Msg: fmt.Sprintf("invalid path %s: a part of it is a file, not a directory", p)}
	}
	return &Error{Code: StartFailed, Msg: fmt.Sprintf("could not %s %s: %v", what, p, errno), Err: errno}
}

// ReadFile reads at most length bytes from offset of the file at p (see
// CleanPath) in an existing workspace. It takes the workspace's turn, so
// it waits for a run in progress and sees what the run left. Reading at or
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
	err = m.withTurn(ctx, principal, id, func(w *ws) error {
		fsys, err := m.prepare(w)
		if err != nil {
			return err
		}
		f, errno := fsys.OpenFile(rel, sys.O_RDONLY, 0)
		if errno != 0 {
			return fileErrno(rel, errno, "read")
		}
		defer f.Close()
		st, errno := f.Stat()
		if errno != 0 {
			return fileErrno(rel, errno, "read")
		}
		if !st.Mode.IsRegular() {
			return &Error{Code: InvalidPath, Msg: fmt.Sprintf("%s is not a regular file", rel)}
		}
		out.FileInfo = FileInfo{Workspace: id, Path: rel, Size: st.Size, Modified: time.Unix(0, st.Mtim)}
		out.Offset = offset
		if offset >= st.Size || length == 0 {
			return nil
		}
		buf := make([]byte, min(length, st.Size-offset))
		n := 0
		for n < len(buf) {
			k, errno := f.Pread(buf[n:], offset+int64(n))
			if errno != 0 {
				return fileErrno(rel, errno, "read")
			}
			if k == 0 {
				break
			}
			n += k
		}
		out.Data = buf[:n]
		return nil
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
		fsys, err := m.prepare(w)
		if err != nil {
			return err
		}
		if need, ok := fsys.fits(rel, int64(len(data))); !ok {
			return &Error{Code: LimitReached, Msg: fmt.Sprintf("writing %d bytes to %s would pass the workspace's disk quota of %d MiB (%d bytes are in use, %d more are needed); nothing was written",
				len(data), rel, m.cfg.MaxDiskMiB, fsys.Used(), need)}
		}
		if dir := path.Dir(rel); dir != "." {
			if err := mkdirAll(fsys, dir); err != nil {
				return err
			}
		}
		f, errno := fsys.OpenFile(rel, sys.O_WRONLY|sys.O_CREAT|sys.O_TRUNC, 0o644)
		if errno != 0 {
			return fileErrno(rel, errno, "write")
		}
		for n := 0; n < len(data); {
			k, errno := f.Write(data[n:])
			if errno != 0 {
				f.Close()
				return fileErrno(rel, errno, "write")
			}
			if k == 0 {
				f.Close()
				return fileErrno(rel, sys.EIO, "write")
			}
			n += k
		}
		if errno := f.Close(); errno != 0 {
			return fileErrno(rel, errno, "write")
		}
		out = FileInfo{Workspace: id, Path: rel, Size: int64(len(data)), Modified: time.Now()}
		if st, errno := fsys.Stat(rel); errno == 0 {
			out.Modified = time.Unix(0, st.Mtim)
		}
		m.noteRecent(w.key, []FileInfo{out})
		return nil
	})
	return out, err
}

// mkdirAll makes dir and its parents through fsys (each charged against
// the quota like the guest's own mkdir).
func mkdirAll(fsys *QuotaFS, dir string) error {
	st, errno := fsys.Stat(dir)
	if errno == 0 {
		if !st.Mode.IsDir() {
			return &Error{Code: InvalidPath, Msg: fmt.Sprintf("invalid path: %s is a file, not a directory", dir)}
		}
		return nil
	}
	if errno != sys.ENOENT {
		return fileErrno(dir, errno, "make the directory")
	}
	if parent := path.Dir(dir); parent != "." {
		if err := mkdirAll(fsys, parent); err != nil {
			return err
		}
	}
	if errno := fsys.Mkdir(dir, 0o755); errno != 0 && errno != sys.EEXIST {
		if errno == ErrnoQuota {
			return &Error{Code: LimitReached, Msg: "the workspace's disk quota is full; nothing was written"}
		}
		return fileErrno(dir, errno, "make the directory")
	}
	return nil
}

// fits reports whether writing n bytes as the whole content of p stays
// within the quota, and if not how many bytes are missing.
func (q *QuotaFS) fits(p string, n int64) (missing int64, ok bool) {
	if q.limit <= 0 {
		return 0, true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	grow := n + entryCost // a new file; its directories cost entryCost each, checked as they are made
	if st, errno := q.inner.Lstat(p); errno == 0 && st.Mode.IsRegular() {
		grow = n - st.Size
	}
	if over := q.used + grow - q.limit; over > 0 {
		return over, false
	}
	return 0, true
}

// changedFiles are the regular files among what fsys recorded since Track,
// with their sizes now; they become the workspace's recent files too. The
// caller holds w's turn.
func (m *Manager) changedFiles(w *ws, fsys *QuotaFS) ([]FileInfo, bool) {
	paths, more := fsys.Touched()
	var files []FileInfo
	for _, p := range paths {
		st, errno := fsys.Lstat(p)
		if errno != 0 || !st.Mode.IsRegular() {
			continue
		}
		files = append(files, FileInfo{Workspace: w.key.id, Path: p, Size: st.Size, Modified: time.Unix(0, st.Mtim)})
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
