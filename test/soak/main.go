// Command soak drives one execd over HTTP and a few execd -stdio processes
// with many concurrent clients of both protocol eras for a bounded time,
// with cancellations of every kind, and checks that nothing is lost or
// crossed:
//
//   - every request gets exactly one response, unless its client cancelled
//     it; a cancelled endless run gets none at all (a cancelled short run
//     may have answered before the cancel landed: counted as "raced");
//   - every response and progress frame arrives on the stream of its own
//     request (ids, progress tokens, and a nonce the code prints);
//   - the HTTP daemon's RSS stays bounded (the median of the last third of
//     the samples is at most 1.5x the first third's plus 50 MiB).
//
// test/soak/run.sh builds and starts execd and runs this; it ends with a
// line "N passed, N failed".
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"execd/internal/mcptest"
	"execd/internal/procstat"
)

const (
	// spinTimeoutMS bounds endless runs that a cancel should stop: if a
	// cancel is lost, the run ends in a timeout result, which then shows up
	// as a response after a cancel.
	spinTimeoutMS = 20000
	// requestTimeout bounds every client wait.
	requestTimeout = 60 * time.Second
)

type options struct {
	url           string
	pid           int
	bin           string
	duration      time.Duration
	clients       int
	stdioProcs    int
	stdioClients  int
	sharedClients int
	seed          uint64
}

// counts are the soak's tallies.
type counts struct {
	requests, responses, progress         atomic.Int64
	cancels, cancelLegacy, cancelModern   atomic.Int64
	cancelStdio, raced                    atomic.Int64
	lost, crossTalk, duplicates, late     atomic.Int64
	hung, unexpected, afterResponse, http atomic.Int64
}

var (
	c       counts
	ids     atomic.Int64
	logMu   sync.Mutex
	details []string
)

// problem records one failure's detail (the first 50 are printed).
func problem(format string, args ...any) {
	logMu.Lock()
	defer logMu.Unlock()
	if len(details) < 50 {
		details = append(details, fmt.Sprintf(format, args...))
	}
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "http://127.0.0.1:8765/mcp", "execd's MCP endpoint (127.0.0.1 only)")
	flag.IntVar(&o.pid, "pid", 0, "the HTTP daemon's process id, for its VmRSS")
	flag.StringVar(&o.bin, "bin", "bin/execd", "execd binary for the stdio processes")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "how long clients keep sending")
	flag.IntVar(&o.clients, "clients", 64, "concurrent clients in all")
	flag.IntVar(&o.stdioProcs, "stdio-procs", 4, "execd -stdio processes (half legacy, half modern)")
	flag.IntVar(&o.stdioClients, "stdio-clients", 4, "clients per stdio process")
	flag.IntVar(&o.sharedClients, "shared", 16, "HTTP clients that share a workspace in pairs (queueing across eras)")
	flag.Uint64Var(&o.seed, "seed", uint64(time.Now().UnixNano()), "random seed")
	flag.Parse()
	if !strings.HasPrefix(o.url, "http://127.0.0.1:") {
		fmt.Fprintln(os.Stderr, "soak: -url must be on 127.0.0.1")
		os.Exit(2)
	}
	os.Exit(run(o))
}

