package workspace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowImage writes a fakeImage in small pieces, so that a kill lands in the
// middle of a write.
type slowImage struct{ *fakeImage }

func (s slowImage) WriteTo(w io.Writer) (int64, error) {
	var buf bytes.Buffer
	s.fakeImage.WriteTo(&buf)
	var n int64
	for b := buf.Bytes(); len(b) > 0; {
		k := min(len(b), 4096)
		m, err := w.Write(b[:k])
		n += int64(m)
		if err != nil {
			return n, err
		}
		b = b[k:]
		time.Sleep(50 * time.Microsecond)
	}
	return n, nil
}

// TestMain runs, in the process TestImageWriteSurvivesSIGKILL starts and
// kills, imageWriterChild instead of the tests.
func TestMain(m *testing.M) {
	if dir := os.Getenv("EXECD_IMAGE_CHILD"); dir != "" {
		imageWriterChild(dir)
	}
	os.Exit(m.Run())
}

// imageWriterChild rewrites one image over and over, generation after
// generation, until it is killed.
func imageWriterChild(dir string) {
	big := strings.Repeat("v", 256<<10)
	for gen := 1; ; gen++ {
		img := slowImage{&fakeImage{Build: "1", Lang: "javascript", Vars: map[string]string{"gen": strconv.Itoa(gen), "big": big}}}
		if _, err := writeImage(dir, binding{key{"p", "w"}, "javascript"}, img, time.Time{}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("wrote", gen)
	}
}

func TestImageWriteSurvivesSIGKILL(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "p", stateDirName, "w")
	os.MkdirAll(dir, 0o700)
	f := newFakeFactory()
	for round := range 8 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "EXECD_IMAGE_CHILD="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		last := 0
		for target := 2 + round; last < target && lines.Scan(); {
			if n, ok := strings.CutPrefix(lines.Text(), "wrote "); ok {
				last, _ = strconv.Atoi(n)
			}
		}
		// Kill at a different point of the next write each round.
		time.Sleep(time.Duration(round) * 700 * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if last == 0 {
			t.Fatalf("round %d: the child wrote nothing", round)
		}
		img, err := readImage(f, dir, binding{key{"p", "w"}, "javascript"})
		if err != nil {
			t.Fatalf("round %d: after SIGKILL the image is broken: %v", round, err)
		}
		gen, _ := strconv.Atoi(img.(*fakeImage).Vars["gen"])
		if gen != last && gen != last+1 {
			t.Errorf("round %d: image of generation %d, last written %d", round, gen, last)
		}
		if st, err := os.Stat(imagePath(dir, "javascript")); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("image mode: %v %v", st.Mode(), err)
		}
	}
	// What the kills left behind is swept, and only that.
	os.WriteFile(filepath.Join(dir, "javascript.note"), []byte("saved\n"), 0o600)
	sweepTemps(data, time.Now().Add(time.Second))
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "javascript.img,javascript.note" {
		t.Errorf("after the sweep: %v", names)
	}
}

func TestSweepTempsLayout(t *testing.T) {
	data := t.TempDir()
	old := []string{
		"p/~tmp1", "p/~state/w/~tmp2", "p/~state/w/checkpoints/~tmp3/files/x",
	}
	keep := []string{"p/w/~tmpuser", "p/w/f", "p/~state/w/javascript.img", "p/~state/w/checkpoints/c/files/~tmp4"}
	for _, p := range append(old, keep...) {
		os.MkdirAll(filepath.Dir(filepath.Join(data, p)), 0o700)
		os.WriteFile(filepath.Join(data, p), nil, 0o600)
	}
	if n := sweepTemps(data, time.Now().Add(time.Second)); n != 3 {
		t.Errorf("removed %d, want 3", n)
	}
	for _, p := range []string{"p/~tmp1", "p/~state/w/~tmp2", "p/~state/w/checkpoints/~tmp3"} {
		if _, err := os.Stat(filepath.Join(data, p)); !os.IsNotExist(err) {
			t.Errorf("%s survived", p)
		}
	}
	for _, p := range keep { // the user's files and finished checkpoints are never touched
		if _, err := os.Stat(filepath.Join(data, p)); err != nil {
			t.Errorf("%s removed", p)
		}
	}
	// Fresh entries (another Manager at work) are kept.
	os.WriteFile(filepath.Join(data, "p", "~tmpnew"), nil, 0o600)
	if n := sweepTemps(data, time.Now().Add(-time.Minute)); n != 0 {
		t.Errorf("removed %d fresh entries", n)
	}
}

