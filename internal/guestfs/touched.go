package guestfs

import "strings"

// MaxTouched is the most paths one Track records.
const MaxTouched = 256

// touchLog is the paths changed since Track, in the order first changed.
type touchLog struct {
	paths []string
	seen  map[string]bool
	more  bool // paths beyond MaxTouched were changed
}

// Track starts recording the paths that writes, truncations, creations,
// renames (the new name) and links (the new name) change, until Touched.
// The workspace registry tracks each run, so that its result can name the
// files the code changed.
func (q *FS) Track() {
	q.mu.Lock()
	q.log = &touchLog{seen: map[string]bool{}}
	q.mu.Unlock()
}

// Touched stops recording and returns the paths recorded since Track
// (relative to the root, cleaned, in the order first changed; at most
// MaxTouched) and whether more were changed. A path may name what no
// longer exists, or a directory.
func (q *FS) Touched() (paths []string, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.log
	q.log = nil
	if l == nil {
		return nil, false
	}
	return l.paths, l.more
}

// touch records p. Callers hold q.mu.
func (q *FS) touch(p string) {
	l := q.log
	if l == nil {
		return
	}
	p = strings.TrimSuffix(p, "/")
	if p == "." || l.seen[p] {
		return
	}
	if len(l.paths) >= MaxTouched {
		l.more = true
		return
	}
	l.seen[p] = true
	l.paths = append(l.paths, p)
}
