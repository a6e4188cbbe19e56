package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// The live journal: the crash marker of interpreters that start with no
// note, one appended line each instead of a "live" note of their own
// (RATIONALE.md, "Why a journal of live interpreters?"). Each Manager
// writes ~live.<pid>.<unix ns> at the top of the data directory and holds
// an flock on it while it runs; lines are "+ <pdir> <id> <lang>" (went
// live with no note) and "- <pdir> <id>" (deleted). No principal directory
// is named ~live… (names.go: "~" is followed by hex digits only).
const journalPrefix = "~live."

type journal struct {
	f    *os.File // nil: no journal (the "live" note is written instead)
	once sync.Once
}

// openJournal compacts the journals of Managers that are gone, then opens
// this Manager's own. When its journal cannot be made, the journal it
// returns has no file and the Manager writes "live" notes instead.
func openJournal(dataDir string, log *zap.Logger) *journal {
	if n, err := compactJournals(dataDir); err != nil {
		log.Error("live journal: compaction", zap.Error(err))
	} else if n > 0 {
		log.Info("interpreters marked lost with an earlier execd", zap.Int("interpreters", n))
	}
	name := fmt.Sprintf("%s%d.%d", journalPrefix, os.Getpid(), time.Now().UnixNano())
	f, err := os.OpenFile(filepath.Join(dataDir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err == nil {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
	if err != nil {
		log.Warn("live journal: writing a note per workspace instead", zap.Error(err))
		return &journal{}
	}
	return &journal{f: f}
}

// live marks lang's interpreter of k live: one appended line. It fails
// only when the journal cannot be written; then the caller writes the note.
func (j *journal) live(k key, lang string) error {
	if j.f == nil {
		return errNoJournal
	}
	return j.append('+', k, lang)
}

// deleted records that k was deleted, so that a compaction does not take
// a workspace made again under the same id for one that was live.
func (j *journal) deleted(k key) error {
	if j.f == nil {
		return nil
	}
	return j.append('-', k, "")
}

var errNoJournal = errors.New("no live journal")

func (j *journal) append(op byte, k key, lang string) error {
	b := make([]byte, 0, 8+len(k.pdir)+len(k.id)+len(lang))
	b = append(b, op, ' ')
	b = append(b, k.pdir...)
	b = append(b, ' ')
	b = append(b, k.id...)
	if lang != "" {
		b = append(b, ' ')
		b = append(b, lang...)
	}
	b = append(b, '\n')
	// O_APPEND: one write is one whole line, whichever goroutine writes.
	_, err := j.f.Write(b)
	return err
}

// suffix is what names this Manager's files beside its journal
// ("<pid>.<ns>"); "" without a journal.
func (j *journal) suffix() string {
	if j.f == nil {
		return ""
	}
	return strings.TrimPrefix(filepath.Base(j.f.Name()), journalPrefix)
}

// close closes the journal, and removes it when nothing in it is still
// live (every interpreter it marked was saved or closed with a note). Only
// the first call acts.
func (j *journal) close(remove bool) {
	if j.f == nil {
		return
	}
	j.once.Do(func() {
		if remove {
			os.Remove(j.f.Name())
		}
		j.f.Close() // releases the flock
	})
}

// compactJournals compacts every journal in dataDir whose owner is gone
// and returns how many interpreters it marked lost.
func compactJournals(dataDir string) (int, error) {
	ents, err := os.ReadDir(dataDir)
	if err != nil {
		return 0, err
	}
	marked := 0
	var errs []error
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), journalPrefix) || !e.Type().IsRegular() {
			continue
		}
		n, err := compactJournal(dataDir, filepath.Join(dataDir, e.Name()))
		marked += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	removeSpares(dataDir, ents) // of the Managers whose journals are gone now
	return marked, errors.Join(errs...)
}

func compactJournal(dataDir, path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, ignoreMissing(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return 0, nil // its execd is running
		}
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	marked := 0
	for _, m := range liveInJournal(b.Bytes()) {
		// The mark stands even when the workspace has no directory: one that
		// never wrote a file or saved anything has none (RATIONALE.md, "Why
		// is a workspace's files directory made only when it is written?").
		state := filepath.Join(dataDir, m.k.pdir, stateDirName, m.k.id)
		if readNote(state, m.lang) != noteNone {
			continue // a later note is the truth (saved, reset, …)
		}
		if err := writeNote(state, m.lang, noteLive); err != nil {
			// Keep the journal: the next start tries again.
			return marked, fmt.Errorf("%s: %w", path, err)
		}
		marked++
	}
	return marked, os.Remove(path)
}

type liveMark struct {
	k    key
	lang string
}

// liveInJournal folds a journal's lines into the interpreters still marked
// live, in the order first marked. A last line without its newline was
// being written when its execd died, before the run it marks began: it is
// ignored, and so is any line that is not a record (a damaged journal
// loses markers, never state).
func liveInJournal(b []byte) []liveMark {
	var order []liveMark
	marked := map[liveMark]bool{}
	byKey := map[key][]int{} // indexes in order
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break // torn
		}
		f := strings.Fields(string(b[:i]))
		b = b[i+1:]
		switch {
		case len(f) == 4 && f[0] == "+" && validPdir(f[1]) && ValidateID(f[2]) == nil && safeLanguage(f[3]):
			m := liveMark{key{f[1], f[2]}, f[3]}
			if !marked[m] {
				marked[m] = true
				byKey[m.k] = append(byKey[m.k], len(order))
				order = append(order, m)
			}
		case len(f) == 3 && f[0] == "-" && validPdir(f[1]) && ValidateID(f[2]) == nil:
			k := key{f[1], f[2]}
			for _, i := range byKey[k] {
				delete(marked, order[i])
				order[i] = liveMark{}
			}
			delete(byKey, k)
		}
	}
	out := order[:0]
	for _, m := range order {
		if m.lang != "" {
			out = append(out, m)
		}
	}
	return out
}

// validPdir reports a name principalDir can make.
func validPdir(s string) bool {
	return (ValidateID(s) == nil && s[0] != '.') || isHexDir(s)
}
