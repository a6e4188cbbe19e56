package frontend

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A requestState opens only for the principal and the owner it was sealed
// for, and only until it expires.
func TestRequestStateBindsPrincipalOwnerAndExpiry(t *testing.T) {
	s := newTestServer(testOptions())
	st := s.sealState("alice", "tool", map[string]any{"round": 1})
	data, jerr := s.openState("alice", "tool", st)
	if jerr != nil || string(data["round"]) != "1" {
		t.Fatalf("own state: %v %v", data, jerr)
	}
	if _, jerr := s.openState("bob", "tool", st); jerr == nil {
		t.Fatal("another principal opened the state")
	}
	if _, jerr := s.openState("alice", "other_tool", st); jerr == nil {
		t.Fatal("the state opened for another owner")
	}
	if _, jerr := s.openState("alice", "tool", st+"x"); jerr == nil {
		t.Fatal("a tampered state opened")
	}
	b, _ := json.Marshal(statePayload{Owner: "tool", Expires: time.Now().Add(-time.Minute).Unix()})
	body := base64.RawURLEncoding.EncodeToString(b)
	var sig string
	old := body + "." + base64.RawURLEncoding.EncodeToString(s.stateMAC("alice", body))
	if _, jerr := s.openState("alice", "tool", old); jerr == nil || !strings.Contains(jerr.Message, "expired") {
		t.Fatalf("expired state: %v", jerr)
	}
	// A state of an earlier process does not open, and the refusal says
	// why rather than suggesting tampering.
	other := newTestServer(testOptions())
	if _, jerr := other.openState("alice", "tool", st); jerr == nil || !strings.Contains(jerr.Message, "before execd restarted") {
		t.Fatalf("a state sealed by another process: %v", jerr)
	}
	// One of this process, altered, is still a failed integrity check.
	body, sig, _ = strings.Cut(st, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	forged := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"round":1`, `"round":2`, 1))) + "." + sig
	if _, jerr := s.openState("alice", "tool", forged); jerr == nil || !strings.Contains(jerr.Message, "integrity") {
		t.Fatalf("an altered state: %v", jerr)
	}
}
