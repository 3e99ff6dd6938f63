package httplimit_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
)

// keyCase is a request and the key it must be charged to; want "" means the
// request has no key and must be rejected with 400 without reaching the
// limiter.
type keyCase struct {
	name    string
	remote  string
	headers map[string][]string
	want    string
}

func runKeyCases(t *testing.T, opts []httplimit.Option, cases []keyCase) {
	t.Helper()
	rec := &recorder{}
	mw, err := httplimit.New(rec, opts...)
	require.NoError(t, err, "httplimit.New")
	h := mw.Handler(ok)
	for _, tc := range cases {
		r := request(tc.remote, "/")
		for k, vs := range tc.headers {
			r.Header[k] = vs
		}
		w := serve(h, r)
		got, charged := rec.last()
		if tc.want == "" {
			assert.Falsef(t, charged, "%s: RemoteAddr %q %v: charged to %q, want no key", tc.name, tc.remote, tc.headers, got)
			assert.Equalf(t, http.StatusBadRequest, w.Code, "%s: status of a request without a key", tc.name)
			continue
		}
		assert.Equalf(t, http.StatusOK, w.Code, "%s: status", tc.name)
		assert.Equalf(t, tc.want, got, "%s: RemoteAddr %q %v: key", tc.name, tc.remote, tc.headers)
	}
}

func xff(vs ...string) map[string][]string       { return map[string][]string{"X-Forwarded-For": vs} }
func forwarded(vs ...string) map[string][]string { return map[string][]string{"Forwarded": vs} }

// TestKeyRemoteAddr: by default the key is the peer's address, IPv6 reduced
// to its /64, and forwarding headers are ignored.
func TestKeyRemoteAddr(t *testing.T) {
	runKeyCases(t, nil, []keyCase{
		{"ipv4", "203.0.113.7:4711", nil, "203.0.113.7"},
		{"ipv4 without port", "203.0.113.7", nil, "203.0.113.7"},
		{"ipv6", "[2001:db8:1:2:3:4:5:6]:4711", nil, "2001:db8:1:2::/64"},
		{"ipv6 same /64", "[2001:db8:1:2:ffff:ffff:ffff:ffff]:80", nil, "2001:db8:1:2::/64"},
		{"ipv6 next /64", "[2001:db8:1:3::1]:80", nil, "2001:db8:1:3::/64"},
		{"ipv6 without port", "2001:db8:1:2::9", nil, "2001:db8:1:2::/64"},
		{"ipv6 bracketed, no port", "[2001:db8:1:2::9]", nil, "2001:db8:1:2::/64"},
		{"ipv6 zone dropped", "[fe80::1%eth0]:80", nil, "fe80::/64"},
		{"ipv4-mapped is ipv4", "[::ffff:203.0.113.7]:80", nil, "203.0.113.7"},
		{"loopback", "127.0.0.1:80", nil, "127.0.0.1"},
		{"ipv6 loopback", "[::1]:80", nil, "::/64"},
		// No proxy is trusted by default: forwarding headers are the client's.
		{"spoofed xff ignored", "203.0.113.7:1", xff("198.51.100.1"), "203.0.113.7"},
		{"spoofed forwarded ignored", "203.0.113.7:1", forwarded("for=198.51.100.1"), "203.0.113.7"},
		{"private peer, xff ignored", "10.0.0.1:1", xff("198.51.100.1"), "10.0.0.1"},
		// Malformed RemoteAddr: no key.
		{"empty", "", nil, ""},
		{"garbage", "garbage", nil, ""},
		{"unix socket", "@", nil, ""},
		{"empty port", "203.0.113.7:", nil, ""},
		{"bad port", "203.0.113.7:http", nil, ""},
		{"octet out of range", "256.0.0.1:80", nil, ""},
		{"leading zero", "203.0.113.07:80", nil, ""},
		{"unterminated bracket", "[2001:db8::1:80", nil, ""},
		{"bracket junk", "[2001:db8::1]x80", nil, ""},
		{"hostname", "localhost:80", nil, ""},
	})
}

