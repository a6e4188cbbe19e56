package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"execd/internal/guestfs"
)

// Info describes one workspace for List.
type Info struct {
	ID string
	// Principal is set by ListAll only: the name of the principal's
	// directory, which is the principal itself when it is a plain name
	// (principalDir).
	Principal string
	// Languages lists the languages whose interpreter state is kept, live
	// or hibernated, sorted; Interpreters has the detail.
	Languages    []string
	Interpreters []Interpreter
	Live         bool      // at least one interpreter is in memory
	Hibernated   bool      // at least one interpreter is saved on disk
	Running      bool      // a call is running in it now
	LastUsed     time.Time // last call's end; from the disk when not live
	DiskBytes    int64     // its files, as the quota counts them
	MemoryBytes  int64     // held by its live interpreters
	StateBytes   int64     // its saved interpreters and checkpoints on disk
	Checkpoints  []CheckpointInfo
	// Packages are what its packages lock holds (LockPath), by language
	// and name; nil when none.
	Packages []Package
}

// Interpreter is one language's kept state in a workspace.
type Interpreter struct {
	Language    string
	Live        bool  // in memory; otherwise hibernated (saved on disk)
	MemoryBytes int64 // when live: memory it held after its last run
	ImageBytes  int64 // when hibernated: size of its image
}

// CheckpointInfo describes one checkpoint of a workspace.
type CheckpointInfo struct {
	Name      string
	Created   time.Time
	Languages []string // languages with a saved interpreter in it
	Bytes     int64    // its images and files (shared file data counted in full)
}

// List returns the principal's workspaces, live ones and those on disk
// only, most recently used first.
func (m *Manager) List(principal string) []Info {
	infos, _ := m.ListPage(principal, nil, 0)
	return infos
}

// ListFrom is where a page of ListPage starts: after the workspace ID,
// last used at LastUsed, in List's order.
type ListFrom struct {
	LastUsed time.Time
	ID       string
}

// ListPage is List a page at a time: at most limit workspaces (0 = all)
// that come after from (nil = the first), and whether more follow. Only
// the page's workspaces have their files and checkpoints measured, which
// is most of List's work. A workspace used between two pages moves to the
// front, so a listing in pages may miss it or show it twice, never
// another principal's.
func (m *Manager) ListPage(principal string, from *ListFrom, limit int) (page []Info, more bool) {
	pd, err := principalDir(principal)
	if err != nil {
		return nil, false
	}
	return m.list(pd, from, limit)
}

// ListAll returns every principal's workspaces, as List returns one's,
// with Info.Principal set, most recently used first. It is an operator's
// view (the admin listener's status page), never a client's.
func (m *Manager) ListAll() []Info {
	pds := map[string]bool{}
	m.mu.Lock()
	for k := range m.wss {
		pds[k.pdir] = true
	}
	m.mu.Unlock()
	entries, _ := os.ReadDir(m.cfg.DataDir)
	for _, e := range entries {
		if e.IsDir() && (ValidateID(e.Name()) == nil || isHexDir(e.Name())) {
			pds[e.Name()] = true
		}
	}
	var out []Info
	for pd := range pds {
		infos, _ := m.list(pd, nil, 0)
		for _, in := range infos {
			in.Principal = pd
			out = append(out, in)
		}
	}
	sortInfos(out)
	return out
}

// isHexDir reports a directory name principalDir makes of a principal that
// is not a plain name.
func isHexDir(name string) bool {
	if len(name) < 3 || name[0] != '~' {
		return false
	}
	for _, c := range name[1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func sortInfos(out []Info) {
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastUsed.Equal(out[j].LastUsed) {
			return out[i].LastUsed.After(out[j].LastUsed)
		}
		return out[i].Principal+"/"+out[i].ID < out[j].Principal+"/"+out[j].ID
	})
}

