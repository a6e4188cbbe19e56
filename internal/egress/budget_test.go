package egress

import (
	"testing"
	"time"
)

func TestBudgetRefills(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBudget(6000, t0)
	if ok, _ := b.take(6000, t0); !ok {
		t.Fatal("a full bucket refused its size")
	}
	ok, wait := b.take(1000, t0)
	if ok || wait != 10*time.Second {
		t.Errorf("empty: %v, wait %s (want 10s: 1000 bytes at 100 a second)", ok, wait)
	}
	if ok, _ := b.take(1000, t0.Add(10*time.Second)); !ok {
		t.Error("not refilled after 10s")
	}
	if ok, _ := b.take(1, t0.Add(10*time.Second)); ok {
		t.Error("refilled beyond the time passed")
	}
	// Never above the minute's worth, however long it waits.
	if ok, _ := b.take(6001, t0.Add(time.Hour)); ok {
		t.Error("more than a minute's worth")
	}
	if ok, wait := b.take(7000, t0.Add(time.Hour)); ok || wait != time.Minute {
		t.Errorf("a request larger than the budget: %v %s", ok, wait)
	}
	var none *budget
	if ok, _ := none.take(1<<40, t0); !ok {
		t.Error("no budget refused")
	}
}
