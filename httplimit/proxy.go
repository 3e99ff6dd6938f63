package httplimit

import (
	"net/http"
	"net/netip"

	"github.com/admit-go/admit/internal/clientip"
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

// A ProxyHeader converts to the clientip.Header of the same name: a
// constant index out of range fails to compile should they ever differ.
var _ = [1]struct{}{}[XForwardedFor-ProxyHeader(clientip.XForwardedFor)+Forwarded-ProxyHeader(clientip.Forwarded)]

// String returns the header's name.
func (h ProxyHeader) String() string { return clientip.Header(h).String() }

// clientAddr returns the client address of r: RemoteAddr's, or, when that is
// a trusted proxy, the rightmost address of the forwarding header that is not
// a trusted proxy (package clientip has the rules, which grpclimit shares).
// text is the address's canonical text when it is a substring of the
// request (an IPv4 address written canonically), else "".
func (m *Middleware) clientAddr(r *http.Request) (a netip.Addr, text string, ok bool) {
	peer, text, ok := clientip.ParseHop(r.RemoteAddr)
	if !ok || !m.proxies.Trusts(peer) {
		return peer, text, ok
	}
	var lines []string
	switch m.proxies.Header() {
	case clientip.XForwardedFor:
		lines = r.Header["X-Forwarded-For"]
	case clientip.Forwarded:
		lines = r.Header["Forwarded"]
	}
	return m.proxies.Behind(peer, text, lines)
}
