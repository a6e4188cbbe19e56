package frontend

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

// The stdio transport: one message per line in, one per line out. The
// reader hands each line to the pipeline and never waits for a call to
// run, so that a cancel on the next line always gets through; calls run
// on goroutines of their own.

// stdioProc is one stdio connection: the process's stdin and stdout.
type stdioProc struct {
	pin     atomic.Int32 // pinNone, pinLegacy, pinModern
	version string       // negotiated by initialize (legacy pin)
	peer    *peer        // scope "p:<n>"

	wmu sync.Mutex
	w   *bufio.Writer
	log *zap.Logger
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

func (p *stdioProc) writeLine(b []byte) {
	if err := p.write(b); err != nil {
		p.log.Warn("stdout write failed", zap.Error(err))
	}
}

// ServeStdio serves one MCP connection on r and w until r ends (EOF) or
// ctx is done. On EOF every running call is cancelled and nothing more is
// written for it.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	p := &stdioProc{w: bufio.NewWriter(w), log: s.log, peer: newPeer("p:" + strconv.FormatInt(s.procs.Add(1), 10))}
	write := p.write
	p.peer.stream.Store(&write)
	defer s.listening.add(p.peer)()
	ctx, cancelAll := context.WithCancelCause(ctx)
	defer cancelAll(nil)
	o := &stdioOrigin{source: source{transport: "stdio", principal: LocalPrincipal, closed: ctx}, proc: p}
	var wg sync.WaitGroup
	defer wg.Wait()

	br := bufio.NewReaderSize(r, 64<<10)
	max := int(s.opts.MaxBodyBytes)
	for {
		line, tooLong, err := readLine(br, max)
		if tooLong {
			p.writeLine(jsonrpc.EncodeError(jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: message larger than %d bytes", max)))
		} else if first(line) == '[' {
			s.stdioBatch(o, line, &wg)
		} else if first(line) != 0 {
			s.stdioLine(o, line, &wg)
		}
		if err != nil {
			// EOF: no more requests or cancels can come. Calls in flight
			// may still be read (a client piping requests in), so quick ones
			// get a moment to answer; then, so that execd exits promptly,
			// whatever still runs is stopped and answers nothing.
			s.drain(&wg, eofDrain)
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

// drain waits up to grace for the calls in flight to finish, or until
// shutdown begins.
func (s *Server) drain(wg *sync.WaitGroup, grace time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-s.stopping:
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

// stdioLine serves one line that holds one message.
func (s *Server) stdioLine(o *stdioOrigin, line []byte, wg *sync.WaitGroup) {
	p := o.proc
	msg, jerr := jsonrpc.Decode(line)
	if jerr != nil {
		id := jsonrpc.NullID
		if msg != nil && msg.ID.Valid() {
			id = msg.ID
		}
		p.writeLine(jsonrpc.EncodeError(id, jerr))
		return
	}
	if t := s.handle(o, msg, lineSink{p}); t != nil {
		wg.Add(1)
		go func() { defer wg.Done(); t.run() }()
	}
}

// lineSink writes every message of a request as its own line.
type lineSink struct{ p *stdioProc }

func (l lineSink) reply(r *reply)        { l.p.writeLine(r.encode(l.p.log)) }
func (l lineSink) open(string)           {}
func (l lineSink) send(b []byte) error   { return l.p.write(b) }
func (l lineSink) answer(b []byte) error { l.p.writeLine(b); return nil }
func (l lineSink) silent()               {}
func (l lineSink) accepted()             {}

// stdioBatch answers a batch line: allowed only after a 2025-03-26
// initialize. Its messages go through the pipeline one by one; their
// notifications are lines of their own, and the answers one array line
// once all have answered.
func (s *Server) stdioBatch(o *stdioOrigin, line []byte, wg *sync.WaitGroup) {
	p := o.proc
	items, jerr := splitBatch(line)
	if jerr != nil {
		p.writeLine(jsonrpc.EncodeError(jsonrpc.NullID, jerr))
		return
	}
	if p.pin.Load() != pinLegacy || p.version != Version20250326 || len(items) == 0 {
		p.writeLine(jsonrpc.EncodeError(jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: batches are allowed only after initialize with 2025-03-26")))
		return
	}
	answers := &batchAnswers{log: s.log}
	var bwg sync.WaitGroup
	for _, it := range items {
		msg, jerr := decodeBatchItem(it)
		if jerr != nil {
			answers.add(jsonrpc.EncodeError(jsonrpc.NullID, jerr))
			continue
		}
		if t := s.handle(o, msg, answers.item(p.write)); t != nil {
			bwg.Add(1)
			go func() { defer bwg.Done(); t.run() }()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		bwg.Wait()
		if len(answers.list) > 0 {
			p.writeLine(answers.array())
		}
	}()
}
