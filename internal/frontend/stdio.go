package frontend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

// stdio era pins (protocol.md §1.3).
const (
	pinNone int32 = iota
	pinLegacy
	pinModern
)

// stdioProc is one stdio connection: the process's stdin and stdout. The
// reader never blocks on a running call, so a cancel always gets through.
type stdioProc struct {
	s   *Server
	pin atomic.Int32
	// version negotiated by initialize (legacy pin).
	version string
	logMin  atomic.Int32

	wmu sync.Mutex
	w   *bufio.Writer
}

// write sends one message as one line. Writes are serialised.
func (p *stdioProc) write(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	if err := p.w.WriteByte('\n'); err != nil {
		return err
	}
	return p.w.Flush()
}

func (p *stdioProc) writeError(id jsonrpc.ID, e *jsonrpc.Error) {
	_ = p.write(jsonrpc.EncodeError(id, e))
}

// stdioOut is a call's outbound on stdio: the shared writer.
type stdioOut struct{ p *stdioProc }

func (o stdioOut) Notify(method string, params any) error {
	b, err := jsonrpc.EncodeNotification(method, params)
	if err != nil {
		return err
	}
	return o.p.write(b)
}

func (o stdioOut) Request(id jsonrpc.ID, method string, params any) error {
	b, err := jsonrpc.EncodeRequest(id, method, params)
	if err != nil {
		return err
	}
	return o.p.write(b)
}

