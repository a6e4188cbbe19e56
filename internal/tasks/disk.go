package tasks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// On disk, under Config.Dir:
//
//	<principal dir>/~tasks/<id>.json     one record, as JSON
//
// A record is written to a temporary file beside it (named ~tmp…) and
// renamed into place, so that a reader, or a start after a SIGKILL, finds
// the old record or the new one, never a part. Files are not synced: a
// record outlives the process, not a crash of the machine.
const (
	tasksDirName = "~tasks"
	tmpPrefix    = "~tmp"
)

// principalDir is the default Config.PrincipalDir: a plain visible name
// (1-64 characters of A-Z a-z 0-9 . _ -, not starting with '.') as is,
// anything else "~" and hex, so that no principal climbs out of Dir or
// hides its directory.
func principalDir(principal string) string {
	plain := principal != "" && len(principal) <= 64 && principal[0] != '.'
	for i := 0; plain && i < len(principal); i++ {
		c := principal[i]
		plain = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if plain {
		return principal
	}
	if len(principal) > 32 {
		sum := sha256.Sum256([]byte(principal))
		return "~" + hex.EncodeToString(sum[:])
	}
	return "~" + hex.EncodeToString([]byte(principal))
}

func (s *Store) dirOf(principal string) string {
	return filepath.Join(s.cfg.Dir, s.cfg.PrincipalDir(principal), tasksDirName)
}

// write saves rec (nothing without a Dir).
func (s *Store) write(rec Record) error {
	if s.cfg.Dir == "" {
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	dir := s.dirOf(rec.Principal)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), filepath.Join(dir, rec.ID+".json"))
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// remove deletes rec's file (nothing without a Dir).
func (s *Store) remove(rec Record) {
	if s.cfg.Dir == "" {
		return
	}
	if err := os.Remove(filepath.Join(s.dirOf(rec.Principal), rec.ID+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("task record not removed", zap.String("task", rec.ID), zap.Error(err))
	}
}

// load reads every record under Dir: an expired one is removed, one still
// running is marked Failed and Stopped and saved so, one that cannot be
// read is logged and left alone; temporary files are removed.
func (s *Store) load(now time.Time) error {
	principals, err := os.ReadDir(s.cfg.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, p := range principals {
		if !p.IsDir() {
			continue
		}
		dir := filepath.Join(s.cfg.Dir, p.Name(), tasksDirName)
		files, _ := os.ReadDir(dir)
		for _, f := range files {
			name := f.Name()
			path := filepath.Join(dir, name)
			if strings.HasPrefix(name, tmpPrefix) {
				os.Remove(path)
				continue
			}
			if !strings.HasSuffix(name, ".json") {
				continue
			}
			rec, err := readRecord(path)
			if err != nil || rec.ID+".json" != name || s.cfg.PrincipalDir(rec.Principal) != p.Name() {
				s.log.Warn("task record unreadable; left alone", zap.String("file", path), zap.Error(err))
				continue
			}
			s.adopt(rec, now)
		}
	}
	return nil
}

// adopt takes a record read from disk.
func (s *Store) adopt(rec Record, now time.Time) {
	if exp := rec.Expires(); !exp.IsZero() && now.After(exp) {
		s.remove(rec)
		return
	}
	e := &entry{rec: rec, done: make(chan struct{})}
	if !rec.Status.Terminal() {
		e.rec.Status, e.rec.Stopped, e.rec.Inputs, e.rec.Updated = Failed, true, nil, now
		if err := s.write(e.rec); err != nil {
			s.log.Warn("task record not saved", zap.String("task", rec.ID), zap.Error(err))
		}
	}
	close(e.done)
	s.byKey[key{rec.Principal, rec.ID}] = e
	s.count[rec.Principal]++
}

// readRecord decodes one record file.
func readRecord(path string) (Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Record{}, err
	}
	return decodeRecord(b)
}

// decodeRecord decodes a record, which must name its id, principal and a
// known status.
func decodeRecord(b []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, err
	}
	known := false
	for _, st := range Statuses {
		known = known || rec.Status == st
	}
	if !validID(rec.ID) || rec.Principal == "" || !known || rec.Created.IsZero() {
		return Record{}, errors.New("not a task record")
	}
	return rec, nil
}
