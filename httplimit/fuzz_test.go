package httplimit_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/admit-go/admit"
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

// FuzzCompositeHeaders feeds arbitrary limits, quota names and decisions
// (with any binding index, in range or not) of a CompositeStore to the
// middleware, and checks that it never panics, that both fields parse as
// structured-field lists, that RateLimit reports one item, named as one of
// RateLimit-Policy's items when the index is a rule's, with t equal to
// Retry-After on a denial, and that the problem body is JSON naming the same
// policy.
func FuzzCompositeHeaders(f *testing.F) {
	f.Add("token-bucket,10,1s + fixed-window,30,1m", "default", 1, false, 0, int64(time.Second), int64(time.Minute))
	f.Add("sliding-log,5,1500ms + sliding-counter,7,2s + token-bucket,1,1ms", `a "b" \c`, 0, true, 3, int64(0), int64(1))
	f.Add("fixed-window,1,1h + fixed-window,2,1h", "x", 7, false, -1, int64(admit.Never), int64(-5))
	f.Add("token-bucket,3,10s", "default", 0, true, 2, int64(0), int64(admit.Never))
	f.Fuzz(func(t *testing.T, text, name string, which int, allowed bool, remaining int, retry, reset int64) {
		limits, err := admit.ParseLimits(text)
		if err != nil {
			return
		}
		store := &whichStore{limits: limits, which: which, d: admit.Decision{
			Allowed: allowed, Limit: limits.Limit(), Remaining: remaining,
			RetryAfter: time.Duration(retry), ResetAfter: time.Duration(reset),
		}}
		mw, err := httplimit.New(store, httplimit.WithPolicyName(name), httplimit.WithLegacyHeaders())
		if err != nil {
			if !errors.Is(err, admit.ErrInvalidOption) {
				t.Fatalf("New: %v, not an ErrInvalidOption", err)
			}
			return
		}
		w := serve(mw.Handler(ok), request("192.0.2.1:1", "/"))
		res := w.Result()
		policies, err := parseSFList(res.Header["Ratelimit-Policy"])
		if err != nil {
			t.Fatalf("RateLimit-Policy %q: %v", res.Header["Ratelimit-Policy"], err)
		}
		if len(policies) != limits.Len() {
			t.Fatalf("RateLimit-Policy %q: %d items for %d rules", res.Header["Ratelimit-Policy"], len(policies), limits.Len())
		}
		items, err := parseSFList(res.Header["Ratelimit"])
		if err != nil || len(items) != 1 {
			t.Fatalf("RateLimit %q: %d items, %v", res.Header["Ratelimit"], len(items), err)
		}
		if r, ok := items[0].param("r").(int64); !ok || r < 0 {
			t.Fatalf("RateLimit %q: r is not a non-negative Integer", res.Header["Ratelimit"])
		}
		tSec, ok := items[0].param("t").(int64)
		if !ok || tSec < 0 {
			t.Fatalf("RateLimit %q: t is not a non-negative Integer", res.Header["Ratelimit"])
		}
		if limits.Len() > 1 && which >= 0 && which < limits.Len() && items[0].Value != policies[which].Value {
			t.Fatalf("RateLimit %q does not name rule %d of RateLimit-Policy %q", res.Header["Ratelimit"], which, res.Header["Ratelimit-Policy"])
		}
		if res.Header.Get("X-RateLimit-Reset") != strconv.FormatInt(tSec, 10) {
			t.Fatalf("X-RateLimit-Reset %q, t=%d", res.Header.Get("X-RateLimit-Reset"), tSec)
		}
		if allowed {
			return
		}
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != strconv.FormatInt(tSec, 10) || tSec < 1 {
			t.Fatalf("denied: status %d, Retry-After %q, t=%d", res.StatusCode, res.Header.Get("Retry-After"), tSec)
		}
		var body struct {
			Violated []string `json:"violated-policies"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("problem body %s: %v", w.Body, err)
		}
		if len(body.Violated) != 1 || body.Violated[0] != items[0].Value {
			t.Fatalf("problem body names %q, RateLimit %q", body.Violated, items[0].Value)
		}
	})
}