// TestKeyTrustedXForwardedFor: X-Forwarded-For counts only from a trusted
// peer, and then its rightmost untrusted address is the client.
func TestKeyTrustedXForwardedFor(t *testing.T) {
	opts := []httplimit.Option{httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.53")}
	runKeyCases(t, opts, []keyCase{
		{"untrusted peer spoofs", "203.0.113.7:1", xff("198.51.100.1"), "203.0.113.7"},
		{"untrusted peer spoofs a trusted proxy", "203.0.113.7:1", xff("198.51.100.1", "10.0.0.9"), "203.0.113.7"},
		{"untrusted peer spoofs forwarded", "203.0.113.7:1", forwarded("for=198.51.100.1"), "203.0.113.7"},
		{"trusted peer", "10.0.0.1:1", xff("198.51.100.7"), "198.51.100.7"},
		{"trusted single address", "192.0.2.53:1", xff("198.51.100.7"), "198.51.100.7"},
		{"trusted ipv6 peer", "[2001:db8:ffff:1::1]:1", xff("198.51.100.7"), "198.51.100.7"},
		{"client-forged entries to the left", "10.0.0.1:1", xff("1.1.1.1, 8.8.8.8, 198.51.100.7"), "198.51.100.7"},
		{"rightmost untrusted across hops", "10.0.0.1:1", xff("1.1.1.1, 198.51.100.7, 10.0.0.2, 10.9.9.9"), "198.51.100.7"},
		{"client forges a trusted address", "10.0.0.1:1", xff("10.0.0.5, 198.51.100.7"), "198.51.100.7"},
		{"several header lines", "10.0.0.1:1", xff("1.1.1.1", "198.51.100.7, 10.0.0.2"), "198.51.100.7"},
		{"spaces and empty entries", "10.0.0.1:1", xff(" 1.1.1.1 ,, \t198.51.100.7\t, "), "198.51.100.7"},
		{"every hop trusted: the leftmost", "10.0.0.1:1", xff("10.0.0.3, 10.0.0.2"), "10.0.0.3"},
		{"no header: the peer", "10.0.0.1:1", nil, "10.0.0.1"},
		{"empty header: the peer", "10.0.0.1:1", xff(""), "10.0.0.1"},
		{"entry with port", "10.0.0.1:1", xff("198.51.100.7:5555"), "198.51.100.7"},
		{"ipv6 entry is its /64", "10.0.0.1:1", xff("2001:db8:1:2::99"), "2001:db8:1:2::/64"},
		{"bracketed ipv6 with port", "10.0.0.1:1", xff("[2001:db8:1:2::99]:443"), "2001:db8:1:2::/64"},
		{"mapped entry", "10.0.0.1:1", xff("::ffff:198.51.100.7"), "198.51.100.7"},
		{"mapped trusted peer", "[::ffff:10.0.0.1]:1", xff("198.51.100.7"), "198.51.100.7"},
		{"garbage left of the client is never read", "10.0.0.1:1", xff("garbage, 198.51.100.7"), "198.51.100.7"},
		{"garbage where the client should be", "10.0.0.1:1", xff("198.51.100.7, garbage"), ""},
		{"garbage behind a trusted hop", "10.0.0.1:1", xff("garbage, 10.0.0.2"), ""},
		{"forwarded ignored when xff is trusted", "10.0.0.1:1", forwarded("for=198.51.100.7"), "10.0.0.1"},
		{"malformed RemoteAddr", "nonsense", xff("198.51.100.7"), ""},
	})
}

// TestKeyTrustedForwarded: the same for RFC 7239's Forwarded.
func TestKeyTrustedForwarded(t *testing.T) {
	opts := []httplimit.Option{httplimit.WithTrustedProxies(httplimit.Forwarded, "10.0.0.0/8")}
	runKeyCases(t, opts, []keyCase{
		{"untrusted peer spoofs", "203.0.113.7:1", forwarded("for=198.51.100.1"), "203.0.113.7"},
		{"trusted peer", "10.0.0.1:1", forwarded("for=198.51.100.7"), "198.51.100.7"},
		{"other parameters", "10.0.0.1:1", forwarded("proto=https;for=198.51.100.7;by=10.0.0.1;host=example.com"), "198.51.100.7"},
		{"case-insensitive name", "10.0.0.1:1", forwarded("For=198.51.100.7"), "198.51.100.7"},
		{"quoted ipv6 with port", "10.0.0.1:1", forwarded(`for="[2001:db8:cafe::17]:4711"`), "2001:db8:cafe::/64"},
		{"quoted ipv4", "10.0.0.1:1", forwarded(`for="198.51.100.7"`), "198.51.100.7"},
		{"unquoted ipv6 tolerated", "10.0.0.1:1", forwarded(`for=[2001:db8:cafe::17]`), "2001:db8:cafe::/64"},
		{"rightmost untrusted", "10.0.0.1:1", forwarded("for=1.1.1.1, for=198.51.100.7, for=10.0.0.2"), "198.51.100.7"},
		{"several lines", "10.0.0.1:1", forwarded("for=1.1.1.1", "for=198.51.100.7;proto=http, for=10.0.0.2"), "198.51.100.7"},
		{"every hop trusted", "10.0.0.1:1", forwarded("for=10.0.0.3, for=10.0.0.2"), "10.0.0.3"},
		{"quoted comma inside a value", "10.0.0.1:1", forwarded(`for=1.1.1.1;ext="a,b", for=198.51.100.7`), "198.51.100.7"},
		{"no header", "10.0.0.1:1", nil, "10.0.0.1"},
		{"unknown node", "10.0.0.1:1", forwarded("for=unknown"), ""},
		{"obfuscated node", "10.0.0.1:1", forwarded("for=_hidden, for=10.0.0.2"), ""},
		{"element without for", "10.0.0.1:1", forwarded("proto=https"), ""},
		{"for given twice", "10.0.0.1:1", forwarded("for=198.51.100.7;for=198.51.100.8"), ""},
		{"unterminated quote on the client's line", "10.0.0.1:1", forwarded(`for="1.1.1.1`, "for=198.51.100.7"), "198.51.100.7"},
		{"unterminated quote swallowing the proxy's element", "10.0.0.1:1", forwarded(`for="1.1.1.1, for=198.51.100.7`), ""},
		{"escape in a quoted value", "10.0.0.1:1", forwarded(`for="198.51.100\.7"`), ""},
		{"no value", "10.0.0.1:1", forwarded("for="), ""},
		{"xff ignored when forwarded is trusted", "10.0.0.1:1", xff("198.51.100.7"), "10.0.0.1"},
	})
}

// TestKeyHopLimit: the middleware keeps the rightmost 32 hops; a chain of
// trusted proxies longer than that leaves the request without a key.
func TestKeyHopLimit(t *testing.T) {
	hops := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = "10.0.0." + string(rune('0'+i%10))
		}
		s[0] = "10.1.1.1"
		return strings.Join(s, ", ")
	}
	opts := []httplimit.Option{httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/8")}
	runKeyCases(t, opts, []keyCase{
		{"32 trusted hops: the leftmost", "10.0.0.1:1", xff(hops(32)), "10.1.1.1"},
		{"33 trusted hops: no key", "10.0.0.1:1", xff(hops(33)), ""},
		{"a long forged prefix is harmless", "10.0.0.1:1", xff(strings.Repeat("1.1.1.1, ", 1000) + "198.51.100.7"), "198.51.100.7"},
	})
}

