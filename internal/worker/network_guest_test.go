package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"execd/internal/config"
	"execd/internal/egress"
	"execd/internal/egress/egresstest"
)

// The network as the code meets it: the real guests, the real policy
// (internal/egress), loopback HTTP and HTTPS servers of the test's own.

type netEnv struct {
	srv *egresstest.Servers
	svc *egress.Service
	sub *strings.Replacer
}

// newNetEnv starts the servers and a policy that allows both by IP
// literal; edit changes it.
func newNetEnv(t *testing.T, edit func(c *config.Network, srv *egresstest.Servers)) *netEnv {
	t.Helper()
	srv := egresstest.Start(t)
	c := srv.Config(srv.Allow()...)
	if edit != nil {
		edit(&c, srv)
	}
	svc, err := egress.New(c, egress.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := map[string]string{"TOKEN": "s3cr3t-t0ken-value"}[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	_, port, _ := strings.Cut(srv.HTTPHost(), ":")
	return &netEnv{srv: srv, svc: svc, sub: strings.NewReplacer("$HTTPS", "https://"+srv.HTTPSHost(), "$HTTP", "http://"+srv.HTTPHost(), "$PORT", port)}
}

// run runs code (with $HTTP, $HTTPS and $PORT replaced) with a new session
// of the policy, and fails unless the status is want.
func (n *netEnv) run(t *testing.T, w *Worker, code string, want Status) Result {
	t.Helper()
	return n.runWith(t, w, code, want, RunOptions{})
}

func (n *netEnv) runWith(t *testing.T, w *Worker, code string, want Status, opts RunOptions) Result {
	t.Helper()
	opts.Network = n.svc.Session("local", "w")
	r := w.Run(context.Background(), n.sub.Replace(code), opts)
	if r.Status != want {
		t.Fatalf("%.200s\n= %s; want %s\nstdout: %.2000s\nstderr: %.2000s", code, describe(r), want, r.Stdout, r.Stderr)
	}
	return r
}

func (n *netEnv) check(t *testing.T, w *Worker, code, want string) {
	t.Helper()
	if r := n.run(t, w, code, StatusOK); value(r) != want {
		t.Errorf("%.300s\n= %s\nwant %s\nstdout: %.1000s", code, value(r), want, r.Stdout)
	}
}

func TestFetchInJavaScript(t *testing.T) {
	n := newNetEnv(t, nil)
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	for _, c := range []struct{ name, code, want string }{
		{"json", `const r = await fetch("$HTTP/json"); [r.status, r.ok, r.statusText, r.url === "$HTTP/json", r.redirected, r.headers.get("Content-Type"), await r.json()]`,
			`[200, true, "OK", true, false, "application/json", {ok: true, items: [1, 2, 3], name: "ü"}]`},
		{"https text", `const t = await (await fetch("$HTTPS/text")).text(); t`, `"hello from the test server\n"`},
		{"binary", `const b = new Uint8Array(await (await fetch("$HTTPS/bytes?n=300")).arrayBuffer()); [b.length, b[0], b[255], b[256], b[299]]`, `[300, 0, 255, 0, 43]`},
		{"post string", `const e = await (await fetch("$HTTP/echo", {method: "POST", body: JSON.stringify({a: 1}), headers: {"Content-Type": "application/json", "X-A": "1"}})).json();
			[e.method, atob(e.body), e.headers["Content-Type"], e.headers["X-A"]]`, `["POST", "{\"a\":1}", ["application/json"], ["1"]]`},
		{"post bytes", `const e2 = await (await fetch(new Request("$HTTPS/echo", {method: "PUT", body: new Uint8Array([0, 1, 255])}))).json();
			[e2.method, Array.from(atob(e2.body), (c) => c.charCodeAt(0))]`, `["PUT", [0, 1, 255]]`},
		{"post form", `const e3 = await (await fetch("$HTTP/echo", {method: "POST", body: new URLSearchParams({q: "a b", n: "1"})})).json();
			[atob(e3.body), e3.headers["Content-Type"][0]]`, `["q=a+b&n=1", "application/x-www-form-urlencoded;charset=UTF-8"]`},
		{"status", `const nf = await fetch("$HTTP/status?code=404"); [nf.status, nf.ok, nf.statusText, await nf.text()]`, `[404, false, "Not Found", "Not Found"]`},
		{"redirect", `const rd = await fetch("$HTTP/redirect?to=" + encodeURIComponent("$HTTPS/text")); [rd.redirected, rd.url === "$HTTPS/text", rd.status]`, `[true, true, 200]`},
		{"manual", `const m = await fetch("$HTTP/redirect?to=/text", {redirect: "manual"}); [m.status, m.headers.get("location")]`, `[302, "/text"]`},
		{"headers", `const h = new Headers([["X-B", "2"], ["x-a", "1"]]); h.append("X-B", "3"); h.set("Set-Cookie", "a=1"); h.append("set-cookie", "b=2");
			[[...h], h.get("x-b"), h.getSetCookie(), h.has("X-A")]`,
			`[[["set-cookie", "a=1"], ["set-cookie", "b=2"], ["x-a", "1"], ["x-b", "2, 3"]], "2, 3", ["a=1", "b=2"], true]`},
		{"body once", `const r1 = await fetch("$HTTP/text"); const c1 = r1.clone(); await r1.text(); let used; try { await r1.text() } catch (e) { used = e.name }
			[used, r1.bodyUsed, await c1.text()]`, `["TypeError", true, "hello from the test server\n"]`},
		{"response", `const own = Response.json({x: 1}, {status: 201}); [own.status, own.headers.get("content-type"), await own.json()]`, `[201, "application/json", {x: 1}]`},
		{"immutable", `let imm; try { (await fetch("$HTTP/text")).headers.set("a", "b") } catch (e) { imm = e.name } imm`, `"TypeError"`},
		{"printed", `await fetch("$HTTP/text")`, `Response {status: 200, ok: true, url: "$HTTP/text"}`},
		// Request's fast way with simple URLs gives what the full URL parser gives.
		{"urls", `["https://a.example", "http://A.example/x", "https://a.example:443/", "http://a.example:80/p", "https://a.example:8080/%2e/x",
			"https://a.example/./x", "https://a.example/b/../c?q=1&r=%20", "https://1.2.3.4/x", "https://01.2.3.4/", "https://0x7f.1/", "http://a.b.c.1/",
			"https://a-b.example/x?y=z?w", "https://xn--bcher-kva.example/", "https://b\u00fccher.example/", "https://a.example/x y", "http://a.example:65536/",
			"https://a.example/x#frag", "https://a.example\\x", "https://a.example./", "https://-a.example/", "https://a.example/~x!$&'()*+,;=:@"]
			.filter((u) => { let want; try { want = new URL(u).href } catch (e) { want = "invalid" } let got; try { got = new Request(u).url } catch (e) { got = "invalid" } return got !== want })`, `[]`},
	} {
		n.check(t, w, c.code, n.sub.Replace(c.want))
	}
}

// TestFetchesRunConcurrently: five fetches of Promise.all are in flight on
// the host at once: the server answers each only once all five are there.
// (bench/network measures the time: about one answer's, not five.)
func TestFetchesRunConcurrently(t *testing.T) {
	n := newNetEnv(t, nil)
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	n.check(t, w, `await Promise.all([1, 2, 3, 4, 5].map(() => fetch("$HTTPS/barrier?n=5&key=a").then((r) => r.text())))`,
		`["together", "together", "together", "together", "together"]`)
	// Timers go on while requests are in flight.
	n.check(t, w, `const order = []; setTimeout(() => order.push("timer"), 10);
		await fetch("$HTTP/slow?ms=300").then(() => order.push("fetch")); order`, `["timer", "fetch"]`)
}

func TestPythonHTTP(t *testing.T) {
	n := newNetEnv(t, nil)
	w := newPyWorker(t, WorkerOptions{})
	for _, c := range []struct{ name, code, want string }{
		{"urlopen json", `import json, urllib.request
r = urllib.request.urlopen("$HTTP/json")
(r.status, r.reason, r.headers["Content-Type"], json.load(r))`, `(200, 'OK', 'application/json', {'ok': True, 'items': [1, 2, 3], 'name': 'ü'})`},
		{"urlopen https post", `req = urllib.request.Request("$HTTPS/echo", data=b"\x00\xffbin", headers={"X-A": "1"}, method="PUT")
e = json.load(urllib.request.urlopen(req))
(e["method"], e["body"], e["headers"]["X-A"])`, `('PUT', 'AP9iaW4=', ['1'])`},
		{"urlopen redirect", `r = urllib.request.urlopen("$HTTP/redirect?to=/text")
(r.url, r.read())`, `('$HTTP/text', b'hello from the test server\n')`},
		{"http.client", `import http.client
c = http.client.HTTPSConnection("127.0.0.1", int("$HTTPS".rsplit(":", 1)[1]), timeout=10)
c.request("POST", "/echo?x=1", body="é", headers={"Content-Type": "text/plain"})
r = c.getresponse()
e = json.loads(r.read())
c.request("GET", "/bytes?n=5")
r2 = c.getresponse()
(r.status, e["query"], e["body"], r2.read())`, `(200, 'x=1', '6Q==', b'\x00\x01\x02\x03\x04')`},
		{"http.client by parts", `c = http.client.HTTPConnection("127.0.0.1", $PORT)
c.putrequest("POST", "/echo")
c.putheader("Content-Length", "6")
c.endheaders()
c.send(b"abc")
c.send(b"def")
json.loads(c.getresponse().read())["body"]`, `'YWJjZGVm'`},
		{"requests", `import requests
r = requests.get("$HTTP/json", params={"a": "b c"})
(r.status_code, r.ok, r.json(), r.headers["content-type"], r.url)`, `(200, True, {'ok': True, 'items': [1, 2, 3], 'name': 'ü'}, 'application/json', '$HTTP/json?a=b+c')`},
		{"requests post", `e = requests.post("$HTTPS/echo", json={"a": [1]}, headers={"X-B": "2"}).json()
(e["method"], e["body"], e["headers"]["Content-Type"], e["headers"]["X-B"])`, `('POST', 'eyJhIjogWzFdfQ==', ['application/json'], ['2'])`},
		{"requests binary", `b = requests.get("$HTTPS/bytes?n=300").content
(len(b), b[255], b[299])`, `(300, 255, 43)`},
		{"requests stream", `r = requests.get("$HTTP/bytes?n=100000", stream=True)
sum(len(c) for c in r.iter_content(8192))`, `100000`},
		{"requests redirects", `r = requests.get("$HTTP/redirect", params={"to": "$HTTPS/text"})
(r.status_code, r.url, [h.status_code for h in r.history], r.text)`, `(200, '$HTTPS/text', [302], 'hello from the test server\n')`},
		{"requests no redirect", `requests.get("$HTTP/redirect?to=/text", allow_redirects=False).status_code`, `302`},
		{"requests session", `s = requests.Session()
s.headers["X-S"] = "1"
s.get("$HTTP/echo").json()["headers"]["X-S"]`, `['1']`},
		{"requests status", `r = requests.get("$HTTP/status?code=418")
(r.status_code, r.reason, r.ok)`, `(418, "I'm a teapot", False)`},
	} {
		n.check(t, w, c.code, n.sub.Replace(c.want))
	}
}

// TestRefusalsAreExceptions: what the policy refuses is an ordinary
// exception with the reason and the key, in both guests.
func TestRefusalsAreExceptions(t *testing.T) {
	n := newNetEnv(t, func(c *config.Network, srv *egresstest.Servers) {
		_, port, _ := strings.Cut(srv.HTTPHost(), ":")
		c.Allow = append(c.Allow, "http://localhost:"+port)
	})
	js := newWorker(t, testEngine(t, true), WorkerOptions{})
	py := newPyWorker(t, WorkerOptions{})
	for _, c := range []struct{ url, says string }{
		{"https://evil.example/", "fetch to evil.example is not allowed (network.allow)"},
		{"https://127.0.0.1:1/", "127.0.0.1:1 is not allowed: 127.0.0.1 is allowed on other ports only (network.allow)"},
		{"http://localhost:$PORT/text", "fetch to localhost:$PORT is not allowed: localhost resolves to 127.0.0.1, a loopback address"},
		{"$HTTP/redirect?to=https%3A%2F%2Fevil.example%2F", "redirected to evil.example, which is not allowed (network.allow)"},
		{"http://0x7f.0.0.2:$PORT/", "fetch to 127.0.0.2:$PORT is not allowed (network.allow)"},
		{"http://[::ffff:127.0.0.3]:$PORT/", "fetch to 127.0.0.3:$PORT is not allowed (network.allow)"},
		{"gopher://127.0.0.1:$PORT/", "execd fetches http and https URLs only"},
	} {
		says := n.sub.Replace(c.says)
		r := n.run(t, js, `let m; try { await fetch("`+c.url+`"); m = "fetched" } catch (e) { m = e.name + ": " + e.message } m`, StatusOK)
		if !strings.HasPrefix(value(r), `"TypeError: `) || !strings.Contains(value(r), says) {
			t.Errorf("JS %s: %s; want a TypeError that says %q", c.url, value(r), says)
		}
		if strings.HasPrefix(c.url, "http://0x7f") || strings.HasPrefix(c.url, "gopher") {
			continue // Python's URL parsers take these otherwise (urllib: no handler for gopher)
		}
		r = n.run(t, py, `import urllib.request, urllib.error, requests
out = []
try:
    urllib.request.urlopen("`+c.url+`")
except urllib.error.URLError as e:
    out.append(str(e.reason))
try:
    requests.get("`+c.url+`")
except requests.ConnectionError as e:
    out.append(str(e))
out`, StatusOK)
		if strings.HasPrefix(c.url, "$HTTP/redirect") { // urllib and requests follow redirects themselves: the hop is a request of its own
			says = "fetch to evil.example is not allowed (network.allow)"
		}
		if !strings.Contains(value(r), says) || strings.Count(value(r), "not allowed") != 2 {
			t.Errorf("Python %s: %s; want URLError and ConnectionError that say %q", c.url, value(r), says)
		}
	}
	// Schemes that are not the network's: JavaScript refuses them; Python's
	// urllib handles file: and data: without the network, as always.
	for _, u := range []string{"file:///etc/passwd", "data:text/plain,hello", "blob:x", "ftp://" + n.srv.HTTPHost() + "/"} {
		r := n.run(t, js, `let m; try { await fetch("`+u+`"); m = "fetched" } catch (e) { m = e.name } m`, StatusOK)
		if value(r) != `"TypeError"` {
			t.Errorf("JS %s: %s", u, value(r))
		}
	}
	n.check(t, js, `let m; try { await fetch("http://u:p@127.0.0.1:$PORT/") } catch (e) { m = e.message } m`, `"fetch: a URL with credentials (user:password@host) cannot be fetched; send them in a header"`)
	n.check(t, py, `import http.client
c = http.client.HTTPConnection("127.0.0.1", 1)
try:
    c.request("GET", "/")
    m = "sent"
except OSError as e:
    m = str(e)
m`, `'fetch to 127.0.0.1:1 is not allowed: 127.0.0.1 is allowed on other ports only (network.allow)'`)
	if got := n.srv.Requests.Load(); got != 3 {
		t.Errorf("the servers received %d requests; want only the three redirects (JavaScript's, urllib's, requests')", got)
	}
}

func TestNoNetwork(t *testing.T) {
	js := newWorker(t, testEngine(t, true), WorkerOptions{})
	check(t, js, "fetch off", `let m; try { await fetch("https://example.com/") } catch (e) { m = e.name + ": " + e.message } m`,
		`"TypeError: fetch is not available: this sandbox has no network access"`)
	check(t, js, "env off", `Object.keys(execd.env).length`, "0")
	py := newPyWorker(t, WorkerOptions{})
	check(t, py, "urllib off", "import urllib.request\ntry:\n    urllib.request.urlopen('https://example.com/')\nexcept OSError as e:\n    m = str(e)\nm",
		`'<urlopen error fetch is not available: this sandbox has no network access>'`)
	n := newNetEnv(t, func(c *config.Network, _ *egresstest.Servers) { c.Allow = nil })
	n.check(t, js, `let m; try { await fetch("$HTTPS/text") } catch (e) { m = e.message } m`,
		n.sub.Replace(`"fetch to `+n.srv.HTTPSHost()+` is not allowed: this sandbox has no network access (network.allow is empty)"`))
}

func TestSecretsInTheGuests(t *testing.T) {
	n := newNetEnv(t, func(c *config.Network, srv *egresstest.Servers) {
		c.Secrets = []config.Secret{{Name: "TOKEN", Env: "TOKEN", Hosts: []string{srv.HTTPSHost()}}}
	})
	js := newWorker(t, testEngine(t, true), WorkerOptions{})
	n.check(t, js, `execd.env.TOKEN`, `"__EXECD_SECRET_TOKEN__"`)
	n.check(t, js, `const e = await (await fetch("$HTTPS/echo", {headers: {Authorization: "Bearer " + execd.env.TOKEN}})).json(); e.headers.Authorization`,
		`["Bearer __EXECD_SECRET_TOKEN__"]`)
	n.check(t, js, `let m; try { await fetch("$HTTP/echo", {headers: {Authorization: "Bearer " + execd.env.TOKEN}}) } catch (e) { m = e.message } m`,
		n.sub.Replace(`"fetch to `+n.srv.HTTPHost()+` is not allowed: it carries secret TOKEN, which may be sent only to its hosts (network.secrets)"`))
	py := newPyWorker(t, WorkerOptions{})
	n.check(t, py, `import os, requests
r = requests.get("$HTTPS/echo", headers={"Authorization": "Bearer " + os.environ["TOKEN"]})
(os.environ["TOKEN"], r.json()["headers"]["Authorization"], r.headers["X-Echo-Authorization"])`,
		`('__EXECD_SECRET_TOKEN__', ['Bearer __EXECD_SECRET_TOKEN__'], 'Bearer __EXECD_SECRET_TOKEN__')`)
	n.check(t, py, `r = requests.get("$HTTPS/echo", auth=("me", os.environ["TOKEN"]))
r.json()["headers"]["Authorization"]`, `['Basic bWU6X19FWEVDRF9TRUNSRVRfVE9LRU5fXw==']`)
	got := n.srv.Authorizations()
	want := []string{"Bearer s3cr3t-t0ken-value", "Bearer s3cr3t-t0ken-value", "Basic bWU6czNjcjN0LXQwa2VuLXZhbHVl"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the server received %q; want %q", got, want)
	}
	// A run without the policy's secrets sees none.
	r := js.Run(context.Background(), `Object.keys(execd.env).length`, RunOptions{})
	if value(r) != "0" {
		t.Errorf("env without network: %s", describe(r))
	}
	r = py.Run(context.Background(), `"TOKEN" in os.environ`, RunOptions{})
	if value(r) != "False" {
		t.Errorf("os.environ without network: %s", describe(r))
	}
}

func TestNetworkLimitsInTheGuests(t *testing.T) {
	n := newNetEnv(t, func(c *config.Network, _ *egresstest.Servers) {
		c.MaxResponseBytes = 100 << 10
		c.MaxRequestsPerRun = 3
	})
	js := newWorker(t, testEngine(t, true), WorkerOptions{})
	n.check(t, js, `let m; try { await fetch("$HTTP/stream") } catch (e) { m = e.message } m`,
		n.sub.Replace(`"fetch to `+n.srv.HTTPHost()+` failed: the response is larger than 102400 bytes (network.max_response_bytes)"`))
	n.check(t, js, `const rs = []; for (let i = 0; i < 4; i++) { try { await fetch("$HTTP/text"); rs.push("ok") } catch (e) { rs.push(e.message) } } rs`,
		n.sub.Replace(`["ok", "ok", "ok", "fetch to `+n.srv.HTTPHost()+` is not allowed: this run has made 3 requests, the most one run may make (network.max_requests_per_run)"]`))
	py := newPyWorker(t, WorkerOptions{})
	n.check(t, py, `import requests
try:
    requests.get("$HTTPS/bytes?n=200000")
except requests.ConnectionError as e:
    m = str(e)
m`, n.sub.Replace(`'fetch to `+n.srv.HTTPSHost()+` failed: the response is larger than 102400 bytes (network.max_response_bytes)'`))
	// More at once than network.max_concurrent_requests: the others wait their turn.
	m := newNetEnv(t, func(c *config.Network, _ *egresstest.Servers) { c.MaxConcurrentRequests = 4 })
	m.check(t, js, `const all = []; for (let i = 0; i < 40; i++) all.push(fetch("$HTTP/slow?ms=20").then((r) => r.text(), (e) => e.message));
		const got = await Promise.all(all); [got.length, got.every((t) => t === "slow")]`, "[40, true]")
	if got := m.srv.MaxInFlight.Load(); got > 4 || got < 2 {
		t.Errorf("%d requests were in flight at once; want at most network.max_concurrent_requests (4), and more than one", got)
	}
}

// TestHostileRequestsFromTheGuests: what code could try to get past the
// policy with.
func TestHostileRequestsFromTheGuests(t *testing.T) {
	n := newNetEnv(t, nil)
	js := newWorker(t, testEngine(t, true), WorkerOptions{})
	// CR/LF in header values: the guest's own Headers refuse it; the host too.
	n.check(t, js, `let m; try { await fetch("$HTTP/echo", {headers: {"X-A": "a\r\nX-Injected: 1"}}) } catch (e) { m = e.name + ": " + e.message } m`,
		`"TypeError: Headers: the value of x-a has a line break or a NUL character"`)
	n.check(t, js, `let m2; try { await fetch("$HTTP/echo", {headers: {"X-A\r\nB": "a"}}) } catch (e) { m2 = e.name } m2`, `"TypeError"`)
	n.check(t, js, `const hs = {}; for (let i = 0; i < 1000; i++) hs["x-h-" + i] = "v"; let m3; try { await fetch("$HTTP/echo", {headers: hs}) } catch (e) { m3 = e.message } m3`,
		n.sub.Replace(`"fetch to `+n.srv.HTTPHost()+` is not allowed: it has 1000 headers, more than 100"`))
	// The same listed address in other spellings is that address; a Host header does not change where it goes.
	n.check(t, js, `const e = await (await fetch("http://2130706433:$PORT/echo", {headers: {Host: "evil.example"}})).json(); e.host`, n.sub.Replace(`"127.0.0.1:$PORT"`))
	n.check(t, js, `(await fetch("http://0177.0.0.1:$PORT/text")).status`, "200")
	n.check(t, js, `(await fetch("http://[::ffff:127.0.0.1]:$PORT/text")).status`, "200")
	py := newPyWorker(t, WorkerOptions{})
	n.check(t, py, `import http.client
c = http.client.HTTPConnection("127.0.0.1", $PORT)
try:
    c.request("GET", "/echo", headers={"X-A": "a\r\nX-Injected: 1"})
except ValueError as e:
    m = str(e)
m`, `"Invalid header value b'a\\r\\nX-Injected: 1'"`)
	n.check(t, py, `try:
    c = http.client.HTTPConnection("127.0.0.1", $PORT)
    c.request("GET", "/echo", headers={"X-A": "a\r\n\tfolded"})
    m = "sent"
except OSError as e:
    m = str(e)
m`, n.sub.Replace(`'fetch to `+n.srv.HTTPHost()+` is not allowed: header X-A has a line break or a control character in its value'`))
	n.check(t, py, `import urllib.request
urllib.request.urlopen("http://2130706433:$PORT/text").status`, "200")
}

// TestStoppingEndsTheRequests: a timeout during a slow response ends the
// run as a timeout, with the state kept, and aborts the request at once;
// code that swallows the stop cannot keep a request alive; nothing is open
// after the run.
func TestStoppingEndsTheRequests(t *testing.T) {
	n := newNetEnv(t, nil)
	for _, lang := range []string{"javascript", "python"} {
		w := langWorker(t, testEngine(t, true), lang, WorkerOptions{})
		set, slow, get := `var kept = 42`, `await fetch("$HTTP/slow?ms=120000")`, `kept`
		if lang == "python" {
			set, slow, get = `import requests
kept = 42`, `requests.get("$HTTP/slow?ms=120000")`, `kept`
		}
		n.run(t, w, set, StatusOK)
		aborted := n.srv.Aborted.Load()
		r := n.runWith(t, w, slow, StatusTimeout, RunOptions{Timeout: time.Second})
		if r.Discontinuous() || r.Duration > 60*time.Second {
			t.Errorf("%s: %s after %s", lang, describe(r), r.Duration)
		}
		if !n.srv.WaitIdle(10 * time.Second) {
			t.Errorf("%s: a request is still in flight after the run", lang)
		}
		if n.srv.Aborted.Load() != aborted+1 {
			t.Errorf("%s: the server did not see the request aborted", lang)
		}
		if r := n.run(t, w, get, StatusOK); value(r) != "42" {
			t.Errorf("%s: after the timeout: %s", lang, describe(r))
		}
		t.Logf("%s: a 1 s timeout during a slow response ended the run after %s", lang, r.Duration)
	}
	// Python code that swallows every stop and tries again: each request
	// ends at the stop, and none outlives the run.
	py := newPyWorker(t, WorkerOptions{})
	r := n.runWith(t, py, `import requests
while True:
    try:
        requests.get("$HTTP/hang")
    except BaseException:
        pass`, StatusTimeout, RunOptions{Timeout: 500 * time.Millisecond})
	if !n.srv.WaitIdle(10 * time.Second) {
		t.Errorf("a request of the stubborn code is still in flight after the run (%s)", describe(r))
	}
	// JavaScript code that starts a request and forgets it, then fails: the
	// request ends with the run.
	js := newWorker(t, testEngine(t, true), WorkerOptions{})
	n.run(t, js, `fetch("$HTTP/hang").catch(() => {}); throw new Error("gone")`, StatusError)
	if !n.srv.WaitIdle(10 * time.Second) {
		t.Error("a forgotten request is still in flight after the run")
	}
	// An abort the code asks for ends the host's request.
	aborted := n.srv.Aborted.Load()
	n.check(t, js, `const ac = new AbortController(); const f = fetch("$HTTP/hang", {signal: ac.signal}); setTimeout(() => ac.abort(), 50);
		let m; try { await f } catch (e) { m = e.name } m`, `"AbortError"`)
	// /hang never answers: a request that went on keeps the server busy.
	// The forgotten request above may reach the server only now and count
	// as aborted too, so the count is at least one more.
	if !n.srv.WaitIdle(10 * time.Second) {
		t.Error("the aborted request went on")
	} else if n.srv.Aborted.Load() < aborted+1 {
		t.Error("the server did not see the aborted request end")
	}
	n.check(t, js, `let t; try { await fetch("$HTTP/hang", {signal: AbortSignal.timeout(100)}) } catch (e) { t = e.name } t`, `"TimeoutError"`)
}

// TestImageAfterTheNetwork: a run that used the network leaves nothing
// open: the interpreter can be imaged and restored, variables and all.
func TestImageAfterTheNetwork(t *testing.T) {
	n := newNetEnv(t, nil)
	e := testEngine(t, true)
	for _, lang := range []string{"javascript", "python"} {
		w := langWorker(t, e, lang, WorkerOptions{})
		code, want := `var got = await (await fetch("$HTTP/text")).text(); got.length`, "27"
		if lang == "python" {
			code = `import requests
got = requests.get("$HTTP/text").text
len(got)`
		}
		if r := n.run(t, w, code, StatusOK); value(r) != want || len(r.Network) != 1 || r.Network[0].Requests != 1 {
			t.Fatalf("%s: %s, network %v", lang, describe(r), r.Network)
		}
		w2 := restore(t, e, snapshot(t, w), false)
		if lang == "python" {
			n.check(t, w2, `len(got), requests.get("$HTTP/text").status_code`, "(27, 200)")
		} else {
			n.check(t, w2, `[got.length, (await fetch("$HTTP/text")).status]`, "[27, 200]")
		}
	}
}
