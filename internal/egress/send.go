package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Request is one request of the code.
type Request struct {
	Method string
	URL    string
	Header [][2]string
	// Body is what is sent; BodySize its size as the code gave it. The
	// worker leaves Body nil when BodySize is over MaxRequestBytes (the
	// request is refused anyway: it need not copy it).
	Body     []byte
	BodySize int64
	// Timeout is the code's own limit, shorter than network.request_timeout
	// to count; zero: none.
	Timeout time.Duration
	// Redirect: "follow" (or ""), the host follows them; "manual", a
	// redirect is the response; "error", a redirect is an error.
	Redirect string
}

// Response is what came back, with every secret's value the code must not
// see put back as its placeholder.
type Response struct {
	Status     int
	StatusText string // the reason phrase ("Not Found")
	URL        string // the final URL, after the redirects followed
	Redirected bool
	Header     [][2]string // sorted by name
	Body       []byte
}

// Limits on a request's headers (the code's; the host adds its own).
const (
	maxRequestHeaders     = 100
	maxRequestHeaderBytes = 64 << 10
)

// controlled are the request headers the host sets itself: the code's are
// dropped. Host is the URL's (a Host of the code's choosing would reach
// another site behind the same address than the one the policy allowed);
// the framing headers are the transport's; Accept-Encoding is left to the
// transport, which then decodes gzip itself, so that limits count, and
// redaction sees, the bytes the code gets.
var controlled = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Proxy-Connection": true, "Proxy-Authorization": true,
	"Proxy-Authenticate": true, "Accept-Encoding": true, "Expect": true, "Http2-Settings": true,
}

