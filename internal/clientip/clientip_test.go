package clientip

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestParseHop: the forms RemoteAddr and forwarding headers write, the text
// kept only for a canonical IPv4 address, mapped addresses unmapped and
// zones dropped.
func TestParseHop(t *testing.T) {
	for _, tc := range []struct {
		in, addr, text string
		ok             bool
	}{
		{"203.0.113.7", "203.0.113.7", "203.0.113.7", true},
		{"203.0.113.7:4711", "203.0.113.7", "203.0.113.7", true},
		{"[2001:db8::1]:4711", "2001:db8::1", "", true},
		{"[2001:db8::1]", "2001:db8::1", "", true},
		{"2001:db8::1", "2001:db8::1", "", true},
		{"fe80::1%eth0", "fe80::1", "", true},
		{"[::ffff:203.0.113.7]:1", "203.0.113.7", "", true},
		{"203.0.113.7:", "", "", false},
		{"203.0.113.7:x", "", "", false},
		{"[2001:db8::1]:", "", "", false},
		{"[2001:db8::1", "", "", false},
		{"unknown", "", "", false},
		{"", "", "", false},
	} {
		a, text, ok := ParseHop(tc.in)
		if ok != tc.ok || text != tc.text || (ok && a.String() != tc.addr) {
			t.Errorf("ParseHop(%q) = %v, %q, %v; want %s, %q, %v", tc.in, a, text, ok, tc.addr, tc.text, tc.ok)
		}
	}
}

// TestKey: IPv4 by its text, IPv6 by its /64, a mapped address as IPv4.
func TestKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"203.0.113.7", "203.0.113.7"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"::ffff:203.0.113.7", "203.0.113.7"},
		{"fe80::1%eth0", "fe80::/64"},
	} {
		a, ok := Normalize(netip.MustParseAddr(tc.in))
		if got := Key(a, ""); !ok || got != tc.want {
			t.Errorf("Key(Normalize(%s)) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
	if _, ok := Normalize(netip.Addr{}); ok {
		t.Errorf("Normalize(zero Addr) ok")
	}
}

// TestBehind: the rightmost untrusted hop of either header, over several
// field lines; garbage before the client leaves no client.
func TestBehind(t *testing.T) {
	xff, err := Trust(nil, XForwardedFor, []string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := Trust(nil, Forwarded, []string{"10.0.0.0/8", "2001:db8:ffff::/48"})
	if err != nil {
		t.Fatal(err)
	}
	peer := netip.MustParseAddr("10.0.0.1")
	for _, tc := range []struct {
		p     *Proxies
		lines []string
		want  string // "" for no client
	}{
		{xff, nil, "10.0.0.1"},
		{xff, []string{"6.6.6.6, 198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{xff, []string{"6.6.6.6", "198.51.100.7:5555", "10.0.0.2"}, "198.51.100.7"},
		{xff, []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3"},
		{xff, []string{"198.51.100.7, garbage"}, ""},
		{xff, []string{"garbage, 198.51.100.7"}, "198.51.100.7"},
		{xff, []string{strings.Repeat("10.0.0.9, ", 32) + "10.0.0.8"}, ""},
		{fwd, []string{`for=6.6.6.6, for="[2001:db8::1]:443";proto=https, for=10.0.0.2`}, "2001:db8::1"},
		{fwd, []string{`For=198.51.100.7;by=10.0.0.2`}, "198.51.100.7"},
		{fwd, []string{`for=198.51.100.7, for=unknown`}, ""},
		{fwd, []string{`for=198.51.100.7, by=10.0.0.2`}, ""},
		{fwd, []string{`for="\"x"`}, ""},
		{fwd, []string{`for=198.51.100.7, for`}, ""},
	} {
		a, _, ok := tc.p.Behind(peer, "10.0.0.1", tc.lines)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tc.want {
			t.Errorf("%v.Behind(%v, %q) = %q, want %q", tc.p.Header(), peer, tc.lines, got, tc.want)
		}
	}
	var none *Proxies
	if none.Trusts(peer) {
		t.Errorf("a nil *Proxies trusts %v", peer)
	}
}

// TestTrustErrors: what Trust refuses, each with a message that starts with
// the option's name.
func TestTrustErrors(t *testing.T) {
	xff, err := Trust(nil, XForwardedFor, []string{"0.0.0.0/1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prev     *Proxies
		header   Header
		networks []string
		want     string
	}{
		{nil, 0, []string{"10.0.0.0/8"}, "ProxyHeader(0) is not a forwarding header"},
		{nil, Forwarded, nil, "no networks"},
		{nil, XForwardedFor, []string{"10.0.0.0/33"}, "is not a network"},
		{nil, XForwardedFor, []string{"::/0"}, "trusts every address"},
		{xff, XForwardedFor, []string{"128.0.0.0/1"}, "cover every IPv4 address"},
		{xff, Forwarded, []string{"10.0.0.0/8"}, "both X-Forwarded-For and Forwarded"},
		{nil, XForwardedFor, []string{"::/1", "8000::/1"}, "cover every IPv6 address"},
	} {
		_, err := Trust(tc.prev, tc.header, tc.networks)
		if err == nil || !strings.HasPrefix(err.Error(), "WithTrustedProxies") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Trust(%v, %q) = %v, want an error containing %q", tc.header, tc.networks, err, tc.want)
		}
		if errors.Unwrap(err) != nil {
			t.Errorf("Trust(%v, %q): %v wraps an error; the caller wraps it", tc.header, tc.networks, err)
		}
	}
}

// TestQuote: a long input is cut at 64 bytes, never inside a rune.
func TestQuote(t *testing.T) {
	if got := Quote("abc"); got != `"abc"` {
		t.Errorf("Quote(abc) = %s", got)
	}
	long := strings.Repeat("a", 63) + "é" + strings.Repeat("b", 100)
	if got, want := Quote(long), `"`+strings.Repeat("a", 63)+`"…`; got != want {
		t.Errorf("Quote(long) = %s, want %s", got, want)
	}
}

// TestParseHopAllocs: a well-formed hop is parsed without allocating.
func TestParseHopAllocs(t *testing.T) {
	if got := testing.AllocsPerRun(100, func() { ParseHop("[2001:db8::1]:4711") }); got != 0 {
		t.Errorf("ParseHop allocates %v times", got)
	}
}
