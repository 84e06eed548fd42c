package kafkron

// Where an HTTP job may connect: the worker's egress rule against server-side request
// forgery (actors/worker/egress.py, docs/WORKER-PROTOCOL.md §12.4). Anyone who may
// write a schedule may name any URL, and the worker calls it from inside its network,
// so by default every address that reaches into that network is refused: loopback,
// link-local (the cloud metadata address included), the private ranges, "this
// network", multicast, broadcast, unspecified, in IPv4 and IPv6, and IPv6 forms of a
// refused IPv4 address. --http-allow lifts a refusal: an address or CIDR allows the
// addresses in it, a host name the URLs naming exactly that host.
//
// The rule judges the address connected to: the dialer's Control hook sees the
// address of each connection attempt after resolution, so a second DNS answer (a
// rebinding) never reaches a socket unchecked; no proxy of the environment is used
// (it would be the address connected to, never checked).

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
)

type refusedRange struct {
	prefix netip.Prefix
	why    string
}

var refusedRanges = func() []refusedRange {
	table := [][2]string{
		{"0.0.0.0/8", "'this network' (0.0.0.0/8)"},
		{"10.0.0.0/8", "a private address (10.0.0.0/8)"},
		{"100.64.0.0/10", "a carrier-grade NAT address (100.64.0.0/10)"},
		{"127.0.0.0/8", "a loopback address (127.0.0.0/8)"},
		{"169.254.0.0/16", "a link-local address (169.254.0.0/16, the cloud metadata range)"},
		{"172.16.0.0/12", "a private address (172.16.0.0/12)"},
		{"192.0.0.0/24", "an IETF protocol address (192.0.0.0/24)"},
		{"192.168.0.0/16", "a private address (192.168.0.0/16)"},
		{"198.18.0.0/15", "a benchmarking address (198.18.0.0/15)"},
		{"224.0.0.0/4", "a multicast address (224.0.0.0/4)"},
		{"240.0.0.0/4", "a reserved address (240.0.0.0/4, broadcast included)"},
		{"::/128", "the unspecified address (::)"},
		{"::1/128", "the loopback address (::1)"},
		{"fc00::/7", "a unique local address (fc00::/7)"},
		{"fe80::/10", "a link-local address (fe80::/10)"},
		{"ff00::/8", "a multicast address (ff00::/8)"},
	}
	out := make([]refusedRange, len(table))
	for i, row := range table {
		out[i] = refusedRange{netip.MustParsePrefix(row[0]), row[1]}
	}
	return out
}()

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// EgressRule is the refused ranges minus what --http-allow allows.
type EgressRule struct {
	networks []netip.Prefix
	hosts    map[string]bool
}

// EgressRefused is the error of a connection the rule refuses.
type EgressRefused struct{ Why string }

func (e *EgressRefused) Error() string { return e.Why }

// ParseEgressRule reads --http-allow entries: an address, a CIDR or a host name.
func ParseEgressRule(entries []string) (*EgressRule, error) {
	rule := &EgressRule{hosts: map[string]bool{}}
	for _, entry := range entries {
		text := strings.TrimSpace(entry)
		if prefix, err := netip.ParsePrefix(text); err == nil {
			rule.networks = append(rule.networks, prefix.Masked())
			continue
		}
		if addr, err := netip.ParseAddr(text); err == nil {
			rule.networks = append(rule.networks, netip.PrefixFrom(addr, addr.BitLen()))
			continue
		}
		name := strings.TrimSuffix(strings.ToLower(text), ".")
		if !validHostName(name) {
			return nil, fmt.Errorf("--http-allow %q: an address, a CIDR (10.1.2.0/24, fd00::/8) or a host name", entry)
		}
		rule.hosts[name] = true
	}
	return rule, nil
}

func validHostName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// AllowsHost: a URL naming host is allowed by name, wherever it resolves.
func (r *EgressRule) AllowsHost(host string) bool {
	return r.hosts[strings.TrimSuffix(strings.ToLower(host), ".")]
}

// unwrapped is the IPv4 address an IPv4-mapped or NAT64 IPv6 address stands for.
func unwrapped(addr netip.Addr) netip.Addr {
	if addr.Is4In6() {
		return addr.Unmap()
	}
	if addr.Is6() && nat64.Contains(addr) {
		b := addr.As16()
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	return addr
}

// WhyRefused is "" if the worker may connect to addr (reached for host), else why not,
// naming the address, its range and the flag that would allow it.
func (r *EgressRule) WhyRefused(given netip.Addr, host string) string {
	given = given.WithZone("")
	ip := unwrapped(given)
	for _, n := range r.networks {
		if n.Contains(ip) {
			return ""
		}
	}
	why := ""
	for _, rr := range refusedRanges {
		if rr.prefix.Contains(ip) {
			why = rr.why
			break
		}
	}
	if why == "" {
		return ""
	}
	if ip != given {
		why += ", written as IPv6"
	}
	named := given.String()
	if host != "" && host != named {
		named = fmt.Sprintf("%s resolves to %s", host, given)
	}
	return fmt.Sprintf("egress refused: %s, %s; a worker calls only public addresses unless started with "+
		"--http-allow %s (or a CIDR or host name covering it)", named, why, ip)
}

// control is a net.Dialer Control for connections made for host: it refuses an
// address the rule refuses, before the socket connects.
func (r *EgressRule) control(host string) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if r.AllowsHost(host) {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &EgressRefused{fmt.Sprintf("egress refused: %s: not an address (%v)", address, err)}
		}
		if why := r.WhyRefused(ap.Addr(), host); why != "" {
			return &EgressRefused{why}
		}
		return nil
	}
}

func asEgressRefused(err error) *EgressRefused {
	var refused *EgressRefused
	if errors.As(err, &refused) {
		return refused
	}
	return nil
}