// Do sends r under the session's policy and returns the response, or an
// *Error that says why there is none. It returns soon after ctx ends.
func (x *Session) Do(ctx context.Context, r *Request) (*Response, error) {
	start := time.Now()
	u, t, perr := parseTarget(r.URL)
	st := Start{Principal: x.principal, Workspace: x.workspace, Method: clip(r.Method, 16), Host: t.host, Port: t.port}
	end := func(Done) {}
	if x.s.obs != nil {
		ctx, end = x.s.obs.EgressStart(ctx, st)
	}
	var ex exchange
	resp, err := x.do(ctx, r, u, t, perr, &ex)
	d := Done{Outcome: outcomeOf(err), Status: ex.status, Host: ex.host, Redirects: ex.redirects,
		BytesOut: ex.out, BytesIn: ex.in, Duration: time.Since(start)}
	if err != nil {
		d.Reason = err.Reason
	}
	end(d)
	x.record(st, d, err)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// exchange is what one request did, for its report.
type exchange struct {
	status    int
	host      string
	redirects int
	out, in   int64
	// undo: pairs of what was sent and what the code wrote, for the values
	// the response may echo in a form the redaction does not know (the
	// base64 of a Basic Authorization with a secret in it).
	undo []string
}

func (x *Session) do(ctx context.Context, r *Request, u *url.URL, t target, perr *Error, ex *exchange) (*Response, *Error) {
	p, cfg := x.p, x.s.cfg
	x.mu.Lock()
	x.requests++
	over := x.requests > cfg.MaxRequestsPerRun
	x.mu.Unlock()
	if over {
		return nil, refused(ReasonRequests, "fetch to %s is not allowed: this run has made %d requests, the most one run may make (network.max_requests_per_run)", orURL(t), cfg.MaxRequestsPerRun)
	}
	if perr != nil {
		return nil, perr
	}
	if err := p.check(t); err != nil {
		return nil, err
	}
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = http.MethodGet
	}
	if !validHeaderName(method) || len(method) > 32 {
		return nil, refused(ReasonHeader, "fetch to %s is not allowed: %q is not an HTTP method", t.hostPort(), clip(r.Method, 32))
	}
	switch method {
	case "CONNECT", "TRACE", "TRACK":
		return nil, refused(ReasonHeader, "fetch to %s is not allowed: the %s method is not", t.hostPort(), method)
	}
	if r.BodySize > cfg.MaxRequestBytes || int64(len(r.Body)) > cfg.MaxRequestBytes {
		return nil, refused(ReasonSize, "fetch to %s is not allowed: its body of %d bytes is larger than %d (network.max_request_bytes)", t.hostPort(), max(r.BodySize, int64(len(r.Body))), cfg.MaxRequestBytes)
	}
	hdr, herr := cleanHeaders(r.Header, t)
	if herr != nil {
		return nil, herr
	}
	timeout, own := cfg.RequestTimeout.Duration, false
	if r.Timeout > 0 && r.Timeout < timeout {
		timeout, own = r.Timeout, true
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	first, body := t, r.Body
	for hop := 0; ; hop++ {
		resp, err := x.send(ctx, method, u, t, first, hdr, body, ex)
		if err != nil {
			return nil, x.transportError(ctx, err, t, timeout, own, hop > 0)
		}
		ex.status, ex.host = resp.StatusCode, t.hostPort()
		x.reach(t.hostPort())
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" || r.Redirect == "manual" {
			return x.finish(ctx, resp, u, t, hop > 0, timeout, own, ex)
		}
		discard(resp, ex)
		if r.Redirect == "error" {
			return nil, refused(ReasonRedirect, "fetch to %s was redirected, and the request said redirect: \"error\"", first.hostPort())
		}
		if hop == cfg.MaxRedirects {
			return nil, refused(ReasonRedirect, "fetch to %s was redirected more than %d times (network.max_redirects)", first.hostPort(), cfg.MaxRedirects)
		}
		next, err := u.Parse(loc)
		if err != nil {
			return nil, failed(KindFailed, ReasonRedirect, "fetch to %s was redirected to an invalid URL", t.hostPort())
		}
		nu, nt, perr := parseTarget(next.String())
		if perr != nil {
			return nil, refused(perr.Reason, "fetch to %s was redirected to a URL that is not allowed: %s", first.hostPort(), perr.Message)
		}
		if err := p.check(nt); err != nil {
			return nil, refused(err.Reason, "fetch to %s was redirected to %s, which is not allowed (%s)", first.hostPort(), nt.hostPort(), p.allowKey)
		}
		if sec := p.secrets.leakIn(nu.String(), nt); sec != nil {
			return nil, refused(ReasonSecret, "fetch to %s was redirected to %s with the value of secret %s in the URL, which may be sent only to its hosts (%s)", first.hostPort(), nt.hostPort(), sec.name, p.secretsKey)
		}
		// The method and body a redirect keeps (RFC 9110 section 15.4,
		// the Fetch Standard's HTTP-redirect fetch).
		if code := resp.StatusCode; code == 303 && method != http.MethodHead || (code == 301 || code == 302) && method == http.MethodPost {
			method, body = http.MethodGet, nil
			for _, k := range []string{"Content-Type", "Content-Encoding", "Content-Language", "Content-Location"} {
				delete(hdr, k)
			}
		}
		if nt.scheme != first.scheme || nt.host != first.host || nt.port != first.port {
			// Credentials the code set stay with their origin.
			delete(hdr, "Authorization")
			delete(hdr, "Cookie")
		}
		u, t = nu, nt
		ex.redirects++
	}
}

// orURL is the target for a message, or "a URL" when it did not parse.
func orURL(t target) string {
	if t.host == "" {
		return "a URL"
	}
	return t.hostPort()
}

// check is the allow list's verdict on t.
func (p *policy) check(t target) *Error {
	if p.allow.allows(t) {
		return nil
	}
	if len(p.allow) == 0 {
		return refused(ReasonHost, "fetch to %s is not allowed: this sandbox has no network access (%s is empty)", t.hostPort(), p.allowKey)
	}
	switch p.allow.why(t) {
	case "":
		return refused(ReasonHost, "fetch to %s is not allowed (%s)", t.hostPort(), p.allowKey)
	case "not on this port":
		return refused(ReasonPort, "fetch to %s is not allowed: %s is allowed on other ports only (%s)", t.hostPort(), t.host, p.allowKey)
	default:
		return refused(ReasonPort, "fetch to http://%s is not allowed: plain http is allowed only where an entry says http:// (%s)", t.hostPort(), p.allowKey)
	}
}