// TestKeyFrom: keys built from parts of the request.
func TestKeyFrom(t *testing.T) {
	t.Run("header", func(t *testing.T) {
		runKeyCases(t, []httplimit.Option{httplimit.WithKeyFrom(httplimit.RequestHeader("x-api-key"))}, []keyCase{
			{"present", "203.0.113.7:1", map[string][]string{"X-Api-Key": {"k-123"}}, "k-123"},
			{"first value", "203.0.113.7:1", map[string][]string{"X-Api-Key": {"k-1", "k-2"}}, "k-1"},
			{"missing", "203.0.113.7:1", nil, ""},
			{"empty", "203.0.113.7:1", map[string][]string{"X-Api-Key": {""}}, ""},
			{"too long", "203.0.113.7:1", map[string][]string{"X-Api-Key": {strings.Repeat("k", httplimit.MaxKeyBytes+1)}}, ""},
			{"longest", "203.0.113.7:1", map[string][]string{"X-Api-Key": {strings.Repeat("k", httplimit.MaxKeyBytes)}}, strings.Repeat("k", httplimit.MaxKeyBytes)},
			{"a malformed RemoteAddr does not matter", "", map[string][]string{"X-Api-Key": {"k-123"}}, "k-123"},
		})
	})
	t.Run("parts", func(t *testing.T) {
		rec := &recorder{}
		mw, err := httplimit.New(rec,
			httplimit.WithKeyFrom(httplimit.ClientIP(), httplimit.Method(), httplimit.Path()),
			httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/8"))
		require.NoError(t, err)
		h := mw.Handler(ok)
		r := request("10.0.0.1:1", "/items/7?x=1")
		r.Header.Set("X-Forwarded-For", "198.51.100.7")
		serve(h, r)
		got, _ := rec.last()
		assert.Equal(t, "198.51.100.7\x00GET\x00/items/7", got)

		r = request("10.0.0.1:1", "/a%00b") // a part holding the separator
		assert.Equal(t, http.StatusBadRequest, serve(h, r).Code)
		_, charged := rec.last()
		assert.False(t, charged, "a part holding NUL makes the request keyless")
	})
	t.Run("route", func(t *testing.T) {
		rec := &recorder{}
		mw, err := httplimit.New(rec, httplimit.WithKeyFrom(httplimit.Method(), httplimit.Route()))
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("GET /items/{id}", mw.Handler(ok))
		serve(mux, request("203.0.113.7:1", "/items/1"))
		serve(mux, request("203.0.113.8:1", "/items/2"))
		rec.mu.Lock()
		assert.Equal(t, []string{"GET\x00GET /items/{id}", "GET\x00GET /items/{id}"}, rec.keys, "one budget per route")
		rec.mu.Unlock()

		// Outside a mux there is no pattern: no key.
		assert.Equal(t, http.StatusBadRequest, serve(mw.Handler(ok), request("203.0.113.7:1", "/items/1")).Code)
	})
	t.Run("custom", func(t *testing.T) {
		runKeyCases(t, []httplimit.Option{httplimit.WithKey(func(r *http.Request) (string, bool) {
			u, _, ok := r.BasicAuth()
			return u, ok
		})}, []keyCase{
			{"user", "", map[string][]string{"Authorization": {"Basic YWxpY2U6cw=="}}, "alice"},
			{"none", "203.0.113.7:1", nil, ""},
		})
	})
}

// TestUnknownKey: a request without a key is rejected with a 400 problem
// body by default, or charged to the shared key of WithUnknownKey.
func TestUnknownKey(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		h := middleware(t, "token-bucket,5,10s", clock.NewFake()).Handler(ok)
		w := serve(h, request("garbage", "/"))
		assert.Equal(t, http.StatusBadRequest, w.Code)
		assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
		assert.Empty(t, w.Header().Values("RateLimit"), "no quota applies")
		var body map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
		assert.Equal(t, "about:blank", body["type"])
		assert.Equal(t, float64(400), body["status"])
	})
	t.Run("shared", func(t *testing.T) {
		var denials []httplimit.Denial
		h := middleware(t, "fixed-window,2,10s", clock.NewFake(),
			httplimit.WithUnknownKey("unknown"),
			httplimit.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, d httplimit.Denial) {
				denials = append(denials, d)
				w.WriteHeader(http.StatusTooManyRequests)
			})).Handler(ok)
		for _, remote := range []string{"garbage", "", "@"} {
			serve(h, request(remote, "/"))
		}
		require.Len(t, denials, 1, "three keyless requests share one budget of 2")
		assert.Equal(t, "unknown", denials[0].Key)
		assert.False(t, denials[0].Unkeyed, "charged to the shared key, not unkeyed")
		assert.Equal(t, http.StatusOK, serve(h, request("203.0.113.7:1", "/")).Code, "a keyed client has its own budget")
	})
}

