package frontend

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAnswersCarryTheDate: every answer says when it was sent (RFC 9110
// §6.6.1), once, in the HTTP date format, with the second it was sent in.
func TestAnswersCarryTheDate(t *testing.T) {
	_, ts := newHTTP(t, testOptions())
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"no/such/method","params":` + modernMeta + `}`,
		`not json`,
	} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		before := time.Now().Truncate(time.Second)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		after := time.Now()
		dates := resp.Header.Values("Date")
		if len(dates) != 1 {
			t.Fatalf("%s: Date headers %q, want one", body, dates)
		}
		sent, err := http.ParseTime(dates[0])
		if err != nil || dates[0] != sent.Format(http.TimeFormat) {
			t.Fatalf("%s: Date %q is not an HTTP date: %v", body, dates[0], err)
		}
		if sent.Before(before) || sent.After(after) {
			t.Errorf("%s: Date %v, sent between %v and %v", body, sent, before, after)
		}
	}
}

func TestHTTPDateFollowsTheClock(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 6, 30, 59, 999_000_000, time.FixedZone("CET", 3600))
	for _, now := range []time.Time{t0, t0.Add(time.Millisecond), t0.Add(time.Hour + time.Millisecond)} {
		want := now.UTC().Format(http.TimeFormat)
		if got := httpDate(now); len(got) != 1 || got[0] != want {
			t.Errorf("httpDate(%v) = %q, want %q", now, got, want)
		}
	}
}
