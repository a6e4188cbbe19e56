package frontend

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Two servers with one session key are two instances behind a balancer: a
// session one of them minted is served by the other.
func TestSignedSessionsWorkOnEveryInstance(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	opts := testOptions()
	opts.SessionKey = key
	_, a := newHTTP(t, opts)
	_, b := newHTTP(t, opts)
	other := testOptions()
	other.SessionKey = []byte("another key, of the same length!")
	_, c := newHTTP(t, other)
	_, plain := newHTTP(t, testOptions())

	ca := &client{T: t, URL: a.URL + "/mcp"}
	ca.Initialize()
	call := func(url, session string) int {
		cl := &client{T: t, URL: url + "/mcp", Session: session}
		resp := cl.Post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_echo","arguments":{"text":"6*7"}}}`, nil)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := call(b.URL, ca.Session); got != http.StatusOK {
		t.Fatalf("instance b on a's session: HTTP %d", got)
	}
	for name, url := range map[string]string{"a different key": c.URL, "no key": plain.URL} {
		if got := call(url, ca.Session); got != http.StatusNotFound {
			t.Errorf("an instance with %s took up the session: HTTP %d", name, got)
		}
	}
	forged := ca.Session[:len(ca.Session)-1] + "0"
	if forged == ca.Session {
		forged = ca.Session[:len(ca.Session)-1] + "1"
	}
	if got := call(b.URL, forged); got != http.StatusNotFound {
		t.Errorf("a forged signature was accepted: HTTP %d", got)
	}
	// Another principal cannot use it: with auth, the signature binds the principal.
	// (Without auth there is one principal; covered by the MAC's input.)

	// DELETE on b ends it there, and b does not take it up again.
	req, _ := http.NewRequest(http.MethodDelete, b.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", ca.Session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if got := call(b.URL, ca.Session); got != http.StatusNotFound {
		t.Errorf("after DELETE the session still works on b: HTTP %d", got)
	}
}

func TestSignedSessionIDsBindPrincipalAndVersion(t *testing.T) {
	st := newSessionStore(0, []byte("0123456789abcdef0123456789abcdef"))
	s := st.create("alice", Version20250326, nil)
	if len(s.id) != 65 {
		t.Fatalf("id %q", s.id)
	}
	for _, c := range s.id {
		if c < 0x21 || c > 0x7e {
			t.Fatalf("id %q has a character outside visible ASCII", s.id)
		}
	}
	other := newSessionStore(0, []byte("0123456789abcdef0123456789abcdef"))
	if got := other.get(s.id, "bob"); got != nil {
		t.Error("another principal took up alice's session")
	}
	got := other.get(s.id, "alice")
	if got == nil || got.version != Version20250326 {
		t.Fatalf("taken up: %+v", got)
	}
}

// FuzzSessionVerify: a signed session id comes from the client, so verify
// reads attacker-controlled input. Whatever the id, it never panics and
// names a version only for an id this key minted for this principal; an id
// it minted verifies, for its own principal only.
func FuzzSessionVerify(f *testing.F) {
	st := newSessionStore(time.Hour, []byte("0123456789abcdef0123456789abcdef"))
	for _, s := range []string{"", "c", st.sign("alice", VersionLatest, strings.Repeat("0", 32)),
		"z" + strings.Repeat("f", 64), strings.Repeat("\xff", 65)} {
		f.Add(s, "alice")
	}
	f.Fuzz(func(t *testing.T, id, principal string) {
		if v := st.verify(id, principal); v != "" {
			if id != st.sign(principal, v, id[1:33]) {
				t.Fatalf("verify(%q, %q) = %q for an id the key did not mint", id, principal, v)
			}
		}
		if len(id) < 32 {
			return
		}
		random := id[:32]
		for v := range versionLetters {
			minted := st.sign(principal, v, random)
			if got := st.verify(minted, principal); got != v {
				t.Fatalf("a minted id for %q, %s verifies as %q", principal, v, got)
			}
			if got := st.verify(minted, principal+"x"); got != "" {
				t.Fatalf("an id minted for %q verifies for %q", principal, principal+"x")
			}
		}
	})
}