// cleanHeaders checks the code's headers and keeps those the host does
// not set itself, by canonical name, in order.
func cleanHeaders(in [][2]string, t target) (http.Header, *Error) {
	if len(in) > maxRequestHeaders {
		return nil, refused(ReasonHeader, "fetch to %s is not allowed: it has %d headers, more than %d", t.hostPort(), len(in), maxRequestHeaders)
	}
	h := http.Header{}
	size := 0
	for _, kv := range in {
		size += len(kv[0]) + len(kv[1]) + 4
		if size > maxRequestHeaderBytes {
			return nil, refused(ReasonHeader, "fetch to %s is not allowed: its headers are larger than %d bytes", t.hostPort(), maxRequestHeaderBytes)
		}
		if !validHeaderName(kv[0]) {
			return nil, refused(ReasonHeader, "fetch to %s is not allowed: %q is not a header name", t.hostPort(), clip(kv[0], 40))
		}
		v := strings.Trim(kv[1], " \t")
		if !validHeaderValue(v) {
			return nil, refused(ReasonHeader, "fetch to %s is not allowed: header %s has a line break or a control character in its value", t.hostPort(), clip(kv[0], 40))
		}
		k := textproto.CanonicalMIMEHeaderKey(kv[0])
		if controlled[k] {
			continue
		}
		h[k] = append(h[k], v)
	}
	return h, nil
}

// send makes one hop: the secrets substituted for t, the budget taken,
// the request sent.
func (x *Session) send(ctx context.Context, method string, u *url.URL, t, first target, hdr http.Header, body []byte, ex *exchange) (*http.Response, error) {
	p := x.p
	ss := &p.secrets
	path, bad := ss.substitute(u.EscapedPath(), t, url.PathEscape)
	var query string
	if bad == nil {
		query, bad = ss.substitute(u.RawQuery, t, url.QueryEscape)
	}
	if bad != nil {
		return nil, x.secretRefusal(bad, t, first)
	}
	// The canonical host: what the policy checked is what is dialled.
	raw := t.scheme + "://" + t.hostPort() + path
	if query != "" || u.ForceQuery {
		raw += "?" + query
	}
	out := http.Header{}
	size := int64(len(method) + len(raw) + 12)
	for k, vs := range hdr {
		for _, v := range vs {
			sv, bad := ss.substituteHeader(k, v, t)
			if bad != nil {
				return nil, x.secretRefusal(bad, t, first)
			}
			if sv != v && (k == "Authorization" || k == "Proxy-Authorization") && len(v) > 6 && strings.EqualFold(v[:6], "basic ") {
				ex.undo = append(ex.undo, strings.TrimSpace(sv[6:]), strings.TrimSpace(v[6:]))
			}
			out[k] = append(out[k], sv)
			size += int64(len(k) + len(sv) + 4)
		}
	}
	for _, sec := range ss.list {
		if sec.header != "" && sec.hosts.allows(t) {
			v := strings.ReplaceAll(sec.format, "{value}", sec.value)
			out[sec.header] = []string{v}
			size += int64(len(sec.header) + len(v) + 4)
		}
	}
	// The value of a secret the code should not have, in what goes to a
	// host outside its hosts: refused, however it got there.
	if sec := ss.leakIn(raw, t); sec != nil {
		return nil, x.leakRefusal(sec, t)
	}
	for _, vs := range out {
		for _, v := range vs {
			if sec := ss.leakIn(v, t); sec != nil {
				return nil, x.leakRefusal(sec, t)
			}
		}
	}
	if sec := ss.leakInBytes(body, t); sec != nil {
		return nil, x.leakRefusal(sec, t)
	}
	size += int64(len(body))
	if ok, wait := x.s.budgets.of(x.principal, time.Now()).take(size, time.Now()); !ok {
		return nil, x.budgetRefusal(t, wait)
	}
	ex.out += size
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, raw, rd)
	if err != nil {
		return nil, failed(KindFailed, ReasonConnect, "fetch to %s failed: the request cannot be made (%s)", t.hostPort(), ss.redactString(err.Error()))
	}
	req.Header = out
	if body != nil {
		req.ContentLength = int64(len(body))
	}
	return p.client.Do(req)
}