func run(o options) int {
	httpClients := o.clients - o.stdioProcs*o.stdioClients
	if httpClients < 2 {
		fmt.Fprintln(os.Stderr, "soak: too few clients for the stdio processes")
		return 2
	}
	fmt.Printf("soak: %s, %d clients: %d HTTP (half legacy, half modern), %d stdio in %d processes; seed %d\n",
		o.duration, o.clients, httpClients, o.stdioProcs*o.stdioClients, o.stdioProcs, o.seed)

	hc := &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2 * o.clients,
		DisableCompression:  true,
	}}
	stop := time.Now().Add(o.duration)
	samples := &rssSamples{}
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	defer stopSampling()
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() { defer sampler.Done(); samples.run(sampleCtx, o.pid) }()

	var wg sync.WaitGroup
	for i := 0; i < httpClients; i++ {
		modern := i%2 == 1
		ws := fmt.Sprintf("soak-h%d", i)
		if i < o.sharedClients {
			ws = fmt.Sprintf("soak-pair%d", i/2) // i and i^1: one legacy, one modern
		}
		cl := &httpClient{mc: &mcptest.Client{URL: o.url, HTTP: hc, Legacy: !modern}, modern: modern, name: fmt.Sprintf("h%d", i), ws: ws,
			rng: rand.New(rand.NewPCG(o.seed, uint64(i)))}
		wg.Add(1)
		go func() { defer wg.Done(); cl.loop(stop) }()
	}
	var procs []*stdioProc
	dir, err := os.MkdirTemp("", "execd-soak-stdio")
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	for p := 0; p < o.stdioProcs; p++ {
		sp, err := startStdio(o.bin, filepath.Join(dir, fmt.Sprintf("p%d", p)), p%2 == 1)
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak: stdio:", err)
			return 2
		}
		procs = append(procs, sp)
		for k := 0; k < o.stdioClients; k++ {
			cl := &stdioClient{p: sp, name: fmt.Sprintf("s%d.%d", p, k), ws: fmt.Sprintf("soak-s%d-%d", p, k),
				rng: rand.New(rand.NewPCG(o.seed, uint64(1000+p*100+k)))}
			wg.Add(1)
			go func() { defer wg.Done(); cl.loop(stop) }()
		}
	}
	wg.Wait()
	stopSampling()
	sampler.Wait()
	var stdioMaxRSS int64
	stdioExit := 0
	for _, sp := range procs {
		if m := sp.close(); m > stdioMaxRSS {
			stdioMaxRSS = m
		}
		if sp.exitErr != nil {
			stdioExit++
			problem("stdio process %s exited: %v\n%s", sp.dir, sp.exitErr, tail(sp.stderr.String(), 800))
		}
	}
	return report(samples, stdioMaxRSS, stdioExit)
}

