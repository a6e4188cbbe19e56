package egress

import (
	"math"
	"sync"
	"time"
)

// budget is a principal's bytes per minute (network.bytes_per_minute): a
// bucket of that many bytes, refilled continuously at that rate. Request
// bytes are taken before a request leaves, response bytes as they arrive;
// what the bucket cannot give ends the request.
type budget struct {
	mu     sync.Mutex
	perMin float64
	tokens float64
	last   time.Time
}

func newBudget(perMin int64, now time.Time) *budget {
	return &budget{perMin: float64(perMin), tokens: float64(perMin), last: now}
}

func (b *budget) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(b.perMin, b.tokens+d.Minutes()*b.perMin)
		b.last = now
	}
}

// take takes n bytes, or nothing if fewer are left, and then says how long
// until n would be.
func (b *budget) take(n int64, now time.Time) (bool, time.Duration) {
	if b == nil {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	if float64(n) <= b.tokens {
		b.tokens -= float64(n)
		return true, 0
	}
	if float64(n) > b.perMin {
		return false, time.Minute
	}
	wait := time.Duration((float64(n) - b.tokens) / b.perMin * float64(time.Minute))
	return false, wait
}

// budgets are the principals' buckets; a nil *budgets (no limit) gives
// nil buckets, which never refuse.
type budgets struct {
	perMin int64
	mu     sync.Mutex
	m      map[string]*budget
}

func (bs *budgets) of(principal string, now time.Time) *budget {
	if bs == nil || bs.perMin <= 0 {
		return nil
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.m[principal]
	if b == nil {
		b = newBudget(bs.perMin, now)
		bs.m[principal] = b
	}
	return b
}