func (x *Session) secretRefusal(sec *secret, t, first target) *Error {
	if t != first {
		return refused(ReasonSecret, "fetch to %s was redirected to %s, which the request's secret %s may not be sent to (%s)", first.hostPort(), t.hostPort(), sec.name, x.p.secretsKey)
	}
	return refused(ReasonSecret, "fetch to %s is not allowed: it carries secret %s, which may be sent only to its hosts (%s)", t.hostPort(), sec.name, x.p.secretsKey)
}

func (x *Session) leakRefusal(sec *secret, t target) *Error {
	return refused(ReasonSecret, "fetch to %s is not allowed: it carries the value of secret %s, which may be sent only to its hosts (%s)", t.hostPort(), sec.name, x.p.secretsKey)
}

func (x *Session) budgetRefusal(t target, wait time.Duration) *Error {
	return refused(ReasonBudget, "fetch to %s is not allowed: the network budget of %d bytes a minute is used up, for about %s more (network.bytes_per_minute)", t.hostPort(), x.s.cfg.BytesPerMinute, wait.Round(time.Second))
}

func isRedirect(code int) bool {
	switch code {
	case 301, 302, 303, 307, 308:
		return true
	}
	return false
}

// discard reads what is left of a redirect's body (a little: a large one
// is cut, and the connection then closed) and closes it.
func discard(resp *http.Response, ex *exchange) {
	n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	ex.in += n
	resp.Body.Close()
}

// finish reads the final response's body within the limits and redacts it.
func (x *Session) finish(ctx context.Context, resp *http.Response, u *url.URL, t target, redirected bool, timeout time.Duration, own bool, ex *exchange) (*Response, *Error) {
	defer resp.Body.Close()
	p, cfg := x.p, x.s.cfg
	limit := cfg.MaxResponseBytes
	buf := bytes.NewBuffer(make([]byte, 0, min(max(resp.ContentLength, 0), limit, 1<<20)+1))
	b := x.s.budgets.of(x.principal, time.Now())
	chunk := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(chunk)
		if n > 0 {
			ex.in += int64(n)
			if int64(buf.Len()+n) > limit {
				return nil, failed(KindFailed, ReasonSize, "fetch to %s failed: the response is larger than %d bytes (network.max_response_bytes)", t.hostPort(), limit)
			}
			if ok, wait := b.take(int64(n), time.Now()); !ok {
				return nil, failed(KindFailed, ReasonBudget, "fetch to %s failed: the network budget of %d bytes a minute ran out during the response, for about %s more (network.bytes_per_minute)", t.hostPort(), cfg.BytesPerMinute, wait.Round(time.Second))
			}
			buf.Write(chunk[:n])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, x.transportError(ctx, err, t, timeout, own, redirected)
		}
	}
	redact := p.secrets.redactString
	if len(ex.undo) > 0 {
		undo := strings.NewReplacer(ex.undo...)
		redact = func(s string) string { return undo.Replace(p.secrets.redactString(s)) }
	}
	out := &Response{Status: resp.StatusCode, StatusText: http.StatusText(resp.StatusCode),
		URL: redact(u.String()), Redirected: redirected}
	if code, text, ok := strings.Cut(resp.Status, " "); ok && code == strconv.Itoa(resp.StatusCode) {
		out.StatusText = redact(text)
	}
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range resp.Header[k] {
			out.Header = append(out.Header, [2]string{k, redact(v)})
		}
	}
	out.Body = p.secrets.redactBytes(buf.Bytes())
	if len(ex.undo) > 0 {
		out.Body = []byte(strings.NewReplacer(ex.undo...).Replace(string(out.Body)))
	}
	return out, nil
}