// A language's first note is created in place, later ones replace it by
// rename; a note file interrupted between its creation and its write is
// empty, and reads as live, so that its state is said to be lost.
func TestNotes(t *testing.T) {
	dir := t.TempDir()
	if n := readNote(dir, "js"); n != noteNone {
		t.Fatalf("missing note reads %q; want none", n)
	}
	for _, n := range []note{noteLive, noteSaved, noteLive, note(ReasonRestarted)} {
		if err := writeNote(dir, "js", n); err != nil {
			t.Fatalf("writeNote(%q): %v", n, err)
		}
		if got := readNote(dir, "js"); got != n {
			t.Errorf("after writeNote(%q) the note reads %q", n, got)
		}
		st, err := os.Stat(notePath(dir, "js"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("note file: %v, mode %v; want 0600", err, st.Mode().Perm())
		}
	}
	if err := writeNote(dir, "js", noteNone); err != nil || readNote(dir, "js") != noteNone {
		t.Errorf("writeNote(none): %v, then %q; want the note gone", err, readNote(dir, "js"))
	}
	if err := os.WriteFile(notePath(dir, "py"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := readNote(dir, "py"); n != noteLive {
		t.Errorf("an empty note reads %q; want live", n)
	}
	if err := os.WriteFile(notePath(dir, "py"), []byte("li"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := readNote(dir, "py"); n != note(ReasonImageCorrupt) {
		t.Errorf("a damaged note reads %q; want %q", n, ReasonImageCorrupt)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, tmpPrefix+"*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// A workspace's directories are checked, never made, when a turn takes
// it: its files directory is made by the first change (makeFilesDir), with
// the principal's state root before it; its state directory only when
// something is saved in it. A path in their place that is not a directory
// is an error, not a workspace without state.
func TestCheckDirs(t *testing.T) {
	root := t.TempDir()
	dir, state := filepath.Join(root, "p", "w"), filepath.Join(root, "p", stateDirName, "w")
	if err := checkDirs(dir, state, []string{"js"}); err != nil {
		t.Fatalf("a principal's first workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "p")); !os.IsNotExist(err) {
		t.Fatalf("a new workspace made its principal's directory: %v", err)
	}
	if err := makeFilesDir(&spareDirs{}, dir, state, []string{"js"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(state)} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Fatalf("%s: %v; want a directory", d, err)
		}
	}
	if err := makeFilesDir(&spareDirs{}, dir, state, []string{"js"}); err != nil {
		t.Fatalf("making a files directory that exists: %v", err)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("a new workspace's state directory: %v; want none yet", err)
	}
	if err := checkDirs(dir, state, []string{"js"}); err != nil || readNote(state, "js") != noteNone {
		t.Errorf("files without state, beside the state root: %v, note %q; want none", err, readNote(state, "js"))
	}
	if err := writeNote(state, "js", noteSaved); err != nil || readNote(state, "js") != noteSaved {
		t.Errorf("the first note: %v, %q; want it written, its directory made", err, readNote(state, "js"))
	}
	// A principal directory without a state root is of an execd that kept
	// no images: every workspace in it lost its state, whichever workspace
	// of the principal is used first, an old one or a new one.
	os.RemoveAll(filepath.Dir(state))
	other := filepath.Join(root, "p", "other")
	os.Mkdir(other, 0o700)
	fresh, freshState := filepath.Join(root, "p", "fresh"), filepath.Join(root, "p", stateDirName, "fresh")
	if err := checkDirs(fresh, freshState, []string{"js"}); err != nil || readNote(freshState, "js") != noteNone {
		t.Errorf("a new workspace beside an older execd's: %v, note %q; want none", err, readNote(freshState, "js"))
	}
	for _, w := range []string{"w", "other"} {
		if n := readNote(filepath.Join(root, "p", stateDirName, w), "js"); n != note(ReasonRestarted) {
			t.Errorf("workspace %s of the older execd: note %q; want restarted", w, n)
		}
	}
	if st, err := os.Stat(filepath.Join(root, "p", stateDirName)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the state root after the pass: %v, %v; want a 0700 directory", st, err)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "p", tmpPrefix+"*")); len(left) > 0 {
		t.Errorf("the pass left %v", left)
	}
	// A principal directory with no workspace in it (only the tasks') and
	// no state root: a new workspace's files directory is no older
	// execd's.
	tasksOnly := filepath.Join(root, "t")
	os.MkdirAll(filepath.Join(tasksOnly, "~tasks"), 0o700)
	if err := makeFilesDir(&spareDirs{}, filepath.Join(tasksOnly, "w"), filepath.Join(tasksOnly, stateDirName, "w"), []string{"js"}); err != nil {
		t.Fatal(err)
	}
	if err := checkDirs(filepath.Join(tasksOnly, "v"), filepath.Join(tasksOnly, stateDirName, "v"), []string{"js"}); err != nil {
		t.Fatal(err)
	}
	if n := readNote(filepath.Join(tasksOnly, stateDirName, "w"), "js"); n != noteNone {
		t.Errorf("a new workspace beside the tasks: note %q; want none", n)
	}
	dir2, state2 := filepath.Join(root, "p", "w2"), filepath.Join(root, "p", stateDirName, "w2")
	if err := os.WriteFile(state2, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkDirs(dir2, state2, []string{"js"}); err == nil {
		t.Error("a state path that is a file was accepted")
	}
	dir3 := filepath.Join(root, "p", "w3")
	if err := os.WriteFile(dir3, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkDirs(dir3, filepath.Join(root, "p", stateDirName, "w3"), []string{"js"}); err == nil {
		t.Error("a files path that is a file was accepted")
	}
	if err := makeFilesDir(&spareDirs{}, dir3, filepath.Join(root, "p", stateDirName, "w3"), []string{"js"}); err == nil {
		t.Error("a files directory made over a file")
	}
}
