// Package cluster is what lets several execd instances serve one set of
// clients behind a load balancer that places each workspace on one
// instance (deploy/nginx): the balancer's consistent-hash ring, so that the
// id of a workspace a call creates routes back to the instance that made
// it; and, when the instances share one data directory, the lock and the
// save after every call that let any instance serve any workspace, one
// call at a time (RATIONALE.md).
package cluster

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"sort"

	"github.com/google/uuid"
)

// Ring is the consistent-hash ring of nginx's upstream "hash KEY
// consistent" (ngx_http_upstream_hash_module): 160 points per peer of
// weight 1, the point i of a peer "HOST:PORT" at crc32(HOST \0 PORT
// prev), prev being the point before it as 4 little-endian bytes (0 for
// the first); a key goes to the first point at or after crc32(key). Peers
// must be written exactly as in the upstream's server lines.
type Ring struct {
	peers  []string
	points []point
}

type point struct {
	hash uint32
	peer int
}

// NewRing builds the ring of peers.
func NewRing(peers []string) (*Ring, error) {
	if len(peers) == 0 {
		return nil, fmt.Errorf("cluster: no peers")
	}
	r := &Ring{peers: append([]string(nil), peers...)}
	seen := map[string]bool{}
	for i, p := range peers {
		if seen[p] {
			return nil, fmt.Errorf("cluster: peer %q listed twice", p)
		}
		seen[p] = true
		host, port := splitServer(p)
		base := append(append([]byte(host), 0), port...)
		var prev [4]byte
		for range 160 {
			h := crc32.ChecksumIEEE(append(base[:len(base):len(base)], prev[:]...))
			r.points = append(r.points, point{h, i})
			binary.LittleEndian.PutUint32(prev[:], h)
		}
	}
	sort.SliceStable(r.points, func(a, b int) bool { return r.points[a].hash < r.points[b].hash })
	// nginx keeps the first of equal points (after its unstable sort; an
	// equal crc32 of two peers' points is astronomically rare).
	out := r.points[:1]
	for _, p := range r.points[1:] {
		if p.hash != out[len(out)-1].hash {
			out = append(out, p)
		}
	}
	r.points = out
	return r, nil
}

// splitServer splits a server line's address as nginx does for the hash: a
// trailing ":digits" is the port; "unix:PATH" has none.
func splitServer(s string) (host, port string) {
	if len(s) >= 5 && (s[:5] == "unix:" || s[:5] == "UNIX:") {
		return s[5:], ""
	}
	for j := 0; j < len(s); j++ {
		c := s[len(s)-j-1]
		if c == ':' {
			return s[:len(s)-j-1], s[len(s)-j:]
		}
		if c < '0' || c > '9' {
			break
		}
	}
	return s, ""
}

// Peer is the peer key goes to while every peer is up.
func (r *Ring) Peer(key string) string {
	h := crc32.ChecksumIEEE([]byte(key))
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].hash >= h })
	return r.peers[r.points[i%len(r.points)].peer]
}

// Minter returns a function that mints workspace ids (random UUIDv4s)
// that the ring sends to self: workspace.Config.NewID for the instance
// self. Each try succeeds with the share of the ring self holds, about
// one in len(peers); after maxTries the last id is returned as is.
func (r *Ring) Minter(self string) (func() string, error) {
	found := false
	for _, p := range r.peers {
		found = found || p == self
	}
	if !found {
		return nil, fmt.Errorf("cluster: self %q is not among the peers %q", self, r.peers)
	}
	return func() string {
		var id string
		for range maxTries {
			if id = uuid.NewString(); r.Peer(id) == self {
				break
			}
		}
		return id
	}, nil
}

const maxTries = 1000

// ReadKey reads a session key file: its content without surrounding white
// space, at least 32 bytes.
func ReadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster.session_key_file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < 32 {
		return nil, fmt.Errorf("cluster.session_key_file %s: the key must have at least 32 bytes, it has %d", path, len(b))
	}
	return b, nil
}
