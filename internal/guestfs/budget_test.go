package guestfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// TestBudgetSharedByTrees: two trees in one Budget share its bytes. A
// guest's write that the Budget cannot hold is shortened, then refused,
// and counted as the Budget's; the host API says ENOSPC, not the quota's
// EDQUOT, so the caller can name the limit.
func TestBudgetSharedByTrees(t *testing.T) {
	b := NewBudget(4*entryCost+1000, 0)
	a, err := NewInBudget(t.TempDir(), 1<<20, b)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, err := NewInBudget(t.TempDir(), 1<<20, b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := a.WriteFile("x", make([]byte, 700)); err != nil {
		t.Fatal(err)
	}
	if got, want := b.Used(), int64(entryCost+700); got != want {
		t.Fatalf("Budget.Used = %d, want %d", got, want)
	}
	f := mustOpen(t, c, "y", rw)
	room := int(b.Limit() - b.Used())
	if n, errno := f.Write(make([]byte, 1000)); errno != 0 || n != room {
		t.Fatalf("Write in the other tree = %d, %v; want it shortened to what the Budget holds", n, errno)
	}
	if _, errno := f.Write([]byte("z")); errno != ErrnoQuota {
		t.Fatalf("Write past the Budget: %v, want %v", errno, ErrnoQuota)
	}
	if c.BudgetRefused() != 1 || c.Refused() != 1 {
		t.Errorf("BudgetRefused = %d, Refused = %d; want 1, 1", c.BudgetRefused(), c.Refused())
	}
	if c.Used() > 1<<20 || b.Used() != b.Limit() {
		t.Errorf("quota used %d, Budget used %d of %d", c.Used(), b.Used(), b.Limit())
	}
	if _, ok := c.BudgetFits("w", 1); ok {
		t.Error("BudgetFits says a new file fits a full Budget")
	}
	_, err = c.WriteFile("w", []byte("more"))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("host WriteFile past the Budget: %v, want ENOSPC", err)
	}
	// Removing a file gives its bytes back to the Budget.
	if errno := a.Unlink("x"); errno != 0 {
		t.Fatal(errno)
	}
	if _, err := c.WriteFile("w", []byte("more")); err != nil {
		t.Fatalf("after a removal in the other tree: %v", err)
	}
}

// TestBudgetChargesSharedDataOnce: a copy made of hard links (a checkpoint,
// a fork) costs its entries; the data is charged again only when a copy
// diverges (unshared before a change), and given back with its last name.
func TestBudgetChargesSharedDataOnce(t *testing.T) {
	root := t.TempDir()
	dir, cp := filepath.Join(root, "ws"), filepath.Join(root, "cp")
	os.Mkdir(dir, 0o700)
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 10000), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "other"), make([]byte, 5000), 0o600)
	before, err := OwnUsage(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := CopyTree(dir, cp); err != nil {
		t.Fatal(err)
	}
	shared := false
	if st, _ := os.Stat(filepath.Join(cp, "big")); st.Sys().(*syscall.Stat_t).Nlink > 1 {
		shared = true
	}
	if !shared {
		t.Skip("the file system copies instead of linking")
	}
	added, _ := OwnUsage(cp)
	if added != 2*entryCost {
		t.Fatalf("OwnUsage of a copy of hard links = %d, want its entries only (%d)", added, 2*entryCost)
	}
	after, _ := OwnUsage(root)
	if after != before+added+entryCost {
		t.Fatalf("OwnUsage of both = %d, want %d + %d and the copy's directory (data once)", after, before, added)
	}

	b := NewBudget(after+6000, after)
	q, err := NewInBudget(dir, 1<<20, b)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// Unsharing the 10,000 bytes of big would pass the Budget: refused,
	// and the checkpoint's copy is untouched.
	if _, errno := q.OpenFile("big", sys.O_WRONLY, 0); errno != ErrnoQuota {
		t.Fatalf("open for writing a shared file the Budget cannot copy: %v, want %v", errno, ErrnoQuota)
	}
	// Unsharing other (5,000) fits, and is charged.
	f, errno := q.OpenFile("other", sys.O_WRONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	f.Close()
	if got := b.Used(); got != after+5000 {
		t.Fatalf("Budget after unsharing 5000 bytes = %d, want %d", got, after+5000)
	}
	// Removing big's name in the workspace frees its entry only: the
	// checkpoint still holds the data.
	if errno := q.Unlink("big"); errno != 0 {
		t.Fatal(errno)
	}
	if got := b.Used(); got != after+5000-entryCost {
		t.Fatalf("Budget after removing a shared name = %d, want %d", got, after+5000-entryCost)
	}
	// The checkpoint's big is now its data's only name: removing the
	// checkpoint gives the data back.
	freed, _ := OwnUsage(cp)
	if want := int64(2*entryCost + 10000 + 5000); freed != want {
		t.Fatalf("OwnUsage of the checkpoint after the workspace let go = %d, want %d", freed, want)
	}
	// An O_TRUNC of a shared file copies nothing, and is not charged.
	os.Link(filepath.Join(cp, "other"), filepath.Join(dir, "again"))
	b.Add(entryCost)
	used := b.Used()
	g, errno := q.OpenFile("again", sys.O_WRONLY|sys.O_TRUNC, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	g.Close()
	if b.Used() != used {
		t.Errorf("truncating a shared file changed the Budget by %d", b.Used()-used)
	}
}
