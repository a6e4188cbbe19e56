"""The sandbox's HTTP transport: every request goes to the host, where
execd's network policy decides (sandbox/ABI.md, execd.net_*; the natives
are the builtin _execd_net). There are no sockets: http.client's
HTTPConnection and HTTPSConnection, and with them urllib.request, and
requests' HTTPAdapter send through here (driver.py patches them as they
are imported). TLS is the host's: it always verifies certificates.

A refusal or a failure is a NetworkError (an OSError, so urllib.request
makes it a URLError and requests a ConnectionError), with the host's
reason, which names the configuration key that decides; a timeout is also
a TimeoutError.
"""

import io as _io
import json as _json

import _execd_net


class NetworkError(OSError):
    """A request that got no response: refused by the policy, or failed.
    kind is "refused", "error", "timeout" or "aborted"; reason the host's
    word for why ("host", "address", "tls"…)."""

    def __init__(self, message, kind="error"):
        super().__init__(message)
        self.kind = kind
        self.reason = ""

    def __str__(self):
        return self.args[0]


class NetworkTimeout(NetworkError, TimeoutError):
    """A request that timed out (network.request_timeout, or its own)."""


class Response:
    """What came back: status, reason, url (the final one), redirected,
    headers (a list of (name, value)), body (bytes)."""

    __slots__ = ("status", "reason", "url", "redirected", "headers", "body")

    def __init__(self, status, reason, url, redirected, headers, body):
        self.status, self.reason, self.url = status, reason, url
        self.redirected, self.headers, self.body = redirected, headers, body


def _bytes(body):
    """The bytes of a request body: bytes-like, str (UTF-8), a file (read
    whole) or an iterable of those."""
    if body is None:
        return None
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if hasattr(body, "read"):
        data = body.read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    parts = []
    for chunk in body:
        parts.append(chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk))
    return b"".join(parts)


def request(method, url, headers=(), body=None, timeout=None, redirect="follow"):
    """Sends one request through the host and returns its Response.
    headers: (name, value) pairs; timeout: seconds (None: the host's
    network.request_timeout); redirect: "follow" (the host follows them),
    "manual" (a redirect is the response) or "error"."""
    head = {"method": method, "url": url, "headers": [[str(k), str(v)] for k, v in headers], "redirect": redirect}
    if timeout is not None:
        head["timeout"] = max(float(timeout), 0.001) * 1000
    rid = _execd_net.start(_json.dumps(head), _bytes(body))
    try:
        _execd_net.wait(rid)
        h = _json.loads(_execd_net.head(rid))
        if "error" in h:
            cls = NetworkTimeout if h.get("kind") == "timeout" else NetworkError
            e = cls(h["error"], h.get("kind", "error"))
            e.reason = h.get("reason", "")
            raise e
        data = _execd_net.body(rid, h["length"])
    finally:
        _execd_net.close(rid)
    return Response(h["status"], h["statusText"], h["url"], h["redirected"], [tuple(p) for p in h["headers"]], data)


_request = request  # for _adapter_send, whose argument is called request


# ---- http.client ------------------------------------------------------------

class _Sock:
    """What http.client.HTTPResponse reads a response from."""

    def __init__(self, data):
        self._data = data

    def makefile(self, mode="rb", *args, **kwargs):
        return _io.BytesIO(self._data)

    def close(self):
        pass

    def settimeout(self, t):
        pass


_SKIP = {"transfer-encoding", "connection", "keep-alive", "content-length"}


def _raw_response(method, r):
    """r as the bytes of an HTTP/1.1 response, which http.client parses:
    the body whole, its length stated, the connection closed after."""
    out = [b"HTTP/1.1 %d %s\r\n" % (r.status, r.reason.encode("utf-8", "replace"))]
    no_body = method == "HEAD" or r.status in (204, 304) or 100 <= r.status < 200
    for k, v in r.headers:
        if k.lower() in _SKIP and not (method == "HEAD" and k.lower() == "content-length"):
            continue
        out.append(k.encode("ascii", "replace") + b": " + v.encode("utf-8", "replace") + b"\r\n")
    if not no_body:
        out.append(b"Content-Length: %d\r\n" % len(r.body))
    out.append(b"Connection: close\r\n\r\n")
    if not no_body:
        out.append(r.body)
    return b"".join(out)