// transportError words what the transport said, without the URL (which
// net/http quotes whole).
func (x *Session) transportError(ctx context.Context, err error, t target, timeout time.Duration, own, redirected bool) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	hp := t.hostPort()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if own {
			return failed(KindTimeout, ReasonTimeout, "fetch to %s timed out after %s (the request's own timeout)", hp, timeout)
		}
		return failed(KindTimeout, ReasonTimeout, "fetch to %s timed out after %s (network.request_timeout)", hp, timeout)
	}
	if ctx.Err() != nil {
		return failed(KindAborted, ReasonAborted, "fetch to %s was aborted", hp)
	}
	if ae, ok := errAddress(err); ok {
		how := "through a redirect, "
		if !redirected {
			how = ""
		}
		if t.ip.IsValid() {
			return refused(ReasonAddress, "fetch to %s is not allowed: %sit is %s, which execd reaches only when an entry of %s lists that IP literal", hp, how, ae.why, x.p.allowKey)
		}
		return refused(ReasonAddress, "fetch to %s is not allowed: %s%s resolves to %s, %s, which execd reaches only through a URL with that IP literal, listed in %s", hp, how, t.host, ae.addr, ae.why, x.p.allowKey)
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recErr tls.RecordHeaderError
	switch {
	case errors.As(err, &dnsErr):
		return failed(KindFailed, ReasonConnect, "fetch to %s failed: the name %s does not resolve", hp, t.host)
	case errors.As(err, &unknownCA) || errors.As(err, &certErr) && errors.As(certErr.Err, &unknownCA):
		return failed(KindFailed, ReasonTLS, "fetch to %s failed: the server's TLS certificate is signed by an authority execd does not trust (network.ca_file adds one)", hp)
	case errors.As(err, &hostErr):
		return failed(KindFailed, ReasonTLS, "fetch to %s failed: the server's TLS certificate is not valid for %s", hp, t.host)
	case errors.As(err, &certErr):
		return failed(KindFailed, ReasonTLS, "fetch to %s failed: the server's TLS certificate is not valid (%s)", hp, clip(certErr.Err.Error(), 120))
	case errors.As(err, &recErr) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return failed(KindFailed, ReasonTLS, "fetch to %s failed: the server does not speak TLS there (is it http://?)", hp)
	case errors.Is(err, syscall.ECONNREFUSED):
		return failed(KindFailed, ReasonConnect, "fetch to %s failed: connection refused", hp)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return failed(KindFailed, ReasonConnect, "fetch to %s failed: the server closed the connection", hp)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return failed(KindFailed, ReasonConnect, "fetch to %s failed: %s", hp, clip(x.p.secrets.redactString(err.Error()), 200))
}

// record logs the request and keeps it for the status page.
func (x *Session) record(st Start, d Done, err *Error) {
	host := st.Host
	if d.Host != "" {
		host = d.Host
	}
	x.s.recent.add(x.principal, x.workspace, Entry{Time: time.Now().Add(-d.Duration), Method: st.Method, Host: host, Status: d.Status,
		Outcome: d.Outcome, Reason: d.Reason, BytesIn: d.BytesIn, BytesOut: d.BytesOut, DurationMs: d.Duration.Milliseconds()})
	if err != nil && err.Reason == ReasonRequests {
		x.mu.Lock()
		logged := x.capLogged
		x.capLogged = true
		x.mu.Unlock()
		if logged { // a loop of refused requests logs once
			return
		}
	}
	fields := []zap.Field{zap.String("principal", x.principal), zap.String("workspace", x.workspace),
		zap.String("method", st.Method), zap.String("host", host), zap.String("outcome", string(d.Outcome))}
	if d.Status != 0 {
		fields = append(fields, zap.Int("status", d.Status))
	}
	if d.Reason != "" {
		fields = append(fields, zap.String("reason", string(d.Reason)))
	}
	if d.Redirects > 0 {
		fields = append(fields, zap.Int("redirects", d.Redirects))
	}
	fields = append(fields, zap.Int64("bytes_out", d.BytesOut), zap.Int64("bytes_in", d.BytesIn), zap.Duration("duration", d.Duration))
	x.s.log.Info("egress", fields...)
}
