// Package clientip finds the client of a request and makes its key: the
// address of the connection, or, behind trusted proxies, the address their
// forwarding header names (X-Forwarded-For, or RFC 7239's Forwarded), an
// IPv6 address grouped by its /64 network. It is shared by httplimit (the
// Forwarded and X-Forwarded-For request headers) and grpclimit (the same
// fields as lowercase gRPC metadata), so that both apply exactly the same
// rules; each package documents them for its users.
//
// Nothing here allocates on the path of a request that is well formed,
// except the text of an IPv6 key.
package clientip

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Header names the forwarding header a trusted proxy writes. Its values are
// those of httplimit.ProxyHeader and grpclimit.ProxyHeader, which convert
// to it.
type Header uint8

const (
	// XForwardedFor is the de facto standard "X-Forwarded-For: client,
	// proxy1, proxy2", to which each proxy appends the address it received
	// the request from.
	XForwardedFor Header = iota + 1
	// Forwarded is RFC 7239's "Forwarded: for=client, for=proxy1"; the for=
	// parameter of each element is read.
	Forwarded
)

// String returns the header's name as HTTP writes it ("X-Forwarded-For",
// "Forwarded"), or "ProxyHeader(n)" for a value that is neither, as the
// exported types that convert to Header print in error messages.
func (h Header) String() string {
	switch h {
	case XForwardedFor:
		return "X-Forwarded-For"
	case Forwarded:
		return "Forwarded"
	}
	return "ProxyHeader(" + strconv.Itoa(int(h)) + ")"
}

// MaxHops is how many of the rightmost hops of a forwarding header are
// kept: more than any real chain of trusted proxies. A request whose whole
// kept tail is trusted while more hops precede it has no client.
const MaxHops = 32

// Proxies is a trusted-proxy configuration: the networks of the proxies and
// the one header they write. A nil *Proxies trusts nobody. It is immutable
// once built by [Trust].
type Proxies struct {
	header Header
	nets   []netip.Prefix // masked
}

// Header returns the header the proxies write.
func (p *Proxies) Header() Header { return p.header }

// Trust returns prev (nil for none) with networks added, trusted to write
// header: the argument check of a WithTrustedProxies option. networks are
// CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") or single addresses. The
// error, for the option to wrap in its package's prefix and
// admit.ErrInvalidOption, says what is wrong and what would be right: a
// header that is neither XForwardedFor nor Forwarded, no networks, a network
// that does not parse, one of every address ("0.0.0.0/0", "::/0"), networks
// that together cover every address of a family ("0.0.0.0/1" and
// "128.0.0.0/1", with prev's; IPv4-mapped prefixes count as the IPv4
// networks they map), or a header other than prev's. Each message starts
// with "WithTrustedProxies".
func Trust(prev *Proxies, header Header, networks []string) (*Proxies, error) {
	if header != XForwardedFor && header != Forwarded {
		return nil, fmt.Errorf("WithTrustedProxies: %v is not a forwarding header; want XForwardedFor or Forwarded", header)
	}
	if len(networks) == 0 {
		return nil, fmt.Errorf("WithTrustedProxies(%v): no networks; name your proxies' networks, such as \"10.0.0.0/8\"", header)
	}
	if prev != nil && prev.header != header {
		return nil, fmt.Errorf("WithTrustedProxies: both %v and %v; trust the one header your proxies write", prev.header, header)
	}
	p := &Proxies{header: header}
	if prev != nil {
		p.nets = append(p.nets, prev.nets...)
	}
	for _, s := range networks {
		n, ok := parseNetwork(s)
		if !ok {
			return nil, fmt.Errorf("WithTrustedProxies: %s is not a network; want a CIDR prefix such as \"10.0.0.0/8\" or \"2001:db8::/32\", or an address", Quote(s))
		}
		if n.Bits() == 0 {
			return nil, fmt.Errorf("WithTrustedProxies: %s trusts every address, which lets any client choose its key; name your proxies' networks", Quote(s))
		}
		p.nets = append(p.nets, n)
	}
	if msg := p.coversAFamily(); msg != "" {
		return nil, fmt.Errorf("WithTrustedProxies: %s, which lets any client choose its key; name your proxies' networks", msg)
	}
	return p, nil
}

