package httplimit

import (
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ProxyHeader names the forwarding header a trusted proxy writes; see
// [WithTrustedProxies].
type ProxyHeader uint8

const (
	// XForwardedFor is the de facto standard "X-Forwarded-For: client, proxy1,
	// proxy2", to which each proxy appends the address it received the request
	// from.
	XForwardedFor ProxyHeader = iota + 1
	// Forwarded is RFC 7239's "Forwarded: for=client, for=proxy1"; the
	// middleware reads the for= parameter of each element.
	Forwarded
)

// String returns the header's name.
func (h ProxyHeader) String() string {
	switch h {
	case XForwardedFor:
		return "X-Forwarded-For"
	case Forwarded:
		return "Forwarded"
	}
	return "ProxyHeader(" + strconv.Itoa(int(h)) + ")"
}

// maxHops is how many of the rightmost hops of a forwarding header the
// middleware keeps: more than any real chain of trusted proxies. A request
// whose whole kept tail is trusted while more hops precede it has no key.
const maxHops = 32

// proxies is the trusted-proxy configuration. A nil *proxies trusts nobody.
type proxies struct {
	header ProxyHeader
	nets   []netip.Prefix // masked
}

// trusts reports whether a (unmapped, without zone) is a trusted proxy.
func (p *proxies) trusts(a netip.Addr) bool {
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// mappedIPv4 holds the IPv4-mapped IPv6 addresses. The middleware unmaps
// every address it reads, so no client is ever matched against an IPv6
// prefix by one of these: as far as trust goes, they belong to IPv4.
var mappedIPv4 = netip.MustParsePrefix("::ffff:0:0/96")

// coversAFamily returns "" unless the trusted networks, together, contain
// every address a client of one family can have; then it says which networks
// do, for an error. Trusting them all is trusting "0.0.0.0/0" or "::/0": any
// client could then write its own address in the header.
func (p *proxies) coversAFamily() string {
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

// hops holds the rightmost maxHops entries of a forwarding header, in a ring.
type hops struct {
	ring  [maxHops]string
	total int // entries pushed, kept or not
}

func (h *hops) push(s string) {
	h.ring[h.total%maxHops] = s
	h.total++
}

// kept returns how many entries fromRight can return.
func (h *hops) kept() int { return min(h.total, maxHops) }

// fromRight returns the i-th entry from the right, i < kept().
func (h *hops) fromRight(i int) string { return h.ring[(h.total-1-i)%maxHops] }

// badHop stands for an entry that is not an address (a Forwarded element
// without for=, an obfuscated or "unknown" node, a malformed line): reaching
// it leaves the request without a key.
const badHop = "\x00"

// clientAddr returns the client address of r: RemoteAddr's, or, when that is
// a trusted proxy, the rightmost address of the forwarding header that is not
// a trusted proxy. text is the address's canonical text when it is a
// substring of the request (an IPv4 address written canonically), else "".
func (m *Middleware) clientAddr(r *http.Request) (a netip.Addr, text string, ok bool) {
	peer, text, ok := parseHop(r.RemoteAddr)
	if !ok || m.proxies == nil || !m.proxies.trusts(peer) {
		return peer, text, ok
	}
	var hs hops
	switch m.proxies.header {
	case XForwardedFor:
		for _, line := range r.Header["X-Forwarded-For"] {
			pushXFF(&hs, line)
		}
	case Forwarded:
		for _, line := range r.Header["Forwarded"] {
			pushForwarded(&hs, line)
		}
	}
	if hs.total == 0 {
		return peer, text, true // the proxy itself, or a client on its network
	}
	for i := range hs.kept() {
		a, text, ok = parseHop(hs.fromRight(i))
		if !ok {
			return netip.Addr{}, "", false
		}
		if !m.proxies.trusts(a) {
			return a, text, true
		}
	}
	if hs.total > maxHops {
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
		for j < len(line) && isTchar(line[j]) {
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

// isTchar reports whether c may appear in an HTTP token (RFC 9110, 5.6.2).
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// parseHop reads an address as RemoteAddr or a forwarding header carries it:
// "203.0.113.7", "203.0.113.7:4711", "2001:db8::1", "[2001:db8::1]:4711" or
// "[2001:db8::1]". An IPv4-mapped address is unmapped and a zone dropped.
// text is the host part of s when it is an IPv4 address in canonical form (so
// that its key needs no allocation), else "". It allocates nothing unless s
// is malformed.
func parseHop(s string) (a netip.Addr, text string, ok bool) {
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
	return normalize(a, host)
}

// normalize unmaps a and drops its zone; text is kept only for an IPv4
// address that was not mapped, whose text netip accepted (and netip accepts
// only the canonical dotted quad).
func normalize(a netip.Addr, text string) (netip.Addr, string, bool) {
	switch {
	case a.Is4():
		return a, text, true
	case a.Is4In6():
		return a.Unmap(), "", true
	}
	return a.WithZone(""), "", true
}
