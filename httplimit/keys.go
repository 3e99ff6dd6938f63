package httplimit

import (
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// MaxKeyBytes is the longest key the middleware charges. A longer key, from
// any source, counts as no key (see [WithUnknownKey]): keys come from requests,
// and a limiter keeps a copy of each. It equals policy.MaxNameBytes, the
// longest user name a rule book can hold.
const MaxKeyBytes = 1024

// A KeyFunc derives the key a request is charged to. It returns ok == false
// when the request carries no key; an empty key, or one longer than
// [MaxKeyBytes], also counts as no key. It is called once per request,
// concurrently from many goroutines, and must not retain r.
//
// A key is the identity an attacker would like to vary: derive it from
// something the client cannot choose freely (its address, an authenticated
// identity), and bound the number of distinct keys.
type KeyFunc func(r *http.Request) (key string, ok bool)

// A KeyPart is one part of a key built by [WithKeyFrom]: [ClientIP],
// [RequestHeader], [Method], [Path] or [Route]. The zero KeyPart is not a
// part; WithKeyFrom rejects it.
type KeyPart struct {
	kind   partKind
	header string // canonical header name, for partHeader
}

type partKind uint8

const (
	partIP partKind = iota + 1
	partHeader
	partMethod
	partPath
	partRoute
)

// String returns the part as it would be written in Go, for error messages.
func (p KeyPart) String() string {
	switch p.kind {
	case partIP:
		return "ClientIP()"
	case partHeader:
		return "RequestHeader(" + strconv.Quote(p.header) + ")"
	case partMethod:
		return "Method()"
	case partPath:
		return "Path()"
	case partRoute:
		return "Route()"
	}
	return "KeyPart{}"
}

// ClientIP is the key part of the client's address: "203.0.113.7", or an IPv6
// address's /64 network, "2001:db8:1:2::/64". It is taken from RemoteAddr, or
// from the forwarding header of a trusted proxy (see [WithTrustedProxies]).
// It is the default key.
func ClientIP() KeyPart { return KeyPart{kind: partIP} }

// RequestHeader is the key part of the first value of the request header
// name, such as an API key or a user id set by an authenticating proxy. A
// request without the header, or with an empty value, has no key.
//
// A header is only as trustworthy as whoever sets it: a client that can put
// any value there gets a fresh budget per value. Key on an identity that is
// authenticated before the middleware runs.
func RequestHeader(name string) KeyPart {
	return KeyPart{kind: partHeader, header: http.CanonicalHeaderKey(name)}
}

// Method is the key part of the request method: WithKeyFrom(ClientIP(),
// Method()) gives each client one budget for GET and another for POST. The
// client chooses the method, and may invent one.
func Method() KeyPart { return KeyPart{kind: partMethod} }

// Path is the key part of the request's URL path, as decoded by net/http.
// Paths are chosen by the client, so every distinct path is a new budget:
// prefer [Route] where the middleware runs inside a [http.ServeMux].
func Path() KeyPart { return KeyPart{kind: partPath} }

// Route is the key part of the [http.ServeMux] pattern that matched the
// request ([http.Request.Pattern], such as "GET /items/{id}"): one budget per
// route, however many paths it matches. It is set only when the middleware
// wraps a handler registered on a ServeMux (mux.Handle(pattern,
// mw.Handler(h))); a request without a pattern has no key.
func Route() KeyPart { return KeyPart{kind: partRoute} }

// keySep separates the parts of a key. No part may contain it: net/http
// rejects it in methods and header values, and a part that does contain it
// (a path with "%00") makes the request keyless, so no two distinct
// combinations of parts give the same key.
const keySep = '\x00'

// part returns the value of part p for r.
func (m *Middleware) part(r *http.Request, p KeyPart) (string, bool) {
	var v string
	switch p.kind {
	case partIP:
		return m.clientKey(r)
	case partHeader:
		if vs := r.Header[p.header]; len(vs) > 0 {
			v = vs[0]
		}
	case partMethod:
		v = r.Method
	case partPath:
		if r.URL != nil {
			v = r.URL.Path
		}
	case partRoute:
		v = r.Pattern
	}
	return v, v != ""
}

// partsKey is the KeyFunc of WithKeyFrom: the parts joined by keySep.
func (m *Middleware) partsKey(r *http.Request) (string, bool) {
	if len(m.parts) == 1 {
		return m.part(r, m.parts[0]) // a substring of the request: no allocation
	}
	var buf [256]byte
	b := buf[:0]
	for i, p := range m.parts {
		v, ok := m.part(r, p)
		if !ok || strings.IndexByte(v, keySep) >= 0 {
			return "", false
		}
		if i > 0 {
			b = append(b, keySep)
		}
		b = append(b, v...)
		if len(b) > MaxKeyBytes {
			return "", false
		}
	}
	return string(b), true
}

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

// clientKey is the ClientIP key of r.
func (m *Middleware) clientKey(r *http.Request) (string, bool) {
	a, text, ok := m.clientAddr(r)
	if !ok {
		return "", false
	}
	return addrKey(a, text), true
}

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

// addrKey is the key of a client address: its text for IPv4, its /64
// network for IPv6.
func addrKey(a netip.Addr, text string) string {
	if a.Is4() {
		if text != "" {
			return text
		}
		return a.String()
	}
	var buf [48]byte
	return string(netip.PrefixFrom(a, 64).Masked().AppendTo(buf[:0]))
}