// list is ListPage of the principal whose directory name is pd.
func (m *Manager) list(pd string, from *ListFrom, limit int) ([]Info, bool) {
	pdir := filepath.Join(m.cfg.DataDir, pd)
	infos := map[string]*Info{}
	m.mu.Lock()
	for k, w := range m.wss {
		if k.pdir != pd || len(w.runners) == 0 && !w.busy {
			continue // another principal's, or a record on its way in or out
		}
		in := &Info{ID: k.id, Running: w.running, LastUsed: w.lastUsed, DiskBytes: -1}
		for lang := range w.runners {
			in.Interpreters = append(in.Interpreters, Interpreter{Language: lang, Live: true, MemoryBytes: w.mem[lang]})
			in.MemoryBytes += w.mem[lang]
		}
		if w.disk != nil {
			in.DiskBytes = w.disk.Used()
		}
		infos[k.id] = in
	}
	m.mu.Unlock()

	// On disk, a workspace has a files directory, a state directory or
	// both (workspaceIDs); when not live, it was last used when the later
	// of the two last changed.
	onDisk := map[string]*Info{}
	for _, d := range []string{pdir, filepath.Join(pdir, stateDirName)} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if !e.IsDir() || ValidateID(e.Name()) != nil || infos[e.Name()] != nil && onDisk[e.Name()] == nil {
				continue
			}
			in := onDisk[e.Name()]
			if in == nil {
				in = &Info{ID: e.Name(), DiskBytes: -1}
				infos[e.Name()], onDisk[e.Name()] = in, in
			}
			if fi, err := e.Info(); err == nil && fi.ModTime().After(in.LastUsed) {
				in.LastUsed = fi.ModTime()
			}
		}
	}
	out := make([]Info, 0, len(infos))
	for _, in := range infos {
		m.describeState(in, filepath.Join(pdir, stateDirName, in.ID))
		if from == nil || in.LastUsed.Before(from.LastUsed) || in.LastUsed.Equal(from.LastUsed) && in.ID > from.ID {
			out = append(out, *in)
		}
	}
	sortInfos(out)
	more := limit > 0 && len(out) > limit
	if more {
		out = out[:limit]
	}
	for i := range out {
		in := &out[i]
		if in.DiskBytes < 0 {
			in.DiskBytes, _ = guestfs.Usage(filepath.Join(pdir, in.ID))
		}
		in.Checkpoints = m.checkpoints(filepath.Join(pdir, stateDirName, in.ID))
		in.Packages = lockFilePackages(filepath.Join(pdir, in.ID, LockPath))
		for _, c := range in.Checkpoints {
			in.StateBytes += c.Bytes
		}
	}
	return out, more
}

// describeState fills in the hibernated interpreters (for languages not
// live) the state directory holds, and when they were last used.
func (m *Manager) describeState(in *Info, state string) {
	live := map[string]bool{}
	for _, it := range in.Interpreters {
		live[it.Language] = true
	}
	for _, lang := range m.langs.offered() {
		if live[lang] || !readNote(state, lang).hasImage() {
			continue
		}
		p := imagePath(state, lang)
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		in.Interpreters = append(in.Interpreters, Interpreter{Language: lang, ImageBytes: st.Size()})
		in.StateBytes += st.Size()
		if !in.Running && len(live) == 0 && st.ModTime().After(in.LastUsed) {
			in.LastUsed = st.ModTime()
		}
	}
	sort.Slice(in.Interpreters, func(i, j int) bool { return in.Interpreters[i].Language < in.Interpreters[j].Language })
	for _, it := range in.Interpreters {
		in.Languages = append(in.Languages, it.Language)
		in.Live = in.Live || it.Live
		in.Hibernated = in.Hibernated || !it.Live
	}
}

// checkpoints lists the checkpoints in a state directory, oldest first.
func (m *Manager) checkpoints(state string) []CheckpointInfo {
	root := filepath.Join(state, checkpointDirName)
	ents, _ := os.ReadDir(root)
	var out []CheckpointInfo
	for _, e := range ents {
		if !e.IsDir() || ValidateID(e.Name()) != nil {
			continue
		}
		dir := filepath.Join(root, e.Name())
		c := CheckpointInfo{Name: e.Name(), Bytes: treeSize(dir)}
		if fi, err := os.Stat(filepath.Join(dir, filesDirName)); err == nil {
			c.Created = fi.ModTime()
		}
		for _, lang := range m.langs.offered() {
			if readNote(dir, lang).hasImage() {
				c.Languages = append(c.Languages, lang)
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b CheckpointInfo) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
