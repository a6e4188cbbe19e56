// Package egresstest is the test support of the network: loopback HTTP
// and HTTPS servers with the endpoints the tests of internal/egress,
// internal/worker, cmd/execd and bench/network use, and the file of the
// HTTPS server's certificate authority for network.ca_file.
package egresstest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"execd/internal/config"
)

// Servers are a plain HTTP and an HTTPS server on 127.0.0.1 with the same
// endpoints:
//
//	/echo, /echo/…  the request as JSON: method, path, query, headers, body (base64)
//	/text         "hello from the test server\n"
//	/json         {"ok": true, "items": [1, 2, 3], "name": "ü"}
//	/bytes?n=N    N bytes 0, 1, …, 255, 0, …
//	/slow?ms=M    "slow" after M milliseconds (or when the client goes away)
//	/held         "held" once the test calls Release (or when the client goes away):
//	              a request in flight for exactly as long as the test needs
//	/redirect?to=URL&code=C   a redirect to URL (C: 302 by default)
//	/stream       a body that never ends (until the client goes away)
//	/hang         headers, then nothing, forever
//	/status?code=C            status C, its text as the body
//	/headers?n=N  N response headers X-H-0 … X-H-(N-1)
//	/gzip?n=N     N bytes "a", gzip-encoded when the request accepts gzip
//	/barrier?n=N&key=K  "together" once N requests with key K are in
//	              flight at once, "alone" if that has not happened within 20s:
//	              concurrency shown without measuring time
//
// Requests counts every request either server received; InFlight those
// being answered now, Aborted those whose client went away before the
// answer of /slow, /held, /hang, /stream or /barrier was complete.
type Servers struct {
	HTTP, HTTPS *httptest.Server
	// CAFile is a PEM file with the HTTPS server's certificate, for
	// network.ca_file.
	CAFile      string
	Requests    atomic.Int64
	InFlight    atomic.Int64
	MaxInFlight atomic.Int64 // the most InFlight has been
	Aborted     atomic.Int64

	mu       sync.Mutex
	barriers map[string]*barrier
	auth     []string
	held     chan struct{} // closed by Release
}

// Release answers every /held request, those in flight and those to come.
func (s *Servers) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.held:
	default:
		close(s.held)
	}
}

// Authorizations are the Authorization headers the servers received, in
// order.
func (s *Servers) Authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

type barrier struct {
	n    int
	done chan struct{}
}

// WaitIdle waits, at most max, until no request is being answered, and
// says whether that happened.
func (s *Servers) WaitIdle(max time.Duration) bool {
	for deadline := time.Now().Add(max); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if s.InFlight.Load() == 0 {
			return true
		}
	}
	return s.InFlight.Load() == 0
}

// Start starts both servers; they close with the test.
func Start(t testing.TB) *Servers {
	t.Helper()
	s := &Servers{held: make(chan struct{})}
	h := s.handler()
	s.HTTP = httptest.NewServer(h)
	s.HTTPS = httptest.NewUnstartedServer(h)
	s.HTTPS.EnableHTTP2 = true
	s.HTTPS.StartTLS()
	t.Cleanup(func() {
		s.HTTP.CloseClientConnections()
		s.HTTPS.CloseClientConnections()
		s.HTTP.Close()
		s.HTTPS.Close()
	})
	s.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.HTTPS.Certificate().Raw})
	if err := os.WriteFile(s.CAFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// HTTPHost and HTTPSHost are the servers' host:port (127.0.0.1:port).
func (s *Servers) HTTPHost() string  { return s.HTTP.Listener.Addr().String() }
func (s *Servers) HTTPSHost() string { return s.HTTPS.Listener.Addr().String() }

// Allow is the allow list naming both servers by IP literal: http:// for
// the plain one.
func (s *Servers) Allow() []string {
	return []string{"http://" + s.HTTPHost(), s.HTTPSHost()}
}

// Echo is what /echo answers.
type Echo struct {
	Method  string              `json:"method"`
	Path    string              `json:"path"`
	Query   string              `json:"query"`
	Host    string              `json:"host"`
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"` // base64
}

func (s *Servers) handler() http.Handler {
	mux := http.NewServeMux()
	echo := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		e := Echo{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Host: r.Host, Headers: r.Header,
			Body: base64.StdEncoding.EncodeToString(b)}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		_ = json.NewEncoder(w).Encode(e)
	}
	mux.HandleFunc("/echo", echo)
	mux.HandleFunc("/echo/", echo)
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "hello from the test server\n")
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true, "items": [1, 2, 3], "name": "ü"}`)
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			s.Aborted.Add(1)
			return
		}
		_, _ = io.WriteString(w, "slow")
	})
	mux.HandleFunc("/held", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.held:
		case <-r.Context().Done():
			s.Aborted.Add(1)
			return
		}
		_, _ = io.WriteString(w, "held")
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		if code == 0 {
			code = http.StatusFound
		}
		http.Redirect(w, r, r.URL.Query().Get("to"), code)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				s.Aborted.Add(1)
				return
			}
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			if r.Context().Err() != nil {
				s.Aborted.Add(1)
				return
			}
		}
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		<-r.Context().Done()
		s.Aborted.Add(1)
	})
	mux.HandleFunc("/barrier", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		key := r.URL.Query().Get("key")
		s.mu.Lock()
		if s.barriers == nil {
			s.barriers = map[string]*barrier{}
		}
		b := s.barriers[key]
		if b == nil {
			b = &barrier{done: make(chan struct{})}
			s.barriers[key] = b
		}
		b.n++
		if b.n == n {
			close(b.done)
		}
		s.mu.Unlock()
		select {
		case <-b.done:
			_, _ = io.WriteString(w, "together")
		case <-time.After(20 * time.Second):
			_, _ = io.WriteString(w, "alone")
		case <-r.Context().Done():
			s.Aborted.Add(1)
		}
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		for i := 0; i < n; i++ {
			w.Header().Set(fmt.Sprintf("X-H-%d", i), strconv.Itoa(i))
		}
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		body := bytes.Repeat([]byte("a"), n)
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write(body)
		_ = zw.Close()
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		n := s.InFlight.Add(1)
		defer s.InFlight.Add(-1)
		for m := s.MaxInFlight.Load(); n > m && !s.MaxInFlight.CompareAndSwap(m, n); m = s.MaxInFlight.Load() {
		}
		if a := r.Header.Get("Authorization"); a != "" {
			s.mu.Lock()
			s.auth = append(s.auth, a)
			s.mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	})
}

// DecodeEcho reads an /echo answer.
func DecodeEcho(t testing.TB, b []byte) Echo {
	t.Helper()
	var e Echo
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not an echo: %v: %.300s", err, b)
	}
	return e
}

// HeaderNames are an echo's header names, sorted.
func (e Echo) HeaderNames() []string {
	out := make([]string, 0, len(e.Headers))
	for k := range e.Headers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Config is the daemon's default [network] with allow, and the HTTPS
// server's CA as network.ca_file.
func (s *Servers) Config(allow ...string) config.Network {
	c := config.Default().Network
	c.Allow = allow
	c.CAFile = s.CAFile
	return c
}
