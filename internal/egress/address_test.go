package egress

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

func TestSpecialAddresses(t *testing.T) {
	for a, want := range map[string]string{
		"127.0.0.1":           "a loopback address",
		"127.255.0.9":         "a loopback address",
		"::1":                 "a loopback address",
		"::ffff:127.0.0.1":    "a loopback address",
		"10.1.2.3":            "a private address",
		"172.16.0.1":          "a private address",
		"192.168.1.1":         "a private address",
		"fd12::1":             "a private address",
		"169.254.169.254":     "the cloud metadata address",
		"fd00:ec2::254":       "the cloud metadata address",
		"169.254.1.1":         "a link-local address",
		"fe80::1":             "a link-local address",
		"100.64.0.1":          "a shared (CGNAT) address",
		"224.0.0.1":           "a multicast address",
		"ff02::1":             "a multicast address",
		"0.0.0.0":             "the unspecified address",
		"::":                  "the unspecified address",
		"0.1.2.3":             "a \"this network\" address",
		"255.255.255.255":     "the broadcast address",
		"240.0.0.1":           "a reserved address",
		"192.0.2.1":           "a documentation address",
		"2001:db8::1":         "a documentation address",
		"64:ff9b::7f00:1":     "a NAT64 address (it embeds an IPv4 address)",
		"2002:7f00:1::1":      "a 6to4 address (it embeds an IPv4 address)",
		"2001:0:4136:e378::1": "a Teredo address (it embeds an IPv4 address)",
		"::127.0.0.1":         "an IPv4-compatible IPv6 address",
		"fec0::1":             "a site-local address",
		"8.8.8.8":             "",
		"1.1.1.1":             "",
		"2606:4700::1111":     "",
		"::ffff:8.8.8.8":      "",
	} {
		if got := special(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: %q, want %q", a, got, want)
		}
	}
}

// fakeResolver answers every name with its addresses.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range f[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// TestDialerRefusesSpecialAddressesOfNames: a name whose addresses are all
// special is refused before any connection; a listed literal does not make
// a name that resolves to it allowed.
func TestDialerRefusesSpecialAddressesOfNames(t *testing.T) {
	d := &dialer{resolver: fakeResolver{"rebind.test": {"127.0.0.1", "::1"}, "meta.test": {"169.254.169.254"}},
		listed: map[netip.Addr]bool{netip.MustParseAddr("127.0.0.1"): true}}
	for _, host := range []string{"rebind.test:80", "meta.test:80", "[::ffff:10.0.0.1]:80", "10.0.0.1:80"} {
		c, err := d.DialContext(context.Background(), "tcp", host)
		var ae *addressError
		if !errors.As(err, &ae) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: %v; want an address refusal", host, err)
		}
	}
}
