// Command load drives concurrent MCP clients against a streamable-HTTP
// endpoint and prints throughput, latency percentiles and errors.
//
// It speaks both protocol eras: legacy (initialize once per client, then
// Mcp-Session-Id on every request) and modern (2026-07-28: the _meta
// envelope and the MCP-Protocol-Version, Mcp-Method, Mcp-Name and
// Mcp-Param-Workspace headers on every request). Answers may be JSON or
// server-sent events.
//
// Scenarios:
//
//	load    N clients call a tool in a loop (bounded by -requests and -duration)
//	cancel  one or more clients start a long run, cancel it (legacy: POST
//	        notifications/cancelled; modern: close the stream) and time from
//	        the cancel's send to a following call on the same workspace answering
//	idle    create workspaces one call each and report the server's RSS at steps
//
// -out appends one JSON line per run to a file; -report FILE prints the
// table of medians over rounds that bench/run.sh shows.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"execd/internal/procstat"
)

type options struct {
	url           string
	era           string
	scenario      string
	clients       int
	requests      int
	duration      time.Duration
	warmup        int
	pause         time.Duration
	tool          string
	code          string
	language      string
	wsMode        string
	wsPrefix      string
	progressToken bool
	timeout       time.Duration

	cancels     int
	cancelCode  string
	cancelAfter time.Duration
	background  int

	idleSteps string
	pid       int

	label  string
	server string
	round  int
	out    string
	report string
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "http://127.0.0.1:8765/mcp", "MCP endpoint")
	flag.StringVar(&o.era, "era", "legacy", "protocol era: legacy or modern")
	flag.StringVar(&o.scenario, "scenario", "load", "load, cancel or idle")
	flag.IntVar(&o.clients, "clients", 1, "concurrent clients")
	flag.IntVar(&o.requests, "requests", 0, "stop after this many measured calls in all (0 = only -duration bounds)")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "stop after this long (measured phase)")
	flag.IntVar(&o.warmup, "warmup", 1, "unmeasured calls per client before measuring (creates per-client workspaces)")
	flag.DurationVar(&o.pause, "pause", 0, "load scenario: each client waits this long after each call (unmeasured), as a user between calls")
	flag.StringVar(&o.tool, "tool", "execute_code", "tool to call: execute_code or echo")
	flag.StringVar(&o.code, "code", "1+1", "code argument")
	flag.StringVar(&o.language, "language", "javascript", "language argument")
	flag.StringVar(&o.wsMode, "workspace-mode", "per-client", "per-client, shared or none (no workspace argument)")
	flag.StringVar(&o.wsPrefix, "workspace-prefix", "", "prefix of workspace names (default: random per run)")
	flag.BoolVar(&o.progressToken, "progress-token", false, "send a progressToken with every call")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-call client timeout")
	flag.IntVar(&o.cancels, "cancels", 20, "cancel scenario: cancels per client")
	flag.StringVar(&o.cancelCode, "cancel-code", `progress(0,0,"spin"); while(true){}`, "cancel scenario: the long-running code (it should report progress once it spins)")
	flag.DurationVar(&o.cancelAfter, "cancel-after", 10*time.Millisecond, "cancel scenario: wait this long after the run reports it spins")
	flag.IntVar(&o.background, "background", 0, "cancel scenario: clients calling -code in a loop meanwhile (load)")
	flag.StringVar(&o.idleSteps, "idle-steps", "1,100,1000", "idle scenario: workspace counts at which RSS is read")
	flag.IntVar(&o.pid, "pid", 0, "server process id whose VmRSS is read (idle scenario; reported for the others too)")
	flag.StringVar(&o.label, "label", "", "row label for -out")
	flag.StringVar(&o.server, "server", "", "server name for -out (execd, peer)")
	flag.IntVar(&o.round, "round", 0, "round number for -out")
	flag.StringVar(&o.out, "out", "", "append the run's summary as one JSON line to this file")
	flag.StringVar(&o.report, "report", "", "print the table of medians over rounds from this -out file and exit")
	freePort := flag.Bool("free-port", false, "print a free TCP port on 127.0.0.1 and exit (for scripts)")
	flag.Parse()

	if *freePort {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err.Error())
		}
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
		_ = ln.Close()
		return
	}

	if o.report != "" {
		if err := printReport(os.Stdout, o.report); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
		return
	}
	if o.era != "legacy" && o.era != "modern" {
		fail("-era must be legacy or modern")
	}
	if o.clients < 1 {
		fail("-clients must be at least 1")
	}
	if o.wsPrefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.wsPrefix = "b" + hex.EncodeToString(b[:])
	}
	var (
		s   summary
		err error
	)
	switch o.scenario {
	case "load":
		s, err = runLoad(o)
	case "cancel":
		s, err = runCancel(o)
	case "idle":
		s, err = runIdle(o)
	default:
		fail("-scenario must be load, cancel or idle")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	if o.pid > 0 && s.RSSKiB == 0 {
		s.RSSKiB, _ = procstat.RSSKiB(o.pid)
	}
	s.print(os.Stdout)
	if o.out != "" {
		f, err := os.OpenFile(o.out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fail(err.Error())
		}
		b, _ := json.Marshal(s)
		_, _ = f.Write(append(b, '\n'))
		_ = f.Close()
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "load:", msg)
	os.Exit(2)
}

func newHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr}
}

func (o options) workspace(i int) string {
	switch o.wsMode {
	case "shared":
		return o.wsPrefix + "-shared"
	case "none":
		return ""
	}
	return o.wsPrefix + "-c" + strconv.Itoa(i)
}

func (o options) base() summary {
	return summary{Label: o.label, Server: o.server, Round: o.round, Scenario: o.scenario, Era: o.era,
		Clients: o.clients, Tool: o.tool, WorkspaceMode: o.wsMode}
}

// runLoad is the load scenario: every client calls the tool in a loop.
func runLoad(o options) (summary, error) {
	hc := newHTTPClient(o.clients)
	ctx := context.Background()
	clients := make([]*client, o.clients)
	for i := range clients {
		c := newClient(hc, o.url, o.era)
		if err := c.initialize(ctx); err != nil {
			return summary{}, err
		}
		clients[i] = c
	}
	// Warm-up: creates per-client workspaces and opens connections; not
	// measured.
	var wg sync.WaitGroup
	var warmErr atomic.Value
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range o.warmup {
				tc := toolCall{tool: o.tool, code: o.code, language: o.language, workspace: o.workspace(i), progressToken: o.progressToken}
				cctx, cancel := context.WithTimeout(ctx, o.timeout)
				r, err := c.call(cctx, tc, nil)
				cancel()
				if err == nil && r.failure() != "" {
					err = fmt.Errorf("warm-up: %s", r.failure())
				}
				if err != nil {
					warmErr.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e, ok := warmErr.Load().(error); ok {
		return summary{}, e
	}

	before := readCPU(o.pid)
	res := measure(ctx, o, clients, o.code, func(i int) string { return o.workspace(i) })
	after := readCPU(o.pid)
	s := o.base()
	s.fill(res)
	s.setCPU(before, after)
	return s, nil
}

// loadResult is what a measured loop produced.
type loadResult struct {
	lat     []time.Duration
	errs    map[string]int
	frames  int
	sse     int
	elapsed time.Duration
}

// measure runs every client's loop until -requests calls completed in all
// or -duration passed.
func measure(ctx context.Context, o options, clients []*client, code string, ws func(int) string) loadResult {
	dctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var (
		issued atomic.Int64
		mu     sync.Mutex
		wg     sync.WaitGroup
		out    = loadResult{errs: map[string]int{}}
	)
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1024)
			errs := map[string]int{}
			frames, sse := 0, 0
			for first := true; dctx.Err() == nil; first = false {
				if o.requests > 0 && issued.Add(1) > int64(o.requests) {
					break
				}
				if !first && o.pause > 0 {
					time.Sleep(o.pause)
				}
				tc := toolCall{tool: o.tool, code: code, language: o.language, workspace: ws(i), progressToken: o.progressToken}
				cctx, ccancel := context.WithTimeout(ctx, o.timeout)
				t0 := time.Now()
				r, err := c.call(cctx, tc, nil)
				d := time.Since(t0)
				ccancel()
				switch {
				case err != nil && ctx.Err() != nil:
					// The caller stopped the loop while this call was in flight.
				case err != nil:
					errs["transport: "+shortErr(err)]++
				case r.failure() != "":
					errs[r.failure()]++
				default:
					lat = append(lat, d)
				}
				frames += r.frames
				if r.sse {
					sse++
				}
			}
			mu.Lock()
			out.lat = append(out.lat, lat...)
			for k, v := range errs {
				out.errs[k] += v
			}
			out.frames += frames
			out.sse += sse
			mu.Unlock()
		}()
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	return out
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// runCancel is the cancellation scenario. Each canceller, on its own
// workspace: start the long run with a progress token; wait until the run
// reports that it spins (the guest's own progress() call) plus
// -cancel-after; cancel; immediately call -code on the same workspace; the
// latency is from just before the cancel is sent to that call's answer.
// -background clients keep calling -code on their own workspaces.
func runCancel(o options) (summary, error) {
	if o.tool != "execute_code" {
		return summary{}, fmt.Errorf("the cancel scenario needs -tool execute_code")
	}
	hc := newHTTPClient(o.clients + o.background + 4)
	ctx := context.Background()
	mk := func() (*client, error) {
		c := newClient(hc, o.url, o.era)
		return c, c.initialize(ctx)
	}

	// Baseline: one -code call on a warm workspace, for subtracting.
	var bg []*client
	for range o.background {
		c, err := mk()
		if err != nil {
			return summary{}, err
		}
		bg = append(bg, c)
	}
	bgCtx, bgStop := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	var bgRes loadResult
	if len(bg) > 0 {
		bo := o
		bo.duration = time.Hour
		bo.requests = 0
		bo.clients = len(bg)
		for i, c := range bg {
			if _, err := c.call(ctx, toolCall{tool: o.tool, code: o.code, language: o.language, workspace: o.wsPrefix + "-bg" + strconv.Itoa(i)}, nil); err != nil {
				bgStop()
				return summary{}, err
			}
		}
		bgWG.Add(1)
		go func() {
			defer bgWG.Done()
			bgRes = measure(bgCtx, bo, bg, o.code, func(i int) string { return o.wsPrefix + "-bg" + strconv.Itoa(i) })
		}()
	}

	var (
		mu     sync.Mutex
		lat    []time.Duration
		base   []time.Duration
		errs   = map[string]int{}
		resets int
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(o.duration)
	for i := range o.clients {
		c, err := mk()
		if err != nil {
			bgStop()
			return summary{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := o.wsPrefix + "-cancel" + strconv.Itoa(i)
			quick := toolCall{tool: o.tool, code: o.code, language: o.language, workspace: ws}
			if _, err := c.call(ctx, quick, nil); err != nil {
				mu.Lock()
				errs["warm-up: "+shortErr(err)]++
				mu.Unlock()
				return
			}
			for n := 0; n < o.cancels && time.Now().Before(deadline); n++ {
				t0 := time.Now()
				r, err := c.call(ctx, quick, nil)
				if err == nil && r.failure() == "" {
					mu.Lock()
					base = append(base, time.Since(t0))
					mu.Unlock()
				}
				d, reset, e := cancelOnce(ctx, o, c, ws)
				mu.Lock()
				if e != "" {
					errs[e]++
				} else {
					lat = append(lat, d)
				}
				if reset {
					resets++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	bgStop()
	bgWG.Wait()

	s := o.base()
	s.N = len(lat)
	s.Errors = errs
	s.ErrorCount = sum(errs)
	s.Resets = resets
	s.setLatency(lat)
	if len(base) > 0 {
		sort.Slice(base, func(i, j int) bool { return base[i] < base[j] })
		s.BaselineP50Ms = ms(pct(base, 50))
		s.BaselineP99Ms = ms(pct(base, 99))
	}
	s.Background = o.background
	if len(bg) > 0 && bgRes.elapsed > 0 {
		s.BackgroundRPS = float64(len(bgRes.lat)) / bgRes.elapsed.Seconds()
		s.BackgroundErrors = sum(bgRes.errs)
	}
	return s, nil
}

// cancelOnce starts the long run on ws, cancels it and times the following
// quick call. It returns the latency, whether the quick call's answer
// said the workspace was reset (the soft interrupt failed and the sandbox
// was killed), and a failure description.
func cancelOnce(ctx context.Context, o options, c *client, ws string) (time.Duration, bool, string) {
	long := toolCall{tool: o.tool, code: o.cancelCode, language: o.language, workspace: ws, progressToken: true}
	id, body, hdr := c.body(long)
	spinning := make(chan struct{})
	var once sync.Once
	callCtx, callCancel := context.WithCancel(ctx)
	defer callCancel()
	done := make(chan callResult, 1)
	go func() {
		r, _ := c.send(callCtx, id, body, hdr, func(msg map[string]any) {
			if p, ok := msg["params"].(map[string]any); ok {
				if m, _ := p["message"].(string); strings.Contains(m, "spin") {
					once.Do(func() { close(spinning) })
				}
			}
		})
		done <- r
	}()
	select {
	case <-spinning:
	case r := <-done:
		return 0, false, "long run ended early: " + r.failure()
	case <-time.After(5 * time.Second):
		return 0, false, "long run did not report that it spins"
	}
	time.Sleep(o.cancelAfter)

	t0 := time.Now()
	if o.era == "legacy" {
		st, err := c.cancel(ctx, id)
		if err != nil {
			return 0, false, "cancel: " + shortErr(err)
		}
		if st != http.StatusAccepted {
			return 0, false, fmt.Sprintf("cancel: http %d", st)
		}
	} else {
		callCancel() // closes the stream: the modern era's cancel
	}
	qctx, qcancel := context.WithTimeout(ctx, o.timeout)
	defer qcancel()
	r, err := c.call(qctx, toolCall{tool: o.tool, code: o.code, language: o.language, workspace: ws}, nil)
	d := time.Since(t0)
	if o.era == "legacy" {
		// The cancelled stream must end without an answer.
		select {
		case lr := <-done:
			if lr.response {
				return d, false, "the cancelled call was answered"
			}
		case <-time.After(5 * time.Second):
			return d, false, "the cancelled call's stream did not end"
		}
	}
	if err != nil {
		return 0, false, "after cancel: " + shortErr(err)
	}
	reset := false
	if r.result != nil {
		if b, ok := r.result["reset"].(bool); ok && b {
			reset = true
		}
		if s, _ := r.result["status"].(string); s == "reset" {
			reset = true
		}
	}
	if f := r.failure(); f != "" {
		return 0, reset, "after cancel: " + f
	}
	return d, reset, ""
}

// runIdle creates workspaces with one call each (-code, -clients at a time)
// and reads the server's VmRSS at every -idle-steps count.
func runIdle(o options) (summary, error) {
	if o.pid <= 0 {
		return summary{}, fmt.Errorf("the idle scenario needs -pid")
	}
	var steps []int
	for _, f := range strings.Split(o.idleSteps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return summary{}, fmt.Errorf("-idle-steps: bad count %q", f)
		}
		steps = append(steps, n)
	}
	sort.Ints(steps)
	hc := newHTTPClient(o.clients)
	ctx := context.Background()
	c := newClient(hc, o.url, o.era)
	if err := c.initialize(ctx); err != nil {
		return summary{}, err
	}
	s := o.base()
	s.RSSSteps = map[string]int64{}
	rss0, err := procstat.RSSKiB(o.pid)
	if err != nil {
		return summary{}, err
	}
	s.RSSSteps["0"] = rss0
	created := 0
	errs := map[string]int{}
	for _, n := range steps {
		var next atomic.Int64
		next.Store(int64(created))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range o.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > int64(n) {
						return
					}
					tc := toolCall{tool: o.tool, code: o.code, language: o.language, workspace: fmt.Sprintf("%s-idle%d", o.wsPrefix, i)}
					r, err := c.call(ctx, tc, nil)
					f := r.failure()
					if err != nil {
						f = "transport: " + shortErr(err)
					}
					if f != "" {
						mu.Lock()
						errs[f]++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		created = n
		time.Sleep(500 * time.Millisecond) // let the server settle
		rss, err := procstat.RSSKiB(o.pid)
		if err != nil {
			return summary{}, err
		}
		s.RSSSteps[strconv.Itoa(n)] = rss
	}
	s.N = created
	s.Errors = errs
	s.ErrorCount = sum(errs)
	s.RSSKiB = s.RSSSteps[strconv.Itoa(created)]
	// Per workspace: the growth over the last step (from 0 when there is
	// only one), so that the first workspace's one-off costs are left out
	// when there are more steps.
	all := append([]int{0}, steps...)
	a, b := all[len(all)-2], all[len(all)-1]
	s.RSSPerWorkspaceKiB = float64(s.RSSSteps[strconv.Itoa(b)]-s.RSSSteps[strconv.Itoa(a)]) / float64(b-a)
	return s, nil
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
