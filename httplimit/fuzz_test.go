package httplimit_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/admit-go/admit/httplimit"
)

// FuzzClientKey feeds arbitrary RemoteAddr, X-Forwarded-For and Forwarded
// values to a middleware that trusts 10.0.0.0/8, and checks that key
// derivation never panics, that a key is always a client address (IPv4) or
// /64 network (IPv6) outside the trusted network unless every hop was
// trusted, and that a peer outside the trusted network is keyed by its own
// address whatever its headers say.
func FuzzClientKey(f *testing.F) {
	for _, s := range [][3]string{
		{"10.0.0.1:1", "198.51.100.7, 10.0.0.2", ""},
		{"10.0.0.1:1", "", `for="[2001:db8::1]:4711";proto=https, for=10.0.0.2`},
		{"203.0.113.7:1", "1.1.1.1", "for=1.1.1.1"},
		{"[::ffff:10.0.0.1]:80", "::ffff:198.51.100.7", ""},
		{"10.0.0.1:1", "garbage, , ,", `for="unterminated`},
		{"[fe80::1%eth0]:80", "[2001:db8::1]:443", "For=_hidden;by=x"},
		{"", "", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	trusted := netip.MustParsePrefix("10.0.0.0/8")
	f.Fuzz(func(t *testing.T, remote, xffValue, fwdValue string) {
		for _, header := range []httplimit.ProxyHeader{httplimit.XForwardedFor, httplimit.Forwarded} {
			rec := &recorder{}
			mw, err := httplimit.New(rec, httplimit.WithTrustedProxies(header, "10.0.0.0/8"))
			if err != nil {
				t.Fatal(err)
			}
			bare := &recorder{}
			plain, err := httplimit.New(bare)
			if err != nil {
				t.Fatal(err)
			}
			r := request(remote, "/")
			r.Header = http.Header{"X-Forwarded-For": {xffValue}, "Forwarded": {fwdValue}}
			serve(mw.Handler(ok), r)
			serve(plain.Handler(ok), r)
			key, keyed := rec.last()
			peerKey, peerKeyed := bare.last()
			if !keyed {
				continue
			}
			if len(key) > httplimit.MaxKeyBytes {
				t.Fatalf("key of %d bytes", len(key))
			}
			if p, err := netip.ParsePrefix(key); err == nil {
				if !p.Addr().Is6() || p.Bits() != 64 || p.Masked() != p {
					t.Fatalf("key %q: a prefix that is not an IPv6 /64", key)
				}
			} else if a, err := netip.ParseAddr(key); err != nil || !a.Is4() || a.String() != key {
				t.Fatalf("key %q is neither an IPv4 address nor an IPv6 /64", key)
			}
			if !peerKeyed {
				t.Fatalf("keyed %q with trusted proxies, but RemoteAddr %q alone has no key", key, remote)
			}
			// The trusted network is IPv4, so an IPv6 peer (keyed by its /64)
			// is never trusted.
			peer, err := netip.ParseAddr(peerKey)
			if trustedPeer := err == nil && trusted.Contains(peer); !trustedPeer && key != peerKey {
				t.Fatalf("untrusted peer %q keyed as %q from its headers", remote, key)
			}
		}
	})
}
