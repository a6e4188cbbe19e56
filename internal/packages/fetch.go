package packages

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"
)

// fetcher is the host's HTTP client toward the registry and the index,
// bounding every answer by size and every request by time.
type fetcher struct {
	client   *http.Client
	timeout  time.Duration
	maxBytes int64
}

func newClient(tlsConfig *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyFromEnvironment
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig = tlsConfig.Clone()
	tlsConfig.MinVersion = tls.VersionTLS12
	tr.TLSClientConfig = tlsConfig
	tr.ResponseHeaderTimeout = 0 // fetch_timeout bounds the whole request
	return &http.Client{Transport: tr}
}

// getBytes fetches url into memory: a packument or an index page. accept
// is the Accept header; ok says whether a content type is acceptable.
func (f *fetcher) getBytes(ctx context.Context, pkg, url, accept string, ok func(mediaType string) bool) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := f.do(ctx, pkg, url, accept)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !ok(mt) {
		return nil, "", errorf(CodeRegistry, pkg, "%s answered %s with content type %q, not what a registry sends", hostOf(url), pkg, resp.Header.Get("Content-Type"))
	}
	if resp.ContentLength > f.maxBytes {
		return nil, "", tooLarge(pkg, url, resp.ContentLength, f.maxBytes)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBytes+1))
	if err != nil {
		return nil, "", f.readError(ctx, pkg, url, err)
	}
	if int64(len(b)) > f.maxBytes {
		return nil, "", tooLarge(pkg, url, -1, f.maxBytes)
	}
	return b, mt, nil
}

// getFile fetches url into a new file in dir, never more than
// max_package_bytes, and returns the file rewound. The caller removes it.
func (f *fetcher) getFile(ctx context.Context, pkg, url, dir string) (*os.File, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := f.do(ctx, pkg, url, "*/*")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > f.maxBytes {
		return nil, tooLarge(pkg, url, resp.ContentLength, f.maxBytes)
	}
	file, err := os.CreateTemp(dir, "download-*")
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(file, io.LimitReader(resp.Body, f.maxBytes+1))
	if err == nil && n > f.maxBytes {
		err = tooLarge(pkg, url, -1, f.maxBytes)
	} else if err != nil {
		err = f.readError(ctx, pkg, url, err)
	}
	if err == nil {
		_, err = file.Seek(0, io.SeekStart)
	}
	if err != nil {
		file.Close()
		os.Remove(file.Name())
		return nil, err
	}
	return file, nil
}

func (f *fetcher) do(ctx context.Context, pkg, url, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, errorf(CodeRegistry, pkg, "cannot fetch %s: %v", pkg, err)
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "execd")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.readError(ctx, pkg, url, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		resp.Body.Close()
		return nil, errorf(CodeNotFound, pkg, "%s has no package %s", hostOf(url), pkg)
	case resp.StatusCode != http.StatusOK:
		resp.Body.Close()
		return nil, errorf(CodeRegistry, pkg, "%s answered %s for %s", hostOf(url), resp.Status, pkg)
	}
	return resp, nil
}

// readError turns a transport error into an Error: a timeout names
// packages.fetch_timeout, a cancel stays the context's error.
func (f *fetcher) readError(ctx context.Context, pkg, url string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errorf(CodeTimeout, pkg, "%s did not answer for %s within %s (packages.fetch_timeout)", hostOf(url), pkg, f.timeout)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return errorf(CodeRegistry, pkg, "fetching %s from %s failed: %v", pkg, hostOf(url), stripURL(err))
}

// stripURL keeps a url.Error's cause without the URL, whose query a
// mirror might use for a token.
func stripURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && strings.HasPrefix(err.Error(), "Get ") {
		return ue.Unwrap()
	}
	return err
}

func tooLarge(pkg, url string, n, max int64) error {
	if n > 0 {
		return errorf(CodeTooLarge, pkg, "%s is %d bytes, over the %d of packages.max_package_bytes", pkg, n, max)
	}
	return errorf(CodeTooLarge, pkg, "%s is over the %d bytes of packages.max_package_bytes", pkg, max)
}

// hostOf is the host of a URL, for messages.
func hostOf(u string) string {
	s := u
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func isJSON(mt string) bool {
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
