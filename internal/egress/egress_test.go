package egress_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"execd/internal/config"
	"execd/internal/egress"
	"execd/internal/egress/egresstest"
)

// recorder is an Observer that keeps what it saw.
type recorder struct {
	mu   sync.Mutex
	done []egress.Done
}

func (r *recorder) EgressStart(ctx context.Context, _ egress.Start) (context.Context, func(egress.Done)) {
	return ctx, func(d egress.Done) {
		r.mu.Lock()
		r.done = append(r.done, d)
		r.mu.Unlock()
	}
}

type env struct {
	srv  *egresstest.Servers
	svc  *egress.Service
	rec  *recorder
	logs *observer.ObservedLogs
}

func newEnv(t *testing.T, edit func(c *config.Network, srv *egresstest.Servers)) *env {
	t.Helper()
	srv := egresstest.Start(t)
	c := srv.Config(srv.Allow()...)
	if edit != nil {
		edit(&c, srv)
	}
	core, logs := observer.New(zap.InfoLevel)
	rec := &recorder{}
	svc, err := egress.New(c, egress.Options{Log: zap.New(core), Observer: rec,
		LookupEnv: func(k string) (string, bool) { v, ok := testEnv[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return &env{srv: srv, svc: svc, rec: rec, logs: logs}
}

var testEnv = map[string]string{"TOKEN": "s3cr3t-t0ken-value", "OTHER": "another-secret-value"}

func do(t *testing.T, x *egress.Session, r *egress.Request) (*egress.Response, *egress.Error) {
	t.Helper()
	resp, err := x.Do(context.Background(), r)
	if err != nil {
		var e *egress.Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: not an *egress.Error: %v", r.URL, err)
		}
		return nil, e
	}
	return resp, nil
}

func mustDo(t *testing.T, x *egress.Session, r *egress.Request) *egress.Response {
	t.Helper()
	resp, err := do(t, x, r)
	if err != nil {
		t.Fatalf("%s %s: %s", r.Method, r.URL, err.Message)
	}
	return resp
}

func refusedWith(t *testing.T, x *egress.Session, r *egress.Request, kind egress.Kind, reason egress.Reason, says ...string) *egress.Error {
	t.Helper()
	resp, err := do(t, x, r)
	if err == nil {
		t.Fatalf("%s: got %d, want %s/%s", r.URL, resp.Status, kind, reason)
	}
	if err.Kind != kind || err.Reason != reason {
		t.Errorf("%s: %s/%s %q; want %s/%s", r.URL, err.Kind, err.Reason, err.Message, kind, reason)
	}
	for _, s := range says {
		if !strings.Contains(err.Message, s) {
			t.Errorf("%s: %q does not say %q", r.URL, err.Message, s)
		}
	}
	return err
}

func TestGetAndPostOverHTTPAndHTTPS(t *testing.T) {
	e := newEnv(t, nil)
	x := e.svc.Session("local", "w")
	for _, base := range []string{"http://" + e.srv.HTTPHost(), "https://" + e.srv.HTTPSHost()} {
		r := mustDo(t, x, &egress.Request{Method: "GET", URL: base + "/json"})
		if r.Status != 200 || r.StatusText != "OK" || string(r.Body) != `{"ok": true, "items": [1, 2, 3], "name": "ü"}` || r.URL != base+"/json" || r.Redirected {
			t.Errorf("%s/json: %+v %q", base, r, r.Body)
		}
		r = mustDo(t, x, &egress.Request{Method: "GET", URL: base + "/bytes?n=1000"})
		if len(r.Body) != 1000 || r.Body[255] != 255 || r.Body[256] != 0 {
			t.Errorf("%s/bytes: %d bytes", base, len(r.Body))
		}
		body := []byte("\x00\x01 binary \xff")
		r = mustDo(t, x, &egress.Request{Method: "post", URL: base + "/echo?a=1", Header: [][2]string{{"Content-Type", "application/octet-stream"}, {"X-Two", "1"}, {"x-two", "2"}},
			Body: body, BodySize: int64(len(body))})
		echo := egresstest.DecodeEcho(t, r.Body)
		got, _ := base64.StdEncoding.DecodeString(echo.Body)
		if echo.Method != "POST" || !bytes.Equal(got, body) || echo.Query != "a=1" || strings.Join(echo.Headers["X-Two"], ",") != "1,2" {
			t.Errorf("%s/echo: %+v", base, echo)
		}
	}
	if got := x.Reached(); len(got) != 2 || got[0].Requests != 3 || got[1].Requests != 3 {
		t.Errorf("reached %+v", got)
	}
}

func TestRefusals(t *testing.T) {
	e := newEnv(t, func(c *config.Network, srv *egresstest.Servers) {
		_, port, _ := strings.Cut(srv.HTTPHost(), ":")
		c.Allow = append(c.Allow, "http://localhost:"+port, "api.example.com")
	})
	x := e.svc.Session("local", "w")
	get := func(u string) *egress.Request { return &egress.Request{Method: "GET", URL: u} }
	refusedWith(t, x, get("https://evil.example/x?secret=1"), egress.KindRefused, egress.ReasonHost, "fetch to evil.example is not allowed (network.allow)")
	refusedWith(t, x, get("https://api.example.com:8443/"), egress.KindRefused, egress.ReasonPort, "other ports")
	refusedWith(t, x, get("http://api.example.com/"), egress.KindRefused, egress.ReasonPort, "plain http")
	refusedWith(t, x, get("https://"+e.srv.HTTPHost()+"/"), egress.KindFailed, egress.ReasonTLS, "does not speak TLS")
	_, port, _ := strings.Cut(e.srv.HTTPHost(), ":")
	// A name that resolves to 127.0.0.1 is refused by the dialer, though the allow list names it.
	err := refusedWith(t, x, get("http://localhost:"+port+"/text"), egress.KindRefused, egress.ReasonAddress, "loopback", "IP literal")
	if strings.Contains(err.Message, "/text") {
		t.Errorf("the refusal quotes the path: %s", err.Message)
	}
	for _, u := range []string{"file:///etc/passwd", "data:text/plain,x", "ftp://" + e.srv.HTTPHost() + "/", "http://u:p@" + e.srv.HTTPHost() + "/",
		"http://2130706433:" + port + "/x", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		_, err := do(t, x, get(u))
		if u == "http://2130706433:"+port+"/x" || strings.HasPrefix(u, "http://[::ffff:") {
			// The same listed address in another spelling is that address.
			if err != nil {
				t.Errorf("%s: %s", u, err.Message)
			}
			continue
		}
		if err == nil || err.Kind != egress.KindRefused {
			t.Errorf("%s: %v", u, err)
		}
	}
	nothing := newEnv(t, func(c *config.Network, _ *egresstest.Servers) { c.Allow = nil })
	refusedWith(t, nothing.svc.Session("local", "w"), get("https://"+e.srv.HTTPSHost()+"/"), egress.KindRefused, egress.ReasonHost, "no network access (network.allow is empty)")
	// Refusals reach no server.
	if n := e.srv.Requests.Load(); n != 2 {
		t.Errorf("the servers saw %d requests, want the 2 allowed ones", n)
	}
}

func TestRedirects(t *testing.T) {
	e := newEnv(t, func(c *config.Network, srv *egresstest.Servers) {
		_, port, _ := strings.Cut(srv.HTTPHost(), ":")
		c.Allow = append(c.Allow, "http://localhost:"+port)
		c.MaxRedirects = 2
	})
	x := e.svc.Session("local", "w")
	plain, tls := "http://"+e.srv.HTTPHost(), "https://"+e.srv.HTTPSHost()
	to := func(base, target string, code int) string {
		return base + "/redirect?code=" + fmt.Sprint(code) + "&to=" + url.QueryEscape(target)
	}
	r := mustDo(t, x, &egress.Request{Method: "GET", URL: to(plain, tls+"/text", 302)})
	if r.Status != 200 || !r.Redirected || r.URL != tls+"/text" || string(r.Body) != "hello from the test server\n" {
		t.Errorf("followed: %+v", r)
	}
	// POST becomes GET on 303; 307 keeps it and its body.
	r = mustDo(t, x, &egress.Request{Method: "POST", URL: to(plain, "/echo", 303), Body: []byte("b"), BodySize: 1})
	if echo := egresstest.DecodeEcho(t, r.Body); echo.Method != "GET" || echo.Body != "" {
		t.Errorf("303: %+v", echo)
	}
	r = mustDo(t, x, &egress.Request{Method: "POST", URL: to(plain, "/echo", 307), Body: []byte("b"), BodySize: 1})
	if echo := egresstest.DecodeEcho(t, r.Body); echo.Method != "POST" || echo.Body != "Yg==" {
		t.Errorf("307: %+v", echo)
	}
	// An allowed host redirecting to a refused one: refused at that hop.
	_, port, _ := strings.Cut(e.srv.HTTPHost(), ":")
	refusedWith(t, x, &egress.Request{Method: "GET", URL: to(plain, "http://localhost:"+port+"/text", 302)}, egress.KindRefused, egress.ReasonAddress, "through a redirect")
	refusedWith(t, x, &egress.Request{Method: "GET", URL: to(plain, "https://evil.example/", 301)}, egress.KindRefused, egress.ReasonHost,
		"redirected to evil.example, which is not allowed (network.allow)")
	refusedWith(t, x, &egress.Request{Method: "GET", URL: to(plain, "file:///etc/passwd", 302)}, egress.KindRefused, egress.ReasonScheme, "redirected")
	// At most network.max_redirects.
	loop := to(plain, to(plain, to(plain, "/text", 302), 302), 302)
	refusedWith(t, x, &egress.Request{Method: "GET", URL: loop}, egress.KindRefused, egress.ReasonRedirect, "more than 2 times (network.max_redirects)")
	// manual: the redirect is the response; error: it is an error.
	r = mustDo(t, x, &egress.Request{Method: "GET", URL: to(plain, "/text", 302), Redirect: "manual"})
	if r.Status != 302 || r.Redirected {
		t.Errorf("manual: %+v", r)
	}
	refusedWith(t, x, &egress.Request{Method: "GET", URL: to(plain, "/text", 302), Redirect: "error"}, egress.KindRefused, egress.ReasonRedirect, "redirect: \"error\"")
}

func TestSecrets(t *testing.T) {
	e := newEnv(t, func(c *config.Network, srv *egresstest.Servers) {
		c.Secrets = []config.Secret{
			{Name: "TOKEN", Env: "TOKEN", Hosts: []string{srv.HTTPSHost()}},
			{Name: "OTHER", Env: "OTHER", Hosts: []string{srv.HTTPSHost()}, Header: "X-Api-Key: key={value}"},
		}
	})
	x := e.svc.Session("local", "w")
	if got := x.Env(); len(got) != 2 || got[0] != [2]string{"OTHER", "__EXECD_SECRET_OTHER__"} || got[1][1] != "__EXECD_SECRET_TOKEN__" {
		t.Errorf("env %v", got)
	}
	tls, plain := "https://"+e.srv.HTTPSHost(), "http://"+e.srv.HTTPHost()
	r := mustDo(t, x, &egress.Request{Method: "GET", URL: tls + "/echo/" + egress.Placeholder("TOKEN") + "?k=" + egress.Placeholder("TOKEN"),
		Header: [][2]string{{"Authorization", "Bearer " + egress.Placeholder("TOKEN")}, {"X-Api-Key", "the code's own"}}})
	unredact := strings.NewReplacer(egress.Placeholder("TOKEN"), testEnv["TOKEN"], egress.Placeholder("OTHER"), testEnv["OTHER"])
	echo := egresstest.DecodeEcho(t, []byte(unredact.Replace(string(r.Body))))
	// The server got the values ...
	if echo.Headers["Authorization"][0] != "Bearer "+testEnv["TOKEN"] || echo.Query != "k="+testEnv["TOKEN"] ||
		echo.Path != "/echo/"+testEnv["TOKEN"] || echo.Headers["X-Api-Key"][0] != "key="+testEnv["OTHER"] {
		t.Errorf("the server got %+v", echo)
	}
	// ... and the code sees only the placeholders: the echo is redacted.
	for _, v := range testEnv {
		if strings.Contains(string(r.Body), v) || strings.Contains(r.URL, v) {
			t.Errorf("a value reached the code: %s", r.Body)
		}
	}
	for _, h := range r.Header {
		if h[0] == "X-Echo-Authorization" && h[1] != "Bearer "+egress.Placeholder("TOKEN") {
			t.Errorf("echoed header %q", h[1])
		}
	}
	// A placeholder toward another allowed host is refused, and so is the value.
	refusedWith(t, x, &egress.Request{Method: "GET", URL: plain + "/echo", Header: [][2]string{{"Authorization", "Bearer " + egress.Placeholder("TOKEN")}}},
		egress.KindRefused, egress.ReasonSecret, "carries secret TOKEN, which may be sent only to its hosts (network.secrets)")
	refusedWith(t, x, &egress.Request{Method: "GET", URL: plain + "/echo?t=" + egress.Placeholder("TOKEN")}, egress.KindRefused, egress.ReasonSecret)
	refusedWith(t, x, &egress.Request{Method: "POST", URL: plain + "/echo", Body: []byte(testEnv["OTHER"]), BodySize: 18}, egress.KindRefused, egress.ReasonSecret, "the value of secret OTHER")
	// The placeholder is not substituted in bodies.
	r = mustDo(t, x, &egress.Request{Method: "POST", URL: tls + "/echo", Body: []byte(egress.Placeholder("TOKEN")), BodySize: 22})
	if b, _ := base64.StdEncoding.DecodeString(egresstest.DecodeEcho(t, r.Body).Body); string(b) != egress.Placeholder("TOKEN") {
		t.Errorf("body %q", b)
	}
	// A redirect from the secret's host elsewhere drops nothing silently: the hop is refused.
	refusedWith(t, x, &egress.Request{Method: "GET", URL: tls + "/redirect?code=307&to=" + url.QueryEscape(plain+"/echo"),
		Header: [][2]string{{"X-T", egress.Placeholder("TOKEN")}}}, egress.KindRefused, egress.ReasonSecret, "redirected to")
	// The log never holds a value, a path or a query.
	for _, l := range e.logs.All() {
		s := fmt.Sprint(l.Message, l.ContextMap())
		if strings.Contains(s, testEnv["TOKEN"]) || strings.Contains(s, "/echo") || strings.Contains(s, "k=") {
			t.Errorf("log line %s", s)
		}
	}
}

func TestPrincipalPolicy(t *testing.T) {
	e := newEnv(t, func(c *config.Network, srv *egresstest.Servers) {
		c.Principals = map[string]config.NetworkPrincipal{"team-a": {Allow: []string{"http://" + srv.HTTPHost()},
			Secrets: []config.Secret{{Name: "TOKEN", Env: "TOKEN", Hosts: []string{"http://" + srv.HTTPHost()}}}}}
	})
	a, other := e.svc.Session("team-a", "w"), e.svc.Session("local", "w")
	refusedWith(t, a, &egress.Request{Method: "GET", URL: "https://" + e.srv.HTTPSHost() + "/text"}, egress.KindRefused, egress.ReasonPort, "network.principals.team-a.allow")
	refusedWith(t, a, &egress.Request{Method: "GET", URL: "https://api.example.com/"}, egress.KindRefused, egress.ReasonHost, "network.principals.team-a.allow")
	mustDo(t, a, &egress.Request{Method: "GET", URL: "http://" + e.srv.HTTPHost() + "/echo", Header: [][2]string{{"A", egress.Placeholder("TOKEN")}}})
	mustDo(t, other, &egress.Request{Method: "GET", URL: "https://" + e.srv.HTTPSHost() + "/text"})
	if len(other.Env()) != 0 || len(a.Env()) != 1 {
		t.Errorf("env: %v %v", other.Env(), a.Env())
	}
}

func TestLimits(t *testing.T) {
	e := newEnv(t, func(c *config.Network, _ *egresstest.Servers) {
		c.MaxResponseBytes = 64 << 10
		c.MaxRequestBytes = 1024
		c.MaxRequestsPerRun = 30
		c.RequestTimeout = config.Duration{Duration: 300 * time.Millisecond}
	})
	x := e.svc.Session("local", "w")
	plain := "http://" + e.srv.HTTPHost()
	get := func(path string) *egress.Request { return &egress.Request{Method: "GET", URL: plain + path} }
	mustDo(t, x, get("/bytes?n=65536"))
	refusedWith(t, x, get("/bytes?n=65537"), egress.KindFailed, egress.ReasonSize, "larger than 65536 bytes (network.max_response_bytes)")
	// A body that never ends stops at the limit; one that never comes, at the timeout.
	refusedWith(t, x, get("/stream"), egress.KindFailed, egress.ReasonSize, "network.max_response_bytes")
	start := time.Now()
	refusedWith(t, x, get("/hang"), egress.KindTimeout, egress.ReasonTimeout, "timed out after 300ms (network.request_timeout)")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	refusedWith(t, x, &egress.Request{Method: "GET", URL: plain + "/slow?ms=5000", Timeout: 50 * time.Millisecond}, egress.KindTimeout, egress.ReasonTimeout, "own timeout")
	// gzip is decoded by the host, and the limit counts what is decoded.
	r := mustDo(t, x, &egress.Request{Method: "GET", URL: plain + "/gzip?n=1000", Header: [][2]string{{"Accept-Encoding", "identity"}}})
	if string(r.Body) != strings.Repeat("a", 1000) {
		t.Errorf("gzip: %q", r.Body)
	}
	refusedWith(t, x, get("/gzip?n=200000"), egress.KindFailed, egress.ReasonSize)
	refusedWith(t, x, &egress.Request{Method: "POST", URL: plain + "/echo", BodySize: 1025}, egress.KindRefused, egress.ReasonSize, "network.max_request_bytes")
	// Header injection, huge header counts, hostile methods.
	refusedWith(t, x, &egress.Request{Method: "GET", URL: plain + "/echo", Header: [][2]string{{"X-A", "a\r\nX-Injected: 1"}}}, egress.KindRefused, egress.ReasonHeader, "line break")
	refusedWith(t, x, &egress.Request{Method: "GET", URL: plain + "/echo", Header: [][2]string{{"X-A\r\nB", "a"}}}, egress.KindRefused, egress.ReasonHeader)
	many := make([][2]string, 101)
	for i := range many {
		many[i] = [2]string{fmt.Sprintf("X-%d", i), "v"}
	}
	refusedWith(t, x, &egress.Request{Method: "GET", URL: plain + "/echo", Header: many}, egress.KindRefused, egress.ReasonHeader, "more than 100")
	refusedWith(t, x, &egress.Request{Method: "GET", URL: plain + "/echo", Header: [][2]string{{"X-Big", strings.Repeat("a", 70<<10)}}}, egress.KindRefused, egress.ReasonHeader, "larger than")
	refusedWith(t, x, &egress.Request{Method: "TRACE", URL: plain + "/echo"}, egress.KindRefused, egress.ReasonHeader)
	refusedWith(t, x, &egress.Request{Method: "GET /x HTTP/1.1\r\n", URL: plain + "/echo"}, egress.KindRefused, egress.ReasonHeader)
	// The host decides Host: a Host of the code's would reach another site behind the address.
	r = mustDo(t, x, &egress.Request{Method: "GET", URL: plain + "/echo", Header: [][2]string{{"Host", "evil.example"}, {"Transfer-Encoding", "chunked"}}})
	if echo := egresstest.DecodeEcho(t, r.Body); echo.Host != e.srv.HTTPHost() || echo.Headers["Transfer-Encoding"] != nil {
		t.Errorf("host %q, headers %v", echo.Host, echo.HeaderNames())
	}
	// A run's 31st request.
	y := e.svc.Session("local", "w")
	for i := 0; i < 30; i++ {
		mustDo(t, y, get("/text"))
	}
	refusedWith(t, y, get("/text"), egress.KindRefused, egress.ReasonRequests, "made 30 requests", "network.max_requests_per_run")
	refusedWith(t, y, get("/text"), egress.KindRefused, egress.ReasonRequests)
	capLines := 0
	for _, l := range e.logs.All() {
		if l.ContextMap()["reason"] == "requests" {
			capLines++
		}
	}
	if capLines != 1 {
		t.Errorf("%d log lines for the refused requests beyond the cap, want 1", capLines)
	}
	// A new run counts afresh.
	mustDo(t, e.svc.Session("local", "w"), get("/text"))
}

func TestBudget(t *testing.T) {
	e := newEnv(t, func(c *config.Network, _ *egresstest.Servers) { c.BytesPerMinute = 8 << 10 })
	x := e.svc.Session("local", "w")
	mustDo(t, x, &egress.Request{Method: "GET", URL: "http://" + e.srv.HTTPHost() + "/bytes?n=6000"})
	refusedWith(t, e.svc.Session("local", "w2"), &egress.Request{Method: "GET", URL: "http://" + e.srv.HTTPHost() + "/bytes?n=6000"},
		egress.KindFailed, egress.ReasonBudget, "network.bytes_per_minute")
	refusedWith(t, x, &egress.Request{Method: "GET", URL: "http://" + e.srv.HTTPHost() + "/text", Header: [][2]string{{"X-Pad", strings.Repeat("p", 3000)}}},
		egress.KindRefused, egress.ReasonBudget, "used up")
	// Another principal has its own.
	mustDo(t, e.svc.Session("other", "w"), &egress.Request{Method: "GET", URL: "http://" + e.srv.HTTPHost() + "/bytes?n=6000"})
}

func TestObserversAndRecent(t *testing.T) {
	e := newEnv(t, nil)
	x := e.svc.Session("alice", "ws1")
	mustDo(t, x, &egress.Request{Method: "GET", URL: "https://" + e.srv.HTTPSHost() + "/bytes?n=10"})
	do(t, x, &egress.Request{Method: "GET", URL: "https://evil.example/"})
	e.rec.mu.Lock()
	done := append([]egress.Done(nil), e.rec.done...)
	e.rec.mu.Unlock()
	if len(done) != 2 || done[0].Outcome != egress.OutcomeAllowed || done[0].Status != 200 || done[0].BytesIn != 10 || done[0].BytesOut == 0 ||
		done[1].Outcome != egress.OutcomeRefusedPolicy || done[1].Reason != egress.ReasonHost {
		t.Errorf("observed %+v", done)
	}
	rec := e.svc.Recent()
	if len(rec) != 1 || rec[0].Principal != "alice" || rec[0].Workspace != "ws1" || len(rec[0].Requests) != 2 ||
		rec[0].Requests[0].Host != "evil.example" || rec[0].Requests[1].Status != 200 {
		t.Errorf("recent %+v", rec)
	}
	if n := e.logs.FilterMessage("egress").Len(); n != 2 {
		t.Errorf("%d log lines, want one per request", n)
	}
}

// TestAbortEndsTheRequest: a cancelled context ends the request at once,
// also while the server is silent.
func TestAbortEndsTheRequest(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := e.svc.Session("local", "w").Do(ctx, &egress.Request{Method: "GET", URL: "http://" + e.srv.HTTPHost() + "/hang"})
	var ee *egress.Error
	if !errors.As(err, &ee) || ee.Kind != egress.KindAborted {
		t.Fatalf("%v", err)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		edit func(c *config.Network)
		says string
	}{
		{func(c *config.Network) { c.Allow = []string{"example.com/path"} }, "network.allow"},
		{func(c *config.Network) {
			c.Principals = map[string]config.NetworkPrincipal{"p": {Allow: []string{"ftp://x"}}}
		}, "network.principals.p.allow"},
		{func(c *config.Network) {
			c.Principals = map[string]config.NetworkPrincipal{"p": {Secrets: []config.Secret{{Name: "X"}}}}
		}, "network.principals.p.secrets[0]"},
		{func(c *config.Network) { c.CAFile = "/no/such/ca.pem" }, "network.ca_file"},
		{func(c *config.Network) { c.CAFile = "/dev/null" }, "network.ca_file"},
	} {
		c := config.Default().Network
		tc.edit(&c)
		if _, err := egress.New(c, egress.Options{}); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%v; want it to name %s", err, tc.says)
		}
	}
}
