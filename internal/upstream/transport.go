package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"execd/internal/config"
)

// baseEnv are the variables of execd's environment a stdio server gets
// without asking: what finding programs, files and a locale needs. Nothing
// else of execd's environment (its own secrets among it) reaches an
// upstream unless pass_env names it.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}

// stdioEnv is a stdio server's environment: baseEnv, then pass_env, then
// env, each later one winning.
func stdioEnv(at string, u config.Upstream, lookupEnv func(string) (string, bool)) ([]string, error) {
	m := map[string]string{}
	for _, k := range baseEnv {
		if v, ok := lookupEnv(k); ok {
			m[k] = v
		}
	}
	for _, k := range u.PassEnv {
		v, ok := lookupEnv(k)
		if !ok {
			return nil, fmt.Errorf("config: %s.pass_env: the environment variable %s is not set", at, k)
		}
		m[k] = v
	}
	for k, v := range u.Env {
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env, nil
}

// process is a running stdio server, in a process group of its own so
// that what it starts (npx starts node) ends with it.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has exited
	state  *os.ProcessState
	once   sync.Once
}

// startProcess starts the server with its stdin, stdout and stderr on
// pipes execd holds (stdout through a frameFilter, stderr into the debug
// log) and returns the transport that speaks to it.
func (s *server) startProcess() (*process, mcp.Transport, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, nil, err
	}
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Env = s.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	inR.Close() // the child's ends
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	s.h.wg.Add(2)
	go func() {
		defer s.h.wg.Done()
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		// What it started and left behind holds its stdout open: without
		// them the connection sees EOF once what was written is read.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		close(p.exited)
	}()
	go func() {
		defer s.h.wg.Done()
		defer errR.Close()
		sc := bufio.NewScanner(errR)
		sc.Buffer(make([]byte, 4096), 64<<10)
		for sc.Scan() {
			s.log.Debug("upstream stderr", zap.String("line", clip(sc.Text(), 1024)))
		}
		_, _ = io.Copy(io.Discard, errR) // a line too long for the scanner: drain to EOF
	}()
	f := newFrameFilter(outR, framesLines, s.h.opts.MaxResultBytes)
	f.onDrop = s.onDrop
	f.onNoise = func(line []byte) {
		s.log.Debug("upstream wrote a line that is not JSON-RPC to stdout; ignored", zap.String("line", clip(string(line), 200)))
	}
	t := &mcp.IOTransport{Reader: readCloser{f, outR}, Writer: inW, MaxLineLength: s.h.opts.MaxResultBytes + 64<<10}
	return p, t, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

func (s *server) onDrop(n int64, replaced bool) {
	s.log.Warn("upstream sent a message larger than the limit; dropped", zap.Int64("bytes", n),
		zap.Int("max_bytes", s.h.opts.MaxResultBytes), zap.Bool("answer", replaced))
}

// stopGrace is how long a stdio server has to exit after EOF on its stdin,
// and then after SIGTERM, before the next step.
const stopGrace = 2 * time.Second

// stop ends the process: its stdin was closed with the connection, then
// SIGTERM, then SIGKILL, each to its whole group; it returns once the
// process has exited. It is a no-op on a nil process and when repeated.
func (p *process) stop() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		pgid := -p.cmd.Process.Pid
		for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
			if sig != 0 {
				_ = syscall.Kill(pgid, sig)
			}
			t := time.NewTimer(stopGrace)
			select {
			case <-p.exited:
				t.Stop()
				return
			case <-t.C:
			}
		}
		<-p.exited
	})
}

// exitStatus says how the process ended ("" while it runs): "it exited
// with status 3", "it was killed by signal 9".
func (p *process) exitStatus() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("it was killed by signal %d (%s)", ws.Signal(), ws.Signal())
	}
	return fmt.Sprintf("it exited with status %d", p.state.ExitCode())
}

// httpTransport is the streamable HTTP transport of a url upstream: its
// headers and bearer on every request, and every response body through a
// frameFilter.
func (s *server) httpTransport() mcp.Transport {
	base := &http.Transport{
		Proxy:               http.ProxyFromEnvironment, // the operator's own connection, not sandboxed code's
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &mcp.StreamableClientTransport{
		Endpoint:     s.cfg.URL,
		HTTPClient:   &http.Client{Transport: &headerTransport{s: s, base: base}},
		MaxEventSize: s.h.opts.MaxResultBytes + 64<<10,
	}
}

type headerTransport struct {
	s    *server
	base http.RoundTripper
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.s.cfg.Headers {
		req.Header.Set(k, v)
	}
	if t.s.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+t.s.bearer)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	mode := framesWhole
	switch ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct {
	case "application/json":
	case "text/event-stream":
		mode = framesSSE
	default:
		return resp, nil
	}
	f := newFrameFilter(resp.Body, mode, t.s.h.opts.MaxResultBytes)
	f.onDrop = t.s.onDrop
	resp.Body = readCloser{f, resp.Body}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

var errCallTimeout = errors.New("call_timeout")
