package grpclimit

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/admit-go/admit/internal/clientip"
	"github.com/admit-go/admit/internal/limitopt"
)

// MaxKeyBytes is the longest key the interceptors charge. A longer key,
// from any source, counts as no key (see [WithUnknownKey]): keys come from
// calls, and a limiter keeps a copy of each. It equals httplimit.MaxKeyBytes
// and policy.MaxNameBytes, the longest user name a rule book can hold.
const MaxKeyBytes = 1024

// A KeyFunc derives the key a call is charged to from the call's context
// and its full method name ("/package.Service/Method"). It returns ok ==
// false when the call carries no key; an empty key, or one longer than
// [MaxKeyBytes], also counts as no key. It is called once per call,
// concurrently from many goroutines.
//
// A key is the identity an attacker would like to vary: derive it from
// something the client cannot choose freely (its address, an authenticated
// identity), and bound the number of distinct keys.
type KeyFunc func(ctx context.Context, fullMethod string) (key string, ok bool)

// A KeyPart is one part of a key built by [WithKeyFrom]: [PeerIP],
// [Metadata] or [FullMethod]. The zero KeyPart is not a part; WithKeyFrom
// rejects it.
type KeyPart struct {
	p limitopt.Part
}

// ctors names the constructors of KeyParts by kind, for String.
var ctors = limitopt.Ctors{limitopt.PartIP: "PeerIP", limitopt.PartNamed: "Metadata", limitopt.PartMethod: "FullMethod"}

// String returns the part as it would be written in Go, for error messages.
func (p KeyPart) String() string { return p.p.Go(&ctors) }

// PeerIP is the key part of the caller's address: "203.0.113.7", or an IPv6
// address's /64 network, "2001:db8:1:2::/64" (a single host commonly owns a
// whole /64, so per-address IPv6 limits are trivially evaded); an
// IPv4-mapped IPv6 address counts as its IPv4 address. It is the address of
// the connection (the call's [peer.Peer]), or, behind trusted proxies, the
// one their forwarding metadata names (see [WithTrustedProxies]). A call
// whose peer is not an IP address (a Unix socket, an in-memory listener) has
// no key. It is the default key of [New] and [ForService]; an outgoing call
// has no peer yet, and [NewClient] refuses it.
func PeerIP() KeyPart { return KeyPart{limitopt.Part{Kind: limitopt.PartIP}} }

// Metadata is the key part of the first value of the metadata key name
// (lowercased, as gRPC carries metadata keys), such as an API key or a
// tenant set by an authenticating proxy: the incoming metadata on a server,
// the outgoing metadata on a [Client]. A call without it, or with an empty
// value, has no key. A binary key ("…-bin") gives its decoded bytes.
//
// Metadata is only as trustworthy as whoever sets it: a client that can put
// any value there gets a fresh budget per value. Key on an identity that is
// authenticated before the interceptor runs.
func Metadata(name string) KeyPart {
	return KeyPart{limitopt.Part{Kind: limitopt.PartNamed, Name: strings.ToLower(name)}}
}

// FullMethod is the key part of the call's full method name,
// "/package.Service/Method": WithKeyFrom(PeerIP(), FullMethod()) gives each
// client one budget per method. A server's interceptors see only the
// methods it registered, unless it has a grpc.UnknownServiceHandler, whose
// method names the client chooses.
func FullMethod() KeyPart { return KeyPart{limitopt.Part{Kind: limitopt.PartMethod}} }

// badName says what is wrong with the name of WithKeyFrom's part p, or ""
// when nothing is (or p has no name).
func badName(p KeyPart) string {
	if p.p.Kind != limitopt.PartNamed || validMetadataKey(p.p.Name) {
		return ""
	}
	return fmt.Sprintf("WithKeyFrom: Metadata(%s): not a metadata key; want lowercase letters, digits, '-', '_' and '.', such as \"x-api-key\"", quote(p.p.Name))
}

// quote quotes s for an error message, cut to its first 64 bytes (and "…"),
// so that a huge input cannot make a huge error.
func quote(s string) string { return clientip.Quote(s) }

