package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// HostPolicy decides which hosts branch URLs may reach (sluice dtx serve
// --branch-hosts). A caller who may submit a transaction may make the
// coordinator call any URL it names; the policy bounds that.
//
// Without a list every host is allowed but the sensitive ones: link-local
// addresses (169.254.0.0/16, fe80::/10), where the clouds' instance
// metadata services answer with credentials, and the metadata services'
// other addresses and names. With a list, only what it allows is reached.
// A sensitive host is reached only when an entry names it: an exact name,
// or a CIDR inside the sensitive range (a broad 0.0.0.0/0 or * does not
// count).
//
// Names are checked twice: when a URL is accepted (a name no entry can
// allow is refused at once), and when a call dials it: the name is resolved
// by the policy's dialer, and every address it connects to is checked, so
// that a name which resolves (or is re-pointed) to a denied address is not
// reached either.
type HostPolicy struct {
	listed bool           // a list was given: only what it allows
	any    bool           // the list has "*"
	nets   []netip.Prefix // CIDR entries
	names  []string       // exact names, lower case
	globs  []string       // "*.example.com" entries as ".example.com"
}

// sensitiveNets are denied unless an entry inside them is listed.
var sensitiveNets = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local: 169.254.169.254 (AWS, GCP, Azure, OpenStack...)
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS's IPv6 metadata address
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud's metadata address
}

// sensitiveNames are the metadata services' names.
var sensitiveNames = []string{"metadata.google.internal", "metadata.goog", "metadata"}

// ParseHostPolicy parses --branch-hosts entries: CIDRs (10.0.0.0/8,
// fd00::/8), addresses (127.0.0.1, ::1), host names (busi.internal) and
// name patterns (*.svc.cluster.local), or "*" for every host but the
// sensitive ones. No entries: the default policy.
func ParseHostPolicy(entries []string) (*HostPolicy, error) {
	p := &HostPolicy{}
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		p.listed = true
		switch {
		case e == "*":
			p.any = true
		case strings.Contains(e, "/"):
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("branch host %q: not a CIDR: %v", e, err)
			}
			p.nets = append(p.nets, unmapPrefix(pfx.Masked()))
		case strings.HasPrefix(e, "*."):
			if !validName(e[2:]) {
				return nil, fmt.Errorf("branch host %q: want *.domain", e)
			}
			p.globs = append(p.globs, e[1:])
		default:
			if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				a = a.Unmap()
				p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			if !validName(e) {
				return nil, fmt.Errorf("branch host %q: not a CIDR, an address, a host name or *.domain", e)
			}
			p.names = append(p.names, strings.TrimSuffix(e, "."))
		}
	}
	return p, nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// Listed reports whether the policy is an explicit list.
func (p *HostPolicy) Listed() bool { return p != nil && p.listed }

// errDenied is the refusal of a host the policy does not allow.
var errDenied = errors.New("not allowed by --branch-hosts")

// nameMatches reports whether an entry names host (exactly or by pattern).
func (p *HostPolicy) nameMatches(host string) bool {
	for _, n := range p.names {
		if host == n {
			return true
		}
	}
	for _, g := range p.globs {
		if strings.HasSuffix(host, g) {
			return true
		}
	}
	return false
}

// allowAddr decides an address: byName is set when the host name that led
// to it was allowed by a name entry.
func (p *HostPolicy) allowAddr(a netip.Addr, byName bool) error {
	a = a.Unmap()
	for _, s := range sensitiveNets {
		if !s.Contains(a) {
			continue
		}
		for _, n := range p.nets {
			if n.Bits() >= s.Bits() && s.Contains(n.Addr()) && n.Contains(a) {
				return nil
			}
		}
		return fmt.Errorf("address %s is link-local or a cloud metadata address, %w (list it to allow it)", a, errDenied)
	}
	if !p.listed || p.any || byName {
		return nil
	}
	for _, n := range p.nets {
		if n.Contains(a) {
			return nil
		}
	}
	return fmt.Errorf("address %s %w", a, errDenied)
}

// AllowHost checks a URL's host (a name or an address, without the port)
// before anything is stored. A name that entries may still allow by its
// addresses passes here and is checked again when it is dialed.
func (p *HostPolicy) AllowHost(host string) error {
	if p == nil {
		p = &HostPolicy{}
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // a zone: fe80::1%eth0
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.allowAddr(a, false)
	}
	for _, n := range sensitiveNames {
		if host == n {
			for _, e := range p.names {
				if e == host {
					return nil
				}
			}
			return fmt.Errorf("host %s is a cloud metadata service, %w (list it to allow it)", host, errDenied)
		}
	}
	if !p.listed || p.any || p.nameMatches(host) || len(p.nets) > 0 {
		return nil
	}
	return fmt.Errorf("host %s %w", host, errDenied)
}

// DialContext connects to addr (host:port) as the policy allows: the host
// is checked, a name is resolved here, and each address is checked before
// it is dialed (so no resolver answer reaches a denied address).
func (p *HostPolicy) DialContext(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	if p == nil {
		p = &HostPolicy{}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if err := p.AllowHost(host); err != nil {
		return nil, err
	}
	lhost := strings.ToLower(strings.TrimSuffix(host, "."))
	byName := p.nameMatches(lhost)
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
	}
	var firstErr error
	for _, a := range addrs {
		if err := p.allowAddr(a, byName); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("host %s: %w", host, err)
			}
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil || errors.Is(firstErr, errDenied) {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("host %s has no address", host)
	}
	return nil, firstErr
}

// dialer returns the policy's dial function with a timeout per attempt
// (0: none beyond ctx).
func (p *HostPolicy) dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
		return p.DialContext(ctx, d, network, addr)
	}
}