// TestKeyTrustedNetworkForms: trusted networks may be written as CIDR
// prefixes, single addresses, or IPv4-mapped IPv6 prefixes.
func TestKeyTrustedNetworkForms(t *testing.T) {
	opts := []httplimit.Option{httplimit.WithTrustedProxies(httplimit.XForwardedFor, "::ffff:172.16.0.0/108", "192.0.2.53", "2001:db8::/32")}
	runKeyCases(t, opts, []keyCase{
		{"mapped prefix trusts the IPv4 network", "172.16.9.9:1", xff("198.51.100.7"), "198.51.100.7"},
		{"outside the mapped prefix", "172.32.0.1:1", xff("198.51.100.7"), "172.32.0.1"},
		{"single address", "192.0.2.53:1", xff("198.51.100.7"), "198.51.100.7"},
		{"its neighbour", "192.0.2.54:1", xff("198.51.100.7"), "192.0.2.54"},
		{"ipv6 prefix", "[2001:db8:5::1]:1", xff("198.51.100.7"), "198.51.100.7"},
	})
}

// TestKeyFromSeparator: a part that holds the separator, wherever it is in
// the value (first byte included), makes the request keyless, so that no two
// combinations of parts give one key.
func TestKeyFromSeparator(t *testing.T) {
	user := func(v string) map[string][]string { return map[string][]string{"X-User": {v}} }
	runKeyCases(t, []httplimit.Option{httplimit.WithKeyFrom(httplimit.RequestHeader("X-User"), httplimit.Method())}, []keyCase{
		{"plain", "203.0.113.7:1", user("alice"), "alice\x00GET"},
		{"separator first", "203.0.113.7:1", user("\x00GET"), ""},
		{"separator alone", "203.0.113.7:1", user("\x00"), ""},
		{"separator inside", "203.0.113.7:1", user("al\x00ice"), ""},
		{"separator last", "203.0.113.7:1", user("alice\x00"), ""},
	})
}