// ServeStdio serves one MCP connection on r and w until r ends (EOF) or
// ctx is done. On EOF every running call is cancelled and nothing more is
// written for it.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	p := &stdioProc{s: s, w: bufio.NewWriter(w)}
	p.logMin.Store(int32(levelRank("info")))
	ctx, cancelAll := context.WithCancelCause(ctx)
	defer cancelAll(nil)
	var wg sync.WaitGroup
	defer wg.Wait()

	br := bufio.NewReaderSize(r, 64<<10)
	max := int(s.cfg.Server.MaxBodyBytes)
	for {
		line, tooLong, err := readLine(br, max)
		if tooLong {
			p.writeError(jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: message larger than %d bytes", max))
		} else if len(bytes.TrimSpace(line)) > 0 {
			p.handleLine(ctx, bytes.TrimSpace(line), &wg)
		}
		if err != nil {
			// EOF: no more requests or cancels can come. Calls in flight
			// may still be read (a client piping requests in), so quick ones
			// get a moment to answer; then, so that execd exits promptly,
			// whatever still runs is stopped and answers nothing.
			p.drain(&wg, min(s.cfg.Server.ShutdownGrace.Duration, eofDrain))
			cancelAll(errClientGone)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// eofDrain is the longest calls in flight may take to answer after EOF.
const eofDrain = time.Second

// drain waits up to grace for the calls in flight to finish.
func (p *stdioProc) drain(wg *sync.WaitGroup, grace time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-p.s.stopping:
	}
}

// readLine reads one newline-terminated line of at most max bytes; a longer
// line is consumed and reported as tooLong.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, e := br.ReadLine()
		if len(line)+len(chunk) > max {
			tooLong = true
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if e != nil {
			return line, tooLong, e
		}
		if !isPrefix {
			return line, tooLong, nil
		}
	}
}

const stdioScope = "stdio"

func (p *stdioProc) handleLine(ctx context.Context, line []byte, wg *sync.WaitGroup) {
	s := p.s
	if line[0] == '[' {
		p.handleBatch(ctx, line, wg)
		return
	}
	msg, jerr := jsonrpc.Decode(line)
	if jerr != nil {
		id := jsonrpc.NullID
		if msg != nil && msg.ID.Valid() {
			id = msg.ID
		}
		p.writeError(id, jerr)
		return
	}
	// Interception: cancels and responses act at once, in the reader.
	switch {
	case msg.IsResponse():
		s.pending.deliver(stdioScope, msg)
		return
	case msg.IsNotification():
		if msg.Method == "notifications/cancelled" {
			s.cancelFromNotification(stdioScope, msg.Params)
		}
		return
	}
	c, m, jerr := p.admit(msg)
	if jerr != nil {
		p.writeError(msg.ID, jerr)
		return
	}
	if c == nil {
		return // answered inline (initialize, ping before pinning)
	}
	p.start(ctx, c, m, wg, p.writeAnswer)
}

// admit validates a request against the process's pin and pins it on the
// first accepted message. It returns the call to run, or nil when the
// request was answered already.
func (p *stdioProc) admit(msg *jsonrpc.Message) (*call, method, *jsonrpc.Error) {
	s := p.s
	meta := readMeta(msg.Params)
	pin := p.pin.Load()
	switch {
	case meta.claim:
		if pin == pinLegacy {
			return nil, method{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: this process is pinned to the legacy era (initialize was sent); _meta %s is not accepted", metaVersion)
		}
		if jerr := meta.validateModern(); jerr != nil {
			return nil, method{}, jerr
		}
		if !isModernVersion(meta.version) {
			return nil, method{}, versionError(meta.version)
		}
		m, jerr := s.lookup(EraModern, msg.Method)
		if jerr != nil {
			return nil, method{}, jerr
		}
		if msg.Method == "tools/call" {
			if p, jerr := parseToolCall(meta); jerr == nil {
				if t := s.tools.byName[p.Name]; t != nil {
					if miss := missingCapabilities(t.needs, meta.capabilities); miss != nil {
						return nil, method{}, &jsonrpc.Error{Code: jsonrpc.CodeMissingCapability,
							Message: "Missing required client capability", Data: map[string]any{"requiredCapabilities": miss}}
					}
				}
			}
		}
		p.pin.CompareAndSwap(pinNone, pinModern)
		logMin := -1
		if meta.logLevel != "" {
			logMin = levelRank(meta.logLevel)
		}
		return &call{era: EraModern, version: meta.version, principal: LocalPrincipal, transport: "stdio",
			id: msg.ID, method: msg.Method, params: msg.Params, meta: meta, proc: p, out: stdioOut{p}, logMin: logMin}, m, nil

	case msg.Method == "initialize":
		if pin == pinModern {
			return nil, method{}, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: initialize (this process speaks %s)", VersionModern)
		}
		if pin == pinLegacy {
			return nil, method{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: initialize was already sent")
		}
		var params struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(msg.Params, &params)
		res, v := s.initializeResult(params.ProtocolVersion)
		p.version = v
		p.pin.Store(pinLegacy)
		b, _ := jsonrpc.EncodeResult(msg.ID, res)
		_ = p.write(b)
		return nil, method{}, nil

	case pin == pinModern:
		if removedInModern[msg.Method] {
			return nil, method{}, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", msg.Method)
		}
		return nil, method{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing _meta %s, %s", metaVersion, metaCapabilities)

	case pin == pinNone:
		if msg.Method == "ping" {
			_ = p.write(mustResult(msg.ID, struct{}{}))
			return nil, method{}, nil
		}
		return nil, method{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: send initialize or a request with modern _meta first")
	}
	m, jerr := s.lookup(EraLegacy, msg.Method)
	if jerr != nil {
		return nil, method{}, jerr
	}
	return &call{era: EraLegacy, version: p.version, principal: LocalPrincipal, transport: "stdio",
		id: msg.ID, method: msg.Method, params: msg.Params, meta: meta, proc: p, out: stdioOut{p},
		logMin: int(p.logMin.Load())}, m, nil
}

func mustResult(id jsonrpc.ID, res any) []byte {
	b, _ := jsonrpc.EncodeResult(id, res)
	return b
}

// start runs a call on its own goroutine, counted in wg, and hands its
// encoded answer to answer, unless the client cancelled it.
func (p *stdioProc) start(parent context.Context, c *call, m method, wg *sync.WaitGroup, answer func([]byte)) {
	s := p.s
	ctx, cancel := context.WithCancelCause(s.runCtx)
	stop := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	if !s.inflight.add(stdioScope, c.id, cancel) {
		stop()
		cancel(nil)
		answer(jsonrpc.EncodeError(c.id, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: request id %s is already in use", c.id)))
		return
	}
	s.calls.Add(1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer s.calls.Done()
		defer cancel(nil)
		defer stop()
		defer s.inflight.remove(stdioScope, c.id)
		begin := time.Now()
		res, jerr := s.serve(ctx, c, m)
		c.finish()
		status := "ok"
		switch {
		case res == nil && jerr == nil, clientEnded(ctx):
			status = "cancelled"
		case jerr != nil:
			status = "error"
			answer(jsonrpc.EncodeError(c.id, jerr))
		default:
			answer(jsonrpc.EncodeRawResult(c.id, res))
		}
		s.logCall(c, begin, status)
	}()
}

// writeAnswer is start's answer for a single request: one line on stdout.
func (p *stdioProc) writeAnswer(b []byte) {
	if err := p.write(b); err != nil {
		p.s.log.Warn("stdout write failed", zap.Error(err))
	}
}

// handleBatch answers a batch line: allowed only after a 2025-03-26
// initialize. Its requests run concurrently; the answer is one array line.
func (p *stdioProc) handleBatch(ctx context.Context, line []byte, wg *sync.WaitGroup) {
	s := p.s
	var items []json.RawMessage
	if err := json.Unmarshal(line, &items); err != nil {
		p.writeError(jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeParseError, "Parse error: %v", err))
		return
	}
	if p.pin.Load() != pinLegacy || p.version != Version20250326 || len(items) == 0 {
		p.writeError(jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: batches are allowed only after initialize with 2025-03-26"))
		return
	}
	var out []json.RawMessage
	var mu sync.Mutex
	var bwg sync.WaitGroup
	collect := func(b []byte) {
		mu.Lock()
		out = append(out, b)
		mu.Unlock()
	}
	for _, it := range items {
		msg, jerr := jsonrpc.Decode(it)
		var meta requestMeta
		if jerr == nil {
			meta = readMeta(msg.Params)
		}
		if jerr == nil && (msg.Method == "initialize" || meta.claim) {
			jerr = jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: a batch may not carry initialize or a modern _meta")
		}
		if jerr != nil {
			collect(jsonrpc.EncodeError(jsonrpc.NullID, jerr))
			continue
		}
		switch {
		case msg.IsResponse():
			s.pending.deliver(stdioScope, msg)
			continue
		case msg.IsNotification():
			if msg.Method == "notifications/cancelled" {
				s.cancelFromNotification(stdioScope, msg.Params)
			}
			continue
		}
		m, jerr := s.lookup(EraLegacy, msg.Method)
		if jerr != nil {
			collect(jsonrpc.EncodeError(msg.ID, jerr))
			continue
		}
		c := &call{era: EraLegacy, version: p.version, principal: LocalPrincipal, transport: "stdio",
			id: msg.ID, method: msg.Method, params: msg.Params, meta: meta, proc: p, out: stdioOut{p},
			logMin: int(p.logMin.Load())}
		p.start(ctx, c, m, &bwg, collect)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		bwg.Wait()
		if len(out) > 0 {
			b, _ := json.Marshal(out)
			_ = p.write(b)
		}
	}()
}