// Trusts reports whether a (unmapped, without zone, as [ParseHop] and
// [Normalize] return it) is a trusted proxy; a nil *Proxies trusts nobody.
func (p *Proxies) Trusts(a netip.Addr) bool {
	if p == nil {
		return false
	}
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// mappedIPv4 holds the IPv4-mapped IPv6 addresses. Every address read is
// unmapped, so no client is ever matched against an IPv6 prefix by one of
// these: as far as trust goes, they belong to IPv4.
var mappedIPv4 = netip.MustParsePrefix("::ffff:0:0/96")

// coversAFamily returns "" unless the trusted networks, together, contain
// every address a client of one family can have; then it says which networks
// do, for an error. Trusting them all is trusting "0.0.0.0/0" or "::/0": any
// client could then write its own address in the header.
func (p *Proxies) coversAFamily() string {
	for _, is4 := range []bool{true, false} {
		var fam []netip.Prefix
		for _, n := range p.nets {
			if n.Addr().Is4() == is4 {
				fam = append(fam, n)
			}
		}
		if len(fam) == 0 {
			continue
		}
		slices.SortFunc(fam, func(a, b netip.Prefix) int {
			if c := a.Addr().Compare(b.Addr()); c != 0 {
				return c
			}
			return a.Bits() - b.Bits()
		})
		fam = slices.Compact(fam)
		family, what := "IPv4", "every IPv4 address"
		if !is4 {
			family, what = "IPv6", "every IPv6 address"
			if !covers(fam, netip.IPv6Unspecified()) {
				// The mapped addresses are never matched as IPv6: a set that
				// leaves out only them still trusts every IPv6 client.
				what = "every IPv6 address (the IPv4-mapped ones count as IPv4)"
				with := append(slices.Clone(fam), mappedIPv4)
				slices.SortFunc(with, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
				if !covers(with, netip.IPv6Unspecified()) {
					continue
				}
			}
		} else if !covers(fam, netip.IPv4Unspecified()) {
			continue
		}
		const shown = 4
		var sb strings.Builder
		sb.WriteString("the ")
		sb.WriteString(family)
		sb.WriteString(" networks ")
		for i, n := range fam[:min(len(fam), shown)] {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(n.String())
		}
		if len(fam) > shown {
			sb.WriteString(" and ")
			sb.WriteString(strconv.Itoa(len(fam) - shown))
			sb.WriteString(" more")
		}
		sb.WriteString(" cover ")
		sb.WriteString(what)
		return sb.String()
	}
	return ""
}

// covers reports whether the masked prefixes nets, sorted by address and all
// of first's family, together contain every address from first (the family's
// lowest) to the family's highest.
func covers(nets []netip.Prefix, first netip.Addr) bool {
	next := first // the lowest address not yet known to be covered
	for _, n := range nets {
		if n.Addr().Compare(next) > 0 {
			return false // a gap before n, and every later prefix starts after it
		}
		if last := lastAddr(n); last.Compare(next) >= 0 {
			if next = last.Next(); !next.IsValid() {
				return true // last is the family's highest address
			}
		}
	}
	return false
}

// lastAddr returns the highest address of the masked prefix n.
func lastAddr(n netip.Prefix) netip.Addr {
	a := n.Addr()
	if a.Is4() {
		b := a.As4()
		for i := n.Bits(); i < 32; i++ {
			b[i/8] |= 1 << (7 - i%8)
		}
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	for i := n.Bits(); i < 128; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	return netip.AddrFrom16(b)
}

// parseNetwork reads a trusted network: a CIDR prefix ("10.0.0.0/8",
// "2001:db8::/32") or a single address ("10.0.0.1").
func parseNetwork(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

// hops holds the rightmost MaxHops entries of a forwarding header, in a ring.
type hops struct {
	ring  [MaxHops]string
	total int // entries pushed, kept or not
}

func (h *hops) push(s string) {
	h.ring[h.total%MaxHops] = s
	h.total++
}

// kept returns how many entries fromRight can return.
func (h *hops) kept() int { return min(h.total, MaxHops) }

// fromRight returns the i-th entry from the right, i < kept().
func (h *hops) fromRight(i int) string { return h.ring[(h.total-1-i)%MaxHops] }

// badHop stands for an entry that is not an address (a Forwarded element
// without for=, an obfuscated or "unknown" node, a malformed line): reaching
// it leaves the request without a client.
const badHop = "\x00"

// Behind returns the client of a request that arrived from peer, a trusted
// proxy (p.Trusts(peer)), whose field lines of p's header are lines: the
// rightmost address of the header that is not a trusted proxy. Every
// address to the left of that one was written by the client and may be
// forged. Without lines, the client is peer itself (the proxy, or a client
// on its network); if every hop is trusted, the leftmost. ok is false when
// a value that is not an address (garbage, "unknown", an obfuscated
// Forwarded node) comes before an untrusted address, or when the client is
// among hops beyond the rightmost [MaxHops]. text is the client's canonical
// text when it is a substring of lines (an IPv4 address written
// canonically), else "", as for [ParseHop]; peer's text is peerText.
func (p *Proxies) Behind(peer netip.Addr, peerText string, lines []string) (a netip.Addr, text string, ok bool) {
	var hs hops
	switch p.header {
	case XForwardedFor:
		for _, line := range lines {
			pushXFF(&hs, line)
		}
	case Forwarded:
		for _, line := range lines {
			pushForwarded(&hs, line)
		}
	}
	if hs.total == 0 {
		return peer, peerText, true // the proxy itself, or a client on its network
	}
	for i := range hs.kept() {
		a, text, ok = ParseHop(hs.fromRight(i))
		if !ok {
			return netip.Addr{}, "", false
		}
		if !p.Trusts(a) {
			return a, text, true
		}
	}
	if hs.total > MaxHops {
		return netip.Addr{}, "", false // the client is among the dropped hops
	}
	// Every hop is a trusted proxy: the leftmost is the original client as
	// far as anyone can tell.
	return a, text, true
}

// pushXFF pushes the entries of one X-Forwarded-For line, left to right.
func pushXFF(hs *hops, line string) {
	for line != "" {
		entry := line
		if i := strings.IndexByte(line, ','); i >= 0 {
			entry, line = line[:i], line[i+1:]
		} else {
			line = ""
		}
		if entry = strings.Trim(entry, " \t"); entry != "" {
			hs.push(entry)
		}
	}
}

// pushForwarded pushes the for= value of each element of one Forwarded line
// (RFC 7239, section 4), left to right: badHop for an element without one, or
// with one given twice. A line it cannot parse is one badHop.
func pushForwarded(hs *hops, line string) {
	var elem string // the for= value of the current element
	pairs, fors := 0, 0
	i := 0
	end := func() {
		if pairs > 0 {
			if fors != 1 {
				elem = badHop
			}
			hs.push(elem)
		}
		elem, pairs, fors = "", 0, 0
	}
	for {
		i = skipOWS(line, i)
		if i == len(line) {
			end()
			return
		}
		switch line[i] {
		case ',':
			end()
			i++
			continue
		case ';':
			i++
			continue
		}
		// forwarded-pair = token "=" value
		j := i
		for j < len(line) && IsTchar(line[j]) {
			j++
		}
		if j == i || j == len(line) || line[j] != '=' {
			break
		}
		name := line[i:j]
		v, next, ok := forwardedValue(line, j+1)
		if !ok {
			break
		}
		pairs++
		if strings.EqualFold(name, "for") {
			fors++
			elem = v
		}
		i = skipOWS(line, next)
		if i < len(line) && line[i] != ',' && line[i] != ';' {
			break
		}
	}
	// Malformed: one badHop to the right of whatever the line pushed before
	// the error, so that a walk from the right stops here.
	hs.push(badHop)
}

// forwardedValue reads a value (token or quoted-string) at line[i:]. A quoted
// value with a backslash escape is returned as badHop: no address needs one.
func forwardedValue(line string, i int) (v string, next int, ok bool) {
	if i < len(line) && line[i] == '"' {
		escaped := false
		for j := i + 1; j < len(line); j++ {
			switch line[j] {
			case '\\':
				escaped = true
				j++
			case '"':
				if escaped {
					return badHop, j + 1, true
				}
				return line[i+1 : j], j + 1, true
			}
		}
		return "", 0, false // unterminated
	}
	// A token; tolerate the brackets and colons that some proxies leave
	// unquoted (for=[2001:db8::1]:80), stopping at the delimiters.
	j := i
	for j < len(line) && line[j] > ' ' && line[j] < 0x7f && line[j] != ',' && line[j] != ';' && line[j] != '"' {
		j++
	}
	if j == i {
		return "", 0, false
	}
	return line[i:j], j, true
}

func skipOWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// IsTchar reports whether c may appear in an HTTP token (RFC 9110, 5.6.2).
func IsTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// ParseHop reads an address as an HTTP RemoteAddr or a forwarding header
// carries it: "203.0.113.7", "203.0.113.7:4711", "2001:db8::1",
// "[2001:db8::1]:4711" or "[2001:db8::1]". An IPv4-mapped address is
// unmapped and a zone dropped. text is the host part of s when it is an IPv4
// address in canonical form (so that its key needs no allocation), else "".
// It allocates nothing unless s is malformed.
func ParseHop(s string) (a netip.Addr, text string, ok bool) {
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, "", false
		}
		host, port = s[1:end], s[end+1:]
		if port != "" {
			if port[0] != ':' || len(port) == 1 {
				return netip.Addr{}, "", false
			}
			port = port[1:]
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		host, port = s[:i], s[i+1:] // one colon: IPv4 with a port
		if port == "" {
			return netip.Addr{}, "", false
		}
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return netip.Addr{}, "", false
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, "", false
	}
	if a.Is4() {
		return a, host, true
	}
	a, ok = Normalize(a)
	return a, "", ok
}

// Normalize returns a unmapped (an IPv4-mapped IPv6 address counts as its
// IPv4 address) and without zone; ok is false for the zero Addr.
func Normalize(a netip.Addr) (netip.Addr, bool) {
	switch {
	case !a.IsValid():
		return netip.Addr{}, false
	case a.Is4In6():
		return a.Unmap(), true
	}
	return a.WithZone(""), true
}

// Key is the key of a client address a: its text for IPv4 (text if not
// empty, which must then be a's canonical text, as [ParseHop] and
// [Proxies.Behind] return it: no allocation), its /64 network for IPv6,
// "2001:db8:1:2::/64", since a single host commonly owns a whole /64.
func Key(a netip.Addr, text string) string {
	if a.Is4() {
		if text != "" {
			return text
		}
		return a.String()
	}
	var buf [48]byte
	return string(netip.PrefixFrom(a, 64).Masked().AppendTo(buf[:0]))
}

// maxQuoted is the most bytes of an input an error message quotes.
const maxQuoted = 64

// Quote quotes s for an error message, cut to its first 64 bytes (and "…"),
// so that a huge input (a 1 MiB network list, a header name read from a
// file) cannot make a huge error. A rune that straddles the cut is left out
// whole; bytes that are not UTF-8 are cut where they are (strconv.Quote
// escapes them).
func Quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > maxQuoted-utf8.UTFMax+1 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