// validMetadataKey reports whether s is a metadata key gRPC can carry:
// lowercase letters, digits, '-', '_' and '.' (the gRPC over HTTP/2
// protocol's Header-Name).
func validMetadataKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// ProxyHeader names the forwarding metadata a trusted proxy writes; see
// [WithTrustedProxies]. A proxy in front of a gRPC server (Envoy, an HTTP/2
// load balancer) writes the HTTP header, which the server reads as
// metadata under the lowercase name.
type ProxyHeader uint8

const (
	// XForwardedFor is "x-forwarded-for: client, proxy1, proxy2", to which
	// each proxy appends the address it received the call from.
	XForwardedFor ProxyHeader = iota + 1
	// Forwarded is RFC 7239's "forwarded: for=client, for=proxy1"; the
	// interceptor reads the for= parameter of each element.
	Forwarded
)

// A ProxyHeader converts to the clientip.Header of the same name: a
// constant index out of range fails to compile should they ever differ.
var _ = [1]struct{}{}[XForwardedFor-ProxyHeader(clientip.XForwardedFor)+Forwarded-ProxyHeader(clientip.Forwarded)]

// String returns the metadata key: "x-forwarded-for" or "forwarded".
func (h ProxyHeader) String() string {
	switch h {
	case XForwardedFor:
		return mdXForwardedFor
	case Forwarded:
		return mdForwarded
	}
	return "ProxyHeader(" + strconv.Itoa(int(h)) + ")"
}

// The metadata keys of the forwarding headers.
const (
	mdXForwardedFor = "x-forwarded-for"
	mdForwarded     = "forwarded"
)

// part returns the value of part p for a call.
func (c *core) part(ctx context.Context, method string, p KeyPart) (string, bool) {
	var v string
	switch p.p.Kind {
	case limitopt.PartIP:
		return c.peerKey(ctx)
	case limitopt.PartNamed:
		if c.client {
			if md, ok := metadata.FromOutgoingContext(ctx); ok {
				if vs := md[p.p.Name]; len(vs) > 0 {
					v = vs[0]
				}
			}
		} else if vs := metadata.ValueFromIncomingContext(ctx, p.p.Name); len(vs) > 0 {
			v = vs[0]
		}
	case limitopt.PartMethod:
		v = method
	}
	return v, v != ""
}

// partsKey is the KeyFunc of WithKeyFrom: the parts joined by a NUL byte
// (limitopt.JoinKey). No part may contain it: a part that does makes the
// call keyless, so no two distinct combinations of parts give the same key.
func (c *core) partsKey(ctx context.Context, method string) (string, bool) {
	if len(c.parts) == 1 { // the default keys, PeerIP() and FullMethod(): a direct call
		return c.part(ctx, method, c.parts[0])
	}
	return limitopt.JoinKey(c.parts, func(p KeyPart) (string, bool) { return c.part(ctx, method, p) }, MaxKeyBytes)
}

// peerKey is the PeerIP key of a call: its peer's address, or, when that
// is a trusted proxy, the client its forwarding metadata names, by the
// rules httplimit applies to its headers (package clientip).
func (c *core) peerKey(ctx context.Context) (string, bool) {
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.Addr == nil {
		return "", false
	}
	var a netip.Addr
	text := ""
	if tcp, isTCP := pr.Addr.(*net.TCPAddr); isTCP {
		a, ok = clientip.Normalize(tcp.AddrPort().Addr())
	} else {
		a, text, ok = clientip.ParseHop(pr.Addr.String())
	}
	if !ok {
		return "", false
	}
	if c.proxies.Trusts(a) {
		var lines []string
		switch c.proxies.Header() {
		case clientip.XForwardedFor:
			lines = metadata.ValueFromIncomingContext(ctx, mdXForwardedFor)
		case clientip.Forwarded:
			lines = metadata.ValueFromIncomingContext(ctx, mdForwarded)
		}
		if a, text, ok = c.proxies.Behind(a, text, lines); !ok {
			return "", false
		}
	}
	return clientip.Key(a, text), true
}