def patch_http_client(mod):
    """Replaces mod.HTTPConnection (and defines mod.HTTPSConnection, which
    needs the ssl module otherwise) by classes that send through the host.
    They never follow redirects (http.client does not); urllib.request's
    redirect handler does, each hop through the host's policy."""
    import socket

    base = mod.HTTPConnection

    class HTTPConnection(base):
        __doc__ = base.__doc__
        _execd_scheme = "http"

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._execd_reset()

        def _execd_reset(self):
            self._execd_method = self._execd_url = self._execd_response = None
            self._execd_headers = []
            self._execd_body = []
            self._execd_chunked = False

        def connect(self):
            if self._tunnel_host:
                raise NetworkError("proxies and CONNECT tunnels are not available in this sandbox: the host reaches the network itself", "refused")

        def putrequest(self, method, url, skip_host=False, skip_accept_encoding=False):
            super().putrequest(method, url, skip_host, skip_accept_encoding)
            self._execd_reset()
            self._execd_method, self._execd_url = method, url

        def putheader(self, header, *values):
            super().putheader(header, *values)
            if isinstance(header, bytes):
                header = header.decode("latin-1")
            vs = []
            for v in values:
                if isinstance(v, bytes):
                    v = v.decode("latin-1")
                vs.append(str(v))
            self._execd_headers.append((header, ", ".join(vs)))

        def _send_output(self, message_body=None, encode_chunked=False):
            # The request leaves here, as soon as it is whole (in request(),
            # where urllib.request expects connection errors), or in
            # getresponse() when its body follows in send() calls.
            del self._buffer[:]
            if message_body is not None:
                self._execd_add(message_body)
                self._execd_send()
            elif self._execd_whole():
                self._execd_send()

        def send(self, data):
            self._execd_add(data)
            if self._execd_method is not None and self._execd_response is None and self._execd_whole():
                self._execd_send()

        def _execd_add(self, data):
            if hasattr(data, "read"):
                chunk = data.read()
                data = chunk.encode("iso-8859-1") if isinstance(chunk, str) else chunk
            elif isinstance(data, str):
                data = data.encode("iso-8859-1")
            elif not isinstance(data, (bytes, bytearray, memoryview)):
                for chunk in data:
                    self._execd_add(chunk)
                return
            self._execd_body.append(bytes(data))

        def _execd_whole(self):
            """The body announced by the headers has been given."""
            length = None
            for k, v in self._execd_headers:
                k = k.lower()
                if k == "transfer-encoding":
                    return False
                if k == "content-length":
                    try:
                        length = int(v)
                    except ValueError:
                        return True
            return length is None or sum(map(len, self._execd_body)) >= length

        def _execd_send(self):
            method, target = self._execd_method, self._execd_target()
            body = b"".join(self._execd_body) if self._execd_body else None
            timeout = self.timeout if isinstance(self.timeout, (int, float)) else None
            try:
                self._execd_response = request(method, target, self._execd_headers, body, timeout, redirect="manual")
            except BaseException:
                self._execd_reset()
                self.close()
                raise

        def _execd_target(self):
            url = self._execd_url
            if "://" in url:
                return url
            host = self.host
            if ":" in host:
                host = "[" + host + "]"
            else:
                try:
                    host.encode("ascii")
                except UnicodeEncodeError:
                    host = host.encode("idna").decode("ascii")
            port = "" if self.port == self.default_port else ":%d" % self.port
            return "%s://%s%s%s" % (self._execd_scheme, host, port, url)

        def getresponse(self):
            if self._execd_method is None:
                return super().getresponse()  # http.client's own error (no request sent)
            if self._execd_response is None:
                self._execd_send()
            method, r = self._execd_method, self._execd_response
            self._execd_reset()
            self.sock = _Sock(_raw_response(method, r))
            return super().getresponse()

    class HTTPSConnection(HTTPConnection):
        """An HTTPS connection through the host, which does the TLS and
        always verifies the certificate (network.ca_file adds roots):
        context, check_hostname, key_file and cert_file are accepted and
        not used."""
        default_port = mod.HTTPS_PORT
        _execd_scheme = "https"

        def __init__(self, host, port=None, key_file=None, cert_file=None, timeout=socket._GLOBAL_DEFAULT_TIMEOUT,
                     source_address=None, *, context=None, check_hostname=None, blocksize=8192):
            super().__init__(host, port, timeout, source_address, blocksize)
            self.key_file, self.cert_file, self._context = key_file, cert_file, context

    HTTPConnection.__module__ = HTTPSConnection.__module__ = "http.client"
    HTTPConnection.__qualname__, HTTPSConnection.__qualname__ = "HTTPConnection", "HTTPSConnection"
    mod.HTTPConnection = HTTPConnection
    mod.HTTPSConnection = HTTPSConnection
    if "HTTPSConnection" not in mod.__all__:
        mod.__all__.append("HTTPSConnection")