// TestKeyLongest: a key of exactly MaxKeyBytes is charged, one byte more is
// no key, whether the key is one part, several joined, or a KeyFunc's.
func TestKeyLongest(t *testing.T) {
	user := func(n int) map[string][]string { return map[string][]string{"X-User": {strings.Repeat("u", n)}} }
	longest := strings.Repeat("u", httplimit.MaxKeyBytes-len("\x00GET"))
	runKeyCases(t, []httplimit.Option{httplimit.WithKeyFrom(httplimit.RequestHeader("X-User"), httplimit.Method())}, []keyCase{
		{"parts of MaxKeyBytes", "203.0.113.7:1", user(len(longest)), longest + "\x00GET"},
		{"parts of MaxKeyBytes+1", "203.0.113.7:1", user(len(longest) + 1), ""},
	})
	// The first part alone past the bound, before any separator.
	runKeyCases(t, []httplimit.Option{httplimit.WithKeyFrom(httplimit.RequestHeader("X-User"), httplimit.Method())}, []keyCase{
		{"first part of MaxKeyBytes+1", "203.0.113.7:1", user(httplimit.MaxKeyBytes + 1), ""},
	})
	runKeyCases(t, []httplimit.Option{httplimit.WithKey(func(r *http.Request) (string, bool) { return r.Header.Get("X-User"), true })}, []keyCase{
		{"KeyFunc of MaxKeyBytes", "203.0.113.7:1", user(httplimit.MaxKeyBytes), strings.Repeat("u", httplimit.MaxKeyBytes)},
		{"KeyFunc of MaxKeyBytes+1", "203.0.113.7:1", user(httplimit.MaxKeyBytes + 1), ""},
	})
}

// TestKeyTrustedMappedBoundary: an IPv4-mapped prefix of /96 or longer is the
// IPv4 network it maps; /96 itself maps every IPv4 address, and is refused as
// "0.0.0.0/0" is.
func TestKeyTrustedMappedBoundary(t *testing.T) {
	rec := &recorder{}
	_, err := httplimit.New(rec, httplimit.WithTrustedProxies(httplimit.XForwardedFor, "::ffff:0.0.0.0/96"))
	assert.EqualError(t, err, `httplimit: admit: invalid option: WithTrustedProxies: "::ffff:0.0.0.0/96" trusts every address, which lets any client choose its key; name your proxies' networks`)
	runKeyCases(t, []httplimit.Option{httplimit.WithTrustedProxies(httplimit.XForwardedFor, "::ffff:10.0.0.0/97", "::ffff:192.0.2.53/128")}, []keyCase{
		{"/97 maps 0.0.0.0/1", "10.0.0.1:1", xff("198.51.100.7"), "198.51.100.7"},
		{"/97 maps no more", "192.0.2.1:1", xff("198.51.100.7"), "192.0.2.1"},
		{"/128 maps one address", "192.0.2.53:1", xff("198.51.100.7"), "198.51.100.7"},
		{"mapped peer", "[::ffff:10.0.0.1]:1", xff("198.51.100.7"), "198.51.100.7"},
	})
}
