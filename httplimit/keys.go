package httplimit

import (
	"net/http"

	"github.com/admit-go/admit/internal/clientip"
	"github.com/admit-go/admit/internal/limitopt"
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
	p limitopt.Part
}

// ctors names the constructors of KeyParts by kind, for String.
var ctors = limitopt.Ctors{limitopt.PartIP: "ClientIP", limitopt.PartNamed: "RequestHeader",
	limitopt.PartMethod: "Method", limitopt.PartPath: "Path", limitopt.PartRoute: "Route"}

// String returns the part as it would be written in Go, for error messages.
func (p KeyPart) String() string { return p.p.Go(&ctors) }

// ClientIP is the key part of the client's address: "203.0.113.7", or an IPv6
// address's /64 network, "2001:db8:1:2::/64". It is taken from RemoteAddr, or
// from the forwarding header of a trusted proxy (see [WithTrustedProxies]).
// It is the default key.
func ClientIP() KeyPart { return KeyPart{limitopt.Part{Kind: limitopt.PartIP}} }

// RequestHeader is the key part of the first value of the request header
// name, such as an API key or a user id set by an authenticating proxy. A
// request without the header, or with an empty value, has no key.
//
// A header is only as trustworthy as whoever sets it: a client that can put
// any value there gets a fresh budget per value. Key on an identity that is
// authenticated before the middleware runs.
func RequestHeader(name string) KeyPart {
	return KeyPart{limitopt.Part{Kind: limitopt.PartNamed, Name: http.CanonicalHeaderKey(name)}}
}

// Method is the key part of the request method: WithKeyFrom(ClientIP(),
// Method()) gives each client one budget for GET and another for POST. The
// client chooses the method, and may invent one.
func Method() KeyPart { return KeyPart{limitopt.Part{Kind: limitopt.PartMethod}} }

// Path is the key part of the request's URL path, as decoded by net/http.
// Paths are chosen by the client, so every distinct path is a new budget:
// prefer [Route] where the middleware runs inside a [http.ServeMux].
func Path() KeyPart { return KeyPart{limitopt.Part{Kind: limitopt.PartPath}} }

// Route is the key part of the [http.ServeMux] pattern that matched the
// request ([http.Request.Pattern], such as "GET /items/{id}"): one budget per
// route, however many paths it matches. It is set only when the middleware
// wraps a handler registered on a ServeMux (mux.Handle(pattern,
// mw.Handler(h))); a request without a pattern has no key.
func Route() KeyPart { return KeyPart{limitopt.Part{Kind: limitopt.PartRoute}} }

// part returns the value of part p for r.
func (m *Middleware) part(r *http.Request, p KeyPart) (string, bool) {
	var v string
	switch p.p.Kind {
	case limitopt.PartIP:
		return m.clientKey(r)
	case limitopt.PartNamed:
		if vs := r.Header[p.p.Name]; len(vs) > 0 {
			v = vs[0]
		}
	case limitopt.PartMethod:
		v = r.Method
	case limitopt.PartPath:
		if r.URL != nil {
			v = r.URL.Path
		}
	case limitopt.PartRoute:
		v = r.Pattern
	}
	return v, v != ""
}

// partsKey is the KeyFunc of WithKeyFrom: the parts joined by a NUL byte
// (limitopt.JoinKey). No part may contain it: net/http rejects it in
// methods and header values, and a part that does contain it (a path with
// "%00") makes the request keyless, so no two distinct combinations of
// parts give the same key.
func (m *Middleware) partsKey(r *http.Request) (string, bool) {
	if len(m.parts) == 1 { // the default key, ClientIP(), and the commonest: a direct call
		return m.part(r, m.parts[0]) // a substring of the request: no allocation
	}
	return limitopt.JoinKey(m.parts, func(p KeyPart) (string, bool) { return m.part(r, p) }, MaxKeyBytes)
}

// clientKey is the ClientIP key of r.
func (m *Middleware) clientKey(r *http.Request) (string, bool) {
	a, text, ok := m.clientAddr(r)
	if !ok {
		return "", false
	}
	return clientip.Key(a, text), true
}