# ---- requests ---------------------------------------------------------------

class _Original:
    """What requests reads cookies from (response._original_response.msg)."""

    def __init__(self, msg):
        self.msg = msg

    def close(self):
        pass

    def isclosed(self):
        return True


def _timeout_of(timeout):
    """requests' timeout (seconds, (connect, read) or urllib3's Timeout) as
    one limit on the whole exchange, in seconds; None: the host's."""
    if isinstance(timeout, tuple):
        parts = [t for t in timeout if isinstance(t, (int, float))]
        return sum(parts) if parts else None
    if hasattr(timeout, "total"):
        for t in (timeout.total, getattr(timeout, "_read", None)):
            if isinstance(t, (int, float)):
                return t
        return None
    return timeout if isinstance(timeout, (int, float)) else None


def _adapter_send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
    """HTTPAdapter.send through the host. Redirects come back as they are
    (requests follows them, each hop through the host's policy); verify,
    cert and proxies are the host's business (it always verifies TLS)."""
    import http.client
    from requests import exceptions as rex
    from urllib3._collections import HTTPHeaderDict
    from urllib3.response import HTTPResponse

    try:
        r = _request(request.method, request.url, list(request.headers.items()), request.body,
                                 _timeout_of(timeout), redirect="manual")
    except NetworkTimeout as e:
        raise rex.ReadTimeout(str(e), request=request) from None
    except NetworkError as e:
        if e.reason == "tls":
            raise rex.SSLError(str(e), request=request) from None
        raise rex.ConnectionError(str(e), request=request) from None
    headers = HTTPHeaderDict()
    msg = http.client.HTTPMessage()
    for k, v in r.headers:
        headers.add(k, v)
        msg[k] = v
    raw = HTTPResponse(body=_io.BytesIO(r.body), headers=headers, status=r.status, reason=r.reason,
                       preload_content=False, decode_content=False, original_response=_Original(msg),
                       request_method=request.method, request_url=request.url)
    resp = self.build_response(request, raw)
    if not stream:
        resp.content
    return resp


def patch_requests(mod):
    """mod is requests.adapters: HTTPAdapter sends through the host."""
    _adapter_send.__qualname__ = "HTTPAdapter.send"
    mod.HTTPAdapter.send = _adapter_send


def patch_requests_sessions(mod):
    """mod is requests.sessions: a Session does not look in the
    environment (trust_env), which in the sandbox holds only the secrets'
    placeholders: there are no proxies, no CA bundle and no .netrc to find,
    and looking for .netrc costs half of a small request."""
    init = mod.Session.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.trust_env = False

    __init__.__doc__, __init__.__qualname__ = init.__doc__, init.__qualname__
    mod.Session.__init__ = __init__