func report(samples *rssSamples, stdioMaxRSS int64, stdioExit int) int {
	fmt.Printf("requests %d, responses %d, progress frames %d\n", c.requests.Load(), c.responses.Load(), c.progress.Load())
	fmt.Printf("cancels %d (legacy HTTP notifications/cancelled %d, modern HTTP stream close %d, stdio notifications/cancelled %d); answered before the cancel landed (raced, allowed) %d\n",
		c.cancels.Load(), c.cancelLegacy.Load(), c.cancelModern.Load(), c.cancelStdio.Load(), c.raced.Load())
	fmt.Printf("lost %d, cross-talk %d, duplicates %d, responses after a cancel %d, progress after the response %d, hung streams %d, unexpected answers %d, HTTP errors %d\n",
		c.lost.Load(), c.crossTalk.Load(), c.duplicates.Load(), c.late.Load(), c.afterResponse.Load(), c.hung.Load(), c.unexpected.Load(), c.http.Load())
	first, last, max, n := samples.summary()
	fmt.Printf("RSS of the HTTP daemon: %d samples, median of the first third %d MiB, of the last third %d MiB, max %d MiB; stdio processes max %d MiB\n",
		n, first>>10, last>>10, max>>10, stdioMaxRSS>>10)

	passed, failed := 0, 0
	check := func(name string, ok bool) {
		if ok {
			passed++
			fmt.Println("--- PASS", name)
		} else {
			failed++
			fmt.Println("--- FAIL", name)
		}
	}
	check("requests were sent", c.requests.Load() > 0)
	check("cancellations of every kind were sent", c.cancelLegacy.Load() > 0 && c.cancelModern.Load() > 0 && c.cancelStdio.Load() > 0)
	check("zero lost", c.lost.Load() == 0)
	check("every request answered or cancelled (requests = responses + cancels)", c.requests.Load() == c.responses.Load()+c.cancels.Load())
	check("zero cross-talk", c.crossTalk.Load() == 0)
	check("zero duplicate responses", c.duplicates.Load() == 0)
	check("zero responses after a cancel of an endless run", c.late.Load() == 0)
	check("zero progress after a response", c.afterResponse.Load() == 0)
	check("zero hung streams", c.hung.Load() == 0)
	check("zero unexpected answers", c.unexpected.Load() == 0 && c.http.Load() == 0)
	check("bounded memory", n < 6 || last <= first*3/2+50<<10)
	check("stdio processes exited 0", stdioExit == 0)
	if len(details) > 0 {
		fmt.Println("details:")
		for _, d := range details {
			fmt.Println("  " + d)
		}
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// op is one thing a client does.
type op int

const (
	opEcho       op = iota // a short run that prints a nonce
	opSpinCancel           // an endless run, cancelled once it spins
	opRaceCancel           // a short run, cancelled at a random moment
	opList                 // a request that runs no code
)

func pick(rng *rand.Rand) op {
	switch r := rng.IntN(100); {
	case r < 60:
		return opEcho
	case r < 78:
		return opSpinCancel
	case r < 90:
		return opRaceCancel
	}
	return opList
}

// echoCode prints and returns nonce and reports it as progress; a busy
// loop of a random length varies how long runs take.
func echoCode(nonce string, loops int) string {
	return fmt.Sprintf(`progress(0, 0, "nonce=%s"); for (let i = 0; i < %d; i++) {} console.log("%s"); "%s"`, nonce, loops, nonce, nonce)
}

func spinCode(nonce string) string {
	return fmt.Sprintf(`progress(0, 0, "nonce=%s spin"); while (true) {}`, nonce)
}

func raceCode(nonce string, ms int) string {
	return fmt.Sprintf(`progress(0, 0, "nonce=%s"); const t0 = Date.now(); while (Date.now() - t0 < %d) {} "%s"`, nonce, ms, nonce)
}

// checkEcho checks an execute_code result for nonce.
func checkEcho(who string, res map[string]any, nonce, ws string, printed bool) {
	sc, isErr, err := mcptest.Structured(res)
	if err != nil {
		c.unexpected.Add(1)
		problem("%s: %v", who, err)
		return
	}
	wantResult := strconv.Quote(nonce)
	if isErr || sc["status"] != "ok" || sc["result"] != wantResult || sc["workspace"] != ws ||
		(printed && sc["stdout"] != nonce+"\n") {
		// Output of another request's code is cross-talk; anything
		// else wrong is unexpected.
		out, _ := sc["stdout"].(string)
		r, _ := sc["result"].(string)
		if (r != "" && r != wantResult && strings.Contains(r, "n-")) || (out != "" && !strings.Contains(out, nonce)) {
			c.crossTalk.Add(1)
		} else {
			c.unexpected.Add(1)
		}
		problem("%s: nonce %s in %s: %.300v", who, nonce, ws, sc)
	}
}

// checkFrame checks a progress frame against the request's token and nonce.
func checkFrame(who string, m map[string]any, token, nonce string) {
	if m["method"] != "notifications/progress" {
		return
	}
	c.progress.Add(1)
	p, _ := m["params"].(map[string]any)
	msg, _ := p["message"].(string)
	if p["progressToken"] != token || (strings.Contains(msg, "nonce=") && !strings.Contains(msg, "nonce="+nonce)) {
		c.crossTalk.Add(1)
		problem("%s: frame for token %v/%q on the stream of %s/%s", who, p["progressToken"], msg, token, nonce)
	}
}

// ---- HTTP clients ----

type httpClient struct {
	mc     *mcptest.Client // without T: its methods that report errors
	modern bool
	name   string
	ws     string
	rng    *rand.Rand
	seq    int
}

func (h *httpClient) loop(stop time.Time) {
	if !h.modern {
		if err := h.mc.Handshake(context.Background(), `{}`); err != nil {
			c.http.Add(1)
			problem("%s: initialize: %v", h.name, err)
			return
		}
	}
	for time.Now().Before(stop) {
		h.seq++
		nonce := fmt.Sprintf("n-%s-%d", h.name, h.seq)
		switch pick(h.rng) {
		case opEcho:
			h.echo(nonce)
		case opSpinCancel:
			h.cancelRun(nonce, spinCode(nonce), spinTimeoutMS, true, 0)
		case opRaceCancel:
			h.cancelRun(nonce, raceCode(nonce, h.rng.IntN(30)), 5000, false, time.Duration(h.rng.IntN(30))*time.Millisecond)
		case opList:
			h.list()
		}
	}
}

// request encodes a request for the client's era with the given id and,
// if token is not empty, a progress token.
func (h *httpClient) request(id int64, method string, params map[string]any, token string) ([]byte, map[string]string) {
	if token != "" {
		params["_meta"] = map[string]any{"progressToken": token}
	}
	return h.mc.Request(id, method, params)
}

func execParams(ws, code string, timeoutMS int) map[string]any {
	args := map[string]any{"code": code, "language": "javascript", "workspace": ws}
	if timeoutMS > 0 {
		args["timeout_ms"] = timeoutMS
	}
	return map[string]any{"name": "execute_code", "arguments": args}
}

// streamResult is what one HTTP request's answer held.
type streamResult struct {
	responses []map[string]any // messages with our id
	err       error            // transport error or timeout
}

// exchange sends a request and reads its whole answer (JSON, or SSE to the
// end of the stream). onFrame sees each notification; when it returns a
// non-nil action, that runs once (a cancel) and reading goes on, or, if it
// returns errClose, the stream is closed at once.
func (h *httpClient) exchange(id int64, body []byte, hdr map[string]string, token, nonce string, onFrame func(map[string]any) error) streamResult {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	c.requests.Add(1)
	resp, err := h.mc.Send(ctx, body, hdr)
	if err != nil {
		return streamResult{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		c.http.Add(1)
		problem("%s: HTTP %d for id %d", h.name, resp.StatusCode, id)
	}
	var r streamResult
	r.err = mcptest.Read(resp, func(m map[string]any) bool {
		if _, isNote := m["method"]; isNote {
			if len(r.responses) > 0 {
				c.afterResponse.Add(1)
				problem("%s: a frame after the response of id %d", h.name, id)
			}
			if token != "" {
				checkFrame(h.name, m, token, nonce)
			}
			return onFrame == nil || !errors.Is(onFrame(m), errClose)
		}
		if n, ok := m["id"].(float64); !ok || int64(n) != id {
			c.crossTalk.Add(1)
			problem("%s: a response for id %v on the stream of id %d", h.name, m["id"], id)
			return true
		}
		if len(r.responses) > 0 {
			c.duplicates.Add(1)
			problem("%s: id %d answered twice", h.name, id)
		}
		r.responses = append(r.responses, m)
		return true
	})
	if errors.Is(r.err, mcptest.ErrBadAnswer) {
		c.unexpected.Add(1)
		problem("%s: %v", h.name, r.err)
	}
	return r
}

var errClose = errors.New("close the stream")

func (h *httpClient) echo(nonce string) {
	id := ids.Add(1)
	token := "p-" + nonce
	body, hdr := h.request(id, "tools/call", execParams(h.ws, echoCode(nonce, h.rng.IntN(20000)), 0), token)
	r := h.exchange(id, body, hdr, token, nonce, nil)
	h.settle(r, id, nonce, true)
}

// settle counts an uncancelled request's outcome.
func (h *httpClient) settle(r streamResult, id int64, nonce string, exec bool) {
	switch {
	case len(r.responses) == 0:
		c.lost.Add(1)
		problem("%s: id %d (%s) lost: %v", h.name, id, nonce, r.err)
	default:
		c.responses.Add(1)
		if exec {
			checkEcho(h.name, r.responses[0], nonce, h.ws, true)
		} else if _, ok := r.responses[0]["result"].(map[string]any); !ok {
			c.unexpected.Add(1)
			problem("%s: not a result: %.300v", h.name, r.responses[0])
		}
	}
}

// cancelRun starts a run and cancels it: legacy with notifications/cancelled
// (then the stream is read to its end: it must end with no response for an
// endless run), modern by closing the stream. spin: the run never ends by
// itself. The workspace's next call must then be answered, which it cannot
// be if the cancel did not stop the run (modern runs have no timeout).
func (h *httpClient) cancelRun(nonce, code string, timeoutMS int, spin bool, delay time.Duration) {
	id := ids.Add(1)
	token := "p-" + nonce
	if h.modern && spin {
		timeoutMS = 0
	}
	body, hdr := h.request(id, "tools/call", execParams(h.ws, code, timeoutMS), token)
	cancelled := false
	onFrame := func(m map[string]any) error {
		if cancelled {
			return nil
		}
		p, _ := m["params"].(map[string]any)
		msg, _ := p["message"].(string)
		if spin && !strings.HasSuffix(msg, " spin") {
			return nil // wait until the code spins
		}
		time.Sleep(delay)
		cancelled = true
		c.cancels.Add(1)
		if h.modern {
			c.cancelModern.Add(1)
			return errClose
		}
		c.cancelLegacy.Add(1)
		b := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"soak"}}`, id)
		resp, err := h.mc.Send(context.Background(), []byte(b), nil)
		if err != nil {
			c.http.Add(1)
			problem("%s: cancel: %v", h.name, err)
			return nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			c.http.Add(1)
			problem("%s: cancel: HTTP %d", h.name, resp.StatusCode)
		}
		return nil
	}
	r := h.exchange(id, body, hdr, token, nonce, onFrame)
	switch {
	case !cancelled:
		// Finished before any cancel was sent (a short run).
		h.settle(r, id, nonce, false)
		if len(r.responses) > 0 && !spin {
			if sc, isErr, err := mcptest.Structured(r.responses[0]); err != nil || isErr || sc["result"] != strconv.Quote(nonce) {
				c.unexpected.Add(1)
				problem("%s: %s: %.300v", h.name, nonce, sc)
			}
		}
	case len(r.responses) > 0 && spin:
		c.late.Add(1)
		problem("%s: the cancelled endless run %d answered: %.300v", h.name, id, r.responses[0])
	case len(r.responses) > 0:
		c.raced.Add(1)
	case r.err != nil && !h.modern:
		if errors.Is(r.err, context.DeadlineExceeded) {
			c.hung.Add(1)
		} else {
			c.http.Add(1)
		}
		problem("%s: the stream of cancelled id %d: %v", h.name, id, r.err)
	}
	// The workspace answers again (and, for a modern spin, only because
	// the close stopped the run).
	h.seq++
	h.echo(fmt.Sprintf("n-%s-%d", h.name, h.seq))
}

func (h *httpClient) list() {
	id := ids.Add(1)
	var body []byte
	var hdr map[string]string
	switch h.rng.IntN(3) {
	case 0:
		body, hdr = h.request(id, "tools/list", map[string]any{}, "")
	case 1:
		body, hdr = h.request(id, "tools/call", map[string]any{"name": "list_workspaces", "arguments": map[string]any{}}, "")
	default:
		if h.modern {
			body, hdr = h.request(id, "server/discover", map[string]any{}, "")
		} else {
			body, hdr = h.request(id, "ping", map[string]any{}, "")
		}
	}
	r := h.exchange(id, body, hdr, "", "", nil)
	h.settle(r, id, "", false)
}

// ---- stdio ----

// stdioProc is one execd -stdio process shared by several clients. A reader
// routes each line to the request it names; lines that name no request of
// this process are cross-talk.
type stdioProc struct {
	dir    string
	cmd    *exec.Cmd
	in     io.WriteCloser
	wmu    sync.Mutex
	stderr *syncWriter
	modern bool

	mu      sync.Mutex
	pending map[int64]*stdioReq
	byToken map[string]*stdioReq
	done    chan struct{}
	exitErr error
	maxRSS  atomic.Int64
}

type stdioReq struct {
	id        int64
	token     string
	nonce     string
	spin      bool
	cancelled bool
	answered  bool
	resp      chan map[string]any
	spinning  chan struct{}
	spinOnce  sync.Once
}

func startStdio(bin, dir string, modern bool) (*stdioProc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "execd.toml")
	toml := fmt.Sprintf("[server]\nshutdown_grace = \"5s\"\n[protocol]\nprogress_heartbeat = \"1s\"\n[workspace]\ndata_dir = %q\n", filepath.Join(dir, "data"))
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-stdio", "-config", cfg)
	p := &stdioProc{dir: dir, cmd: cmd, stderr: &syncWriter{w: &bytes.Buffer{}}, modern: modern,
		pending: map[int64]*stdioReq{}, byToken: map[string]*stdioReq{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.in = in
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go p.read(out)
	go p.sampleRSS()
	if !modern {
		init := &stdioReq{id: ids.Add(1), resp: make(chan map[string]any, 2), spinning: make(chan struct{})}
		p.mu.Lock()
		p.pending[init.id] = init
		p.mu.Unlock()
		p.write(map[string]any{"id": init.id, "method": "initialize", "params": map[string]any{"protocolVersion": mcptest.LegacyVersion,
			"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "execd-soak", "version": "1"}}})
		select {
		case m := <-init.resp:
			if _, ok := m["result"]; !ok {
				return nil, fmt.Errorf("initialize: %v", m)
			}
		case <-time.After(30 * time.Second):
			return nil, errors.New("initialize: no answer")
		}
		p.write(map[string]any{"method": "notifications/initialized"})
	}
	return p, nil
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

func (p *stdioProc) sampleRSS() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			if n, err := procstat.RSSKiB(p.cmd.Process.Pid); err == nil && n > p.maxRSS.Load() {
				p.maxRSS.Store(n)
			}
		}
	}
}

func (p *stdioProc) write(msg map[string]any) {
	msg["jsonrpc"] = "2.0"
	b, _ := json.Marshal(msg)
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		c.http.Add(1)
		problem("stdio %s: write: %v", p.dir, err)
	}
}

func (p *stdioProc) read(out io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			c.unexpected.Add(1)
			problem("stdio %s: bad line %.200q", p.dir, sc.Text())
			continue
		}
		p.route(m)
	}
	p.exitErr = p.cmd.Wait()
}

func (p *stdioProc) route(m map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m["method"] == "notifications/progress" {
		params, _ := m["params"].(map[string]any)
		tok, _ := params["progressToken"].(string)
		r := p.byToken[tok]
		switch {
		case r == nil:
			c.crossTalk.Add(1)
			problem("stdio %s: a frame for an unknown token %q", p.dir, tok)
		case r.answered:
			c.afterResponse.Add(1)
			problem("stdio %s: a frame for %s after its response", p.dir, tok)
		default:
			checkFrame("stdio "+p.dir, m, r.token, r.nonce)
			msg, _ := params["message"].(string)
			if strings.HasSuffix(msg, " spin") {
				r.spinOnce.Do(func() { close(r.spinning) })
			}
		}
		return
	}
	if _, ok := m["method"]; ok {
		return // other notifications (log messages): not ours to judge
	}
	n, ok := m["id"].(float64)
	r := p.pending[int64(n)]
	switch {
	case !ok || r == nil:
		c.crossTalk.Add(1)
		problem("stdio %s: a response for an unknown id %v: %.200v", p.dir, m["id"], m)
	case r.answered:
		c.duplicates.Add(1)
		problem("stdio %s: id %d answered twice", p.dir, r.id)
	case r.cancelled && r.spin:
		r.answered = true
		c.late.Add(1)
		problem("stdio %s: the cancelled endless run %d answered: %.300v", p.dir, r.id, m)
	case r.cancelled:
		r.answered = true
		c.raced.Add(1)
	default:
		r.answered = true
		r.resp <- m
	}
}

// close ends stdin once every client is done, waits for the process to exit
// (the responses it still writes are routed and judged), and returns its
// max RSS.
func (p *stdioProc) close() int64 {
	p.in.Close()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		c.hung.Add(1)
		problem("stdio %s: no exit 60s after stdin closed", p.dir)
		p.cmd.Process.Kill()
		<-p.done
	}
	return p.maxRSS.Load()
}

type stdioClient struct {
	p    *stdioProc
	name string
	ws   string
	rng  *rand.Rand
	seq  int
}

func (s *stdioClient) loop(stop time.Time) {
	for time.Now().Before(stop) {
		s.seq++
		nonce := fmt.Sprintf("n-%s-%d", s.name, s.seq)
		switch pick(s.rng) {
		case opEcho, opList:
			s.echo(nonce)
		case opSpinCancel:
			s.cancelRun(nonce, spinCode(nonce), true, 0)
		case opRaceCancel:
			s.cancelRun(nonce, raceCode(nonce, s.rng.IntN(30)), false, time.Duration(s.rng.IntN(30))*time.Millisecond)
		}
	}
}

func (s *stdioClient) send(nonce, code string, timeoutMS int, spin bool) *stdioReq {
	r := &stdioReq{id: ids.Add(1), token: "p-" + nonce, nonce: nonce, spin: spin,
		resp: make(chan map[string]any, 1), spinning: make(chan struct{})}
	s.p.mu.Lock()
	s.p.pending[r.id] = r
	s.p.byToken[r.token] = r
	s.p.mu.Unlock()
	params := execParams(s.ws, code, timeoutMS)
	params["_meta"] = map[string]any{"progressToken": r.token}
	if s.p.modern {
		mcptest.Modern("tools/call", params) // the envelope; stdio has no headers
	}
	c.requests.Add(1)
	s.p.write(map[string]any{"id": r.id, "method": "tools/call", "params": params})
	return r
}

func (s *stdioClient) echo(nonce string) {
	r := s.send(nonce, echoCode(nonce, s.rng.IntN(20000)), 0, false)
	select {
	case m := <-r.resp:
		c.responses.Add(1)
		checkEcho(s.name, m, nonce, s.ws, true)
	case <-time.After(requestTimeout):
		c.lost.Add(1)
		problem("%s: id %d (%s) lost", s.name, r.id, nonce)
	}
}

func (s *stdioClient) cancelRun(nonce, code string, spin bool, delay time.Duration) {
	r := s.send(nonce, code, spinTimeoutMS, spin)
	if spin {
		select {
		case <-r.spinning:
		case m := <-r.resp:
			c.late.Add(1)
			problem("%s: the endless run %d answered before spinning: %.300v", s.name, r.id, m)
			return
		case <-time.After(requestTimeout):
			c.lost.Add(1)
			problem("%s: the endless run %d never spun", s.name, r.id)
			return
		}
	}
	time.Sleep(delay)
	s.p.mu.Lock()
	answered := r.answered
	if !answered {
		r.cancelled = true
	}
	s.p.mu.Unlock()
	if answered {
		// Finished before the cancel was sent.
		c.responses.Add(1)
		m := <-r.resp
		if sc, isErr, err := mcptest.Structured(m); err != nil || isErr || sc["result"] != strconv.Quote(nonce) {
			c.unexpected.Add(1)
			problem("%s: %s: %.300v", s.name, nonce, sc)
		}
	} else {
		c.cancels.Add(1)
		c.cancelStdio.Add(1)
		s.p.write(map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": r.id, "reason": "soak"}})
	}
	// The workspace answers again: the cancelled run stopped (an endless
	// run that went on would hold the workspace for spinTimeoutMS and then
	// answer, which route counts).
	s.seq++
	s.echo(fmt.Sprintf("n-%s-%d", s.name, s.seq))
}

// ---- memory ----

type rssSamples struct {
	mu sync.Mutex
	v  []int64
}

func (r *rssSamples) run(ctx context.Context, pid int) {
	if pid <= 0 {
		return
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := procstat.RSSKiB(pid); err == nil {
				r.mu.Lock()
				r.v = append(r.v, n)
				r.mu.Unlock()
			}
		}
	}
}

// summary returns the medians of the first and last thirds, the max and the
// number of samples (KiB).
func (r *rssSamples) summary() (first, last, max int64, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n = len(r.v)
	for _, x := range r.v {
		if x > max {
			max = x
		}
	}
	if n < 3 {
		return 0, 0, max, n
	}
	third := n / 3
	return median(r.v[:third]), median(r.v[n-third:]), max, n
}

func median(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
