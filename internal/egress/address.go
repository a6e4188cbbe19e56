package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// The address check. Every connection execd makes for a guest is dialled
// here, to an address resolved here: what is checked is what is connected
// to, so a name that resolves to a public address when the policy looks
// and to a private one when the connection is made (DNS rebinding) cannot
// pass. The rule (RATIONALE.md, "Which addresses does the dialer refuse?"):
// a name reaches public unicast addresses only; a special address
// (loopback, private, link-local, CGNAT, multicast, metadata, reserved, and
// the IPv6 forms that embed IPv4) is reached only through a URL whose host
// is that IP literal, listed as such in the allow list.

var specialPrefixes = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
	{netip.MustParsePrefix("169.254.169.254/32"), "the cloud metadata address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved (IETF protocol) address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "the cloud metadata address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible IPv6 address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address (it embeds an IPv4 address)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address (it embeds an IPv4 address)"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address (it embeds an IPv4 address)"},
	{netip.MustParsePrefix("2001:2::/48"), "a benchmarking address"},
	{netip.MustParsePrefix("2001:10::/28"), "a reserved (ORCHID) address"},
	{netip.MustParsePrefix("2001:20::/28"), "a reserved (ORCHID) address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address (it embeds an IPv4 address)"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("5f00::/16"), "a reserved (SRv6) address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

// special says why a is not a public unicast address ("a loopback
// address"), or "" when it is one.
func special(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsMulticast():
		return "a multicast address"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	}
	for _, s := range specialPrefixes {
		if s.prefix.Contains(a) {
			return s.why
		}
	}
	switch {
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsPrivate():
		return "a private address"
	case a.Is6() && !netip.MustParsePrefix("2000::/3").Contains(a):
		return "an IPv6 address outside the global unicast range"
	}
	return ""
}

// Resolver resolves host names (net.Resolver has this method; tests give
// their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// dialer dials the connections of one policy. listed are the IP literals
// of its allow list.
type dialer struct {
	resolver Resolver
	listed   map[netip.Addr]bool
	timeout  time.Duration // per connection attempt
}

// addressError is a dial the address check refused.
type addressError struct {
	host string
	addr netip.Addr
	why  string
}

func (e *addressError) Error() string {
	return "address " + e.addr.String() + " of " + e.host + " is " + e.why
}

// DialContext is the transport's dialer. address is host:port from the
// URL: an IP literal is dialled only if it is public or listed; a name is
// resolved here and only its public addresses are dialled.
func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		if why := special(a); why != "" && !d.listed[a] {
			return nil, &addressError{host: host, addr: a, why: why}
		}
		return d.dialOne(ctx, network, a, port, true)
	}
	addrs, err := d.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var refusedErr error
	var lastErr error
	for _, a := range addrs {
		a = a.Unmap()
		if why := special(a); why != "" {
			if refusedErr == nil {
				refusedErr = &addressError{host: host, addr: a, why: why}
			}
			continue
		}
		c, err := d.dialOne(ctx, network, a, port, false)
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr != nil {
		return nil, lastErr
	}
	if refusedErr != nil {
		return nil, refusedErr
	}
	return nil, &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
}

// dialOne connects to a:port. The socket's Control checks the address once
// more, just before the connect: whatever path led here, no connection to
// a special address leaves unless the URL named it as a listed literal.
func (d *dialer) dialOne(ctx context.Context, network string, a netip.Addr, port string, literal bool) (net.Conn, error) {
	nd := net.Dialer{Timeout: d.timeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		got := ap.Addr().Unmap()
		if got != a {
			return errors.New("egress: dialled an address that was not checked")
		}
		if why := special(got); why != "" && !(literal && d.listed[got]) {
			return &addressError{host: got.String(), addr: got, why: why}
		}
		return nil
	}}
	return nd.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
}
