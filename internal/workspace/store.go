package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"execd/internal/atomicfile"
)

// On disk, under the data directory (see names.go for why no id can collide
// with the names in ~):
//
//	<principal>/<id>/                          the files, mounted at /workspace
//	<principal>/~state/<id>/<lang>.img         a saved interpreter (imagefile.go)
//	<principal>/~state/<id>/<lang>.note        what became of that language's state
//	<principal>/~state/<id>/checkpoints/<name>/{<lang>.img, <lang>.note, files/}
//	~live.<pid>.<ns>                           the live journal of a running execd (journal.go)
//
// ~state/<id>/ is made when something is first written in it (checkDirs).
// The guest sees only <principal>/<id>/. Everything under ~state belongs to
// the Manager and is written only by the holder of the workspace's turn.
const (
	stateDirName      = "~state"
	checkpointDirName = "checkpoints"
	filesDirName      = "files"
	// tmpPrefix starts the name of everything being built (the prefix of
	// atomicfile's temporary files too): a SIGKILL may leave such entries
	// behind, and sweepTemps removes them at start.
	tmpPrefix = atomicfile.TempPrefix
)

// note is the content of a <lang>.note file: the truth about one
// language's interpreter state when no runner is live (see RATIONALE.md,
// "What is the state model?").
type note string

const (
	noteNone  note = ""      // no file: no state to lose
	noteLive  note = "live"  // state lives in a runner of a running execd
	noteSaved note = "saved" // <lang>.img is the state
	noteClone note = "clone" // <lang>.img is the state of another workspace: restore it with fresh random seeds
	// Any other content is a ResetReason: the state was lost for that
	// reason and no run has said so yet.
)

func (n note) hasImage() bool { return n == noteSaved || n == noteClone }

func imagePath(stateDir, lang string) string { return filepath.Join(stateDir, lang+".img") }
func notePath(stateDir, lang string) string  { return filepath.Join(stateDir, lang+".note") }

// readNote returns the note of lang in stateDir; a missing or unreadable
// file is noteNone, an empty one noteLive (see writeNote), a damaged one,
// or one that is not a regular file, the reason image_corrupt.
func readNote(stateDir, lang string) note {
	b, err := atomicfile.ReadFile(notePath(stateDir, lang))
	if errors.Is(err, atomicfile.ErrNotRegular) {
		return note(ReasonImageCorrupt)
	}
	if err != nil {
		return noteNone
	}
	if len(b) == 0 {
		return noteLive
	}
	n := note(strings.TrimSpace(string(b)))
	switch n {
	case noteLive, noteSaved, noteClone:
		return n
	}
	if ResetReason(n).known() {
		return n
	}
	return note(ReasonImageCorrupt)
}

// writeNote replaces lang's note (noteNone removes it). A note replaces
// another by rename, not synced: after a power cut a note may be older
// than the last change, never half written. A language's first note (a new
// workspace's "live") is created in place, which saves the rename on every
// new workspace: interrupted between its creation and its one write, it is
// an empty file, which readNote takes for "live" — the safe reading, since
// a lost state is then said to be lost.
func writeNote(stateDir, lang string, n note) error {
	p := notePath(stateDir, lang)
	if n == noteNone {
		return ignoreMissing(os.Remove(p))
	}
	b := []byte(string(n) + "\n")
	err := writeNoteFile(p, n, b)
	if errors.Is(err, fs.ErrNotExist) {
		// The workspace's first note: its state directory is made now
		// (checkDirs).
		if err = mkdirState(stateDir); err == nil {
			err = writeNoteFile(p, n, b)
		}
	}
	return err
}

func writeNoteFile(p string, n note, b []byte) error {
	if n == noteLive {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, err = f.Write(b)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(p)
			}
			return err
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return atomicfile.Write(p, 0o600, atomicfile.Atomic, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// treeSize is the apparent size of the regular files below dir.
func treeSize(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// sweepTemps removes what interrupted writes left under the data directory
// (entries named tmpPrefix… that are older than before): in principal
// directories (files being swapped in), in state directories (images and
// notes) and in checkpoint directories (checkpoints being built).
func sweepTemps(dataDir string, before time.Time) int {
	removed := 0
	sweep := func(dir string) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), tmpPrefix) {
				continue
			}
			if info, err := e.Info(); err != nil || !info.ModTime().Before(before) {
				continue
			}
			if os.RemoveAll(filepath.Join(dir, e.Name())) == nil {
				removed++
			}
		}
	}
	principals, _ := os.ReadDir(dataDir)
	for _, p := range principals {
		if !p.IsDir() {
			continue
		}
		pdir := filepath.Join(dataDir, p.Name())
		sweep(pdir)
		states, _ := os.ReadDir(filepath.Join(pdir, stateDirName))
		for _, s := range states {
			sdir := filepath.Join(pdir, stateDirName, s.Name())
			sweep(sdir)
			sweep(filepath.Join(sdir, checkpointDirName))
		}
	}
	return removed
}
