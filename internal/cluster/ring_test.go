package cluster

import "testing"

// nginxPlaced is where nginx 1.22.1 (Debian bookworm) sends each key with
// `hash $arg_k consistent` over these three servers: captured by curling
// an nginx whose upstream servers answer with their own address.
var nginxPlaced = map[string]string{
	"analysis": "127.0.0.1:18001", "shared": "127.0.0.1:18003", "spread-0": "127.0.0.1:18001",
	"spread-1": "127.0.0.1:18003", "spread-2": "127.0.0.1:18003", "spread-3": "127.0.0.1:18003",
	"spread-42": "127.0.0.1:18001", "spread-99": "127.0.0.1:18001", "a": "127.0.0.1:18002",
	"b": "127.0.0.1:18003", "c": "127.0.0.1:18003", "3f2504e0-4f89-41d3-9a0c-0305e82c3301": "127.0.0.1:18001",
	"workspace-7": "127.0.0.1:18003", "x": "127.0.0.1:18001", "y": "127.0.0.1:18003", "z": "127.0.0.1:18001",
}

var testPeers = []string{"127.0.0.1:18001", "127.0.0.1:18002", "127.0.0.1:18003"}

func TestRingPlacesKeysAsNginxDoes(t *testing.T) {
	r, err := NewRing(testPeers)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range nginxPlaced {
		if got := r.Peer(k); got != want {
			t.Errorf("Peer(%q) = %s, nginx sends it to %s", k, got, want)
		}
	}
}

func TestRingSpreadsKeys(t *testing.T) {
	r, _ := NewRing(testPeers)
	n := map[string]int{}
	for i := range 3000 {
		n[r.Peer("ws-"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)))]++
	}
	for _, p := range testPeers {
		if n[p] < 500 {
			t.Errorf("peer %s got %d of 3000 keys: %v", p, n[p], n)
		}
	}
}

func TestMinterMintsIDsThatRouteHome(t *testing.T) {
	r, _ := NewRing(testPeers)
	for _, self := range testPeers {
		mint, err := r.Minter(self)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for range 50 {
			id := mint()
			if r.Peer(id) != self {
				t.Fatalf("minted %s for %s, which the ring sends to %s", id, self, r.Peer(id))
			}
			if seen[id] {
				t.Fatalf("minted %s twice", id)
			}
			seen[id] = true
		}
	}
	if _, err := r.Minter("127.0.0.1:9"); err == nil {
		t.Error("Minter accepted a self that is not a peer")
	}
}

func TestNewRingRefusesBadPeers(t *testing.T) {
	if _, err := NewRing(nil); err == nil {
		t.Error("no peers accepted")
	}
	if _, err := NewRing([]string{"a:1", "a:1"}); err == nil {
		t.Error("a peer listed twice accepted")
	}
}

func TestSplitServer(t *testing.T) {
	for in, want := range map[string][2]string{
		"127.0.0.1:8001": {"127.0.0.1", "8001"}, "execd-0.execd:8765": {"execd-0.execd", "8765"},
		"example.org": {"example.org", ""}, "unix:/run/execd.sock": {"/run/execd.sock", ""}, "[::1]:80": {"[::1]", "80"},
	} {
		if h, p := splitServer(in); h != want[0] || p != want[1] {
			t.Errorf("splitServer(%q) = %q, %q; want %q, %q", in, h, p, want[0], want[1])
		}
	}
}
