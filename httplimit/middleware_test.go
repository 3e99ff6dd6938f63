package httplimit_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
	"github.com/admit-go/admit/policy"
)

// TestBadOptions: every bad configuration is an error wrapping
// admit.ErrInvalidOption, never a panic.
func TestBadOptions(t *testing.T) {
	lim, rule := limiter(t, "token-bucket,5,10s", clock.NewFake())
	svc := service(t, "default = token-bucket,5,10s\n", clock.NewFake())
	key := func(*http.Request) (string, bool) { return "k", true }
	for name, opts := range map[string][]httplimit.Option{
		"nil option":                    {nil},
		"invalid CIDR":                  {httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/33")},
		"not a network":                 {httplimit.WithTrustedProxies(httplimit.XForwardedFor, "proxy.internal")},
		"address with zone":             {httplimit.WithTrustedProxies(httplimit.XForwardedFor, "fe80::1%eth0")},
		"one bad among good":            {httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/8", "")},
		"no networks":                   {httplimit.WithTrustedProxies(httplimit.XForwardedFor)},
		"trust every IPv4 address":      {httplimit.WithTrustedProxies(httplimit.XForwardedFor, "0.0.0.0/0")},
		"trust every IPv6 address":      {httplimit.WithTrustedProxies(httplimit.Forwarded, "::/0")},
		"zero header":                   {httplimit.WithTrustedProxies(0, "10.0.0.0/8")},
		"two headers":                   {httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/8"), httplimit.WithTrustedProxies(httplimit.Forwarded, "10.0.0.0/8")},
		"nil key":                       {httplimit.WithKey(nil)},
		"proxies with a custom key":     {httplimit.WithKey(key), httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/8")},
		"proxies with parts lacking IP": {httplimit.WithKeyFrom(httplimit.Route()), httplimit.WithTrustedProxies(httplimit.XForwardedFor, "10.0.0.0/8")},
		"no parts":                      {httplimit.WithKeyFrom()},
		"zero part":                     {httplimit.WithKeyFrom(httplimit.KeyPart{})},
		"bad header name":               {httplimit.WithKeyFrom(httplimit.RequestHeader("X Api Key"))},
		"empty header name":             {httplimit.WithKeyFrom(httplimit.RequestHeader(""))},
		"two key options":               {httplimit.WithKey(key), httplimit.WithKeyFrom(httplimit.ClientIP())},
		"empty unknown key":             {httplimit.WithUnknownKey("")},
		"nil exempt":                    {httplimit.WithExempt(nil)},
		"nil deny handler":              {httplimit.WithDenyHandler(nil)},
		"empty policy name":             {httplimit.WithPolicy("", rule)},
		"non-ASCII policy name":         {httplimit.WithPolicy("quota→", rule)},
		"invalid policy rule":           {httplimit.WithPolicy("default", admit.Rule{})},
		"WithAPI for a KeyedLimiter":    {httplimit.WithAPI(func(*http.Request) string { return "" })},
	} {
		_, err := httplimit.New(lim, opts...)
		require.Errorf(t, err, "New(lim, %s)", name)
		assert.Truef(t, errors.Is(err, admit.ErrInvalidOption), "New(lim, %s): %v does not wrap admit.ErrInvalidOption", name, err)
		t.Logf("%s: %v", name, err)
	}
	_, err := httplimit.New(nil)
	assert.ErrorIs(t, err, admit.ErrInvalidOption, "New(nil)")
	_, err = httplimit.ForService(nil)
	assert.ErrorIs(t, err, admit.ErrInvalidOption, "ForService(nil)")
	_, err = httplimit.ForService(svc, httplimit.WithPolicy("default", rule))
	assert.ErrorIs(t, err, admit.ErrInvalidOption, "ForService with WithPolicy")
	_, err = httplimit.ForService(svc, httplimit.WithAPI(nil))
	assert.ErrorIs(t, err, admit.ErrInvalidOption, "ForService with WithAPI(nil)")

	// And the good ones are accepted.
	_, err = httplimit.New(lim,
		httplimit.WithTrustedProxies(httplimit.Forwarded, "10.0.0.0/8"),
		httplimit.WithTrustedProxies(httplimit.Forwarded, "192.0.2.1", "::ffff:172.16.0.0/108"),
		httplimit.WithKeyFrom(httplimit.ClientIP(), httplimit.Route()),
		httplimit.WithShadow(nil), httplimit.WithLegacyHeaders(), httplimit.WithUnknownKey("unknown"))
	assert.NoError(t, err)
}

// TestBadOptionsCutInput: an option's error quotes at most the first 64 bytes
// of the input it rejects, so a huge input cannot make a huge error.
func TestBadOptionsCutInput(t *testing.T) {
	lim, rule := limiter(t, "token-bucket,5,10s", clock.NewFake())
	huge := strings.Repeat("x", 1<<20)
	cut := strconv.Quote(huge[:64]) + "…"
	// A rune that straddles the cut is left out whole, never split.
	straddle := strings.Repeat("x", 63) + "é" + huge
	for name, tc := range map[string]struct {
		opt  httplimit.Option
		want string // the start of the input, as the error quotes it
	}{
		"not a network":              {httplimit.WithTrustedProxies(httplimit.XForwardedFor, huge), cut},
		"not a network, UTF-8":       {httplimit.WithTrustedProxies(httplimit.XForwardedFor, straddle), strconv.Quote(straddle[:63]) + "…"},
		"bad header name":            {httplimit.WithKeyFrom(httplimit.RequestHeader(huge + " ")), "RequestHeader(" + cut + ")"},
		"unknown key too long":       {httplimit.WithUnknownKey(huge), cut},
		"policy name too long":       {httplimit.WithPolicy(huge, rule), cut},
		"policy name not ASCII":      {httplimit.WithPolicy(straddle, rule), strconv.Quote(straddle[:63]) + "…"},
		"policy name, bad rule":      {httplimit.WithPolicy("default", admit.Rule{}), `"default"`},
		"header name with a newline": {httplimit.WithKeyFrom(httplimit.ClientIP(), httplimit.RequestHeader("X\n"+huge)), "RequestHeader(" + strconv.Quote(("X\n" + huge)[:64]) + "…)"},
	} {
		_, err := httplimit.New(lim, tc.opt)
		require.Errorf(t, err, "%s", name)
		assert.ErrorIsf(t, err, admit.ErrInvalidOption, "%s", name)
		assert.Containsf(t, err.Error(), tc.want, "%s: the error quotes the start of the input", name)
		assert.LessOrEqualf(t, len(err.Error()), 300, "%s: the error is bounded: %.400s", name, err)
	}
}

// TestTrustedProxiesEveryAddress: networks that together cover every address
// of a family are refused, as "0.0.0.0/0" is, however they are split, written
// or spread over calls; sets that leave a gap are accepted.
func TestTrustedProxiesEveryAddress(t *testing.T) {
	lim, _ := limiter(t, "token-bucket,5,10s", clock.NewFake())
	tp := func(nets ...string) httplimit.Option {
		return httplimit.WithTrustedProxies(httplimit.XForwardedFor, nets...)
	}
	slash8s := make([]string, 256)
	for i := range slash8s {
		slash8s[i] = strconv.Itoa(i) + ".0.0.0/8"
	}
	// Every IPv6 address but the IPv4-mapped ones (::ffff:0:0/96), which the
	// middleware keys as IPv4: the complement of that /96, in 96 prefixes.
	var notMapped []string
	mapped := netip.MustParseAddr("::ffff:0:0").As16()
	for i := range 96 {
		a := mapped
		a[i/8] ^= 1 << (7 - i%8)
		notMapped = append(notMapped, netip.PrefixFrom(netip.AddrFrom16(a), i+1).Masked().String())
	}
	const ipv4 = "cover every IPv4 address, which lets any client choose its key; name your proxies' networks"
	const ipv6 = "cover every IPv6 address, which lets any client choose its key; name your proxies' networks"
	for _, tc := range []struct {
		name string
		opts []httplimit.Option
		want string // "": accepted
	}{
		{"two halves", []httplimit.Option{tp("0.0.0.0/1", "128.0.0.0/1")}, `WithTrustedProxies: the IPv4 networks 0.0.0.0/1, 128.0.0.0/1 ` + ipv4},
		{"halves in two calls", []httplimit.Option{tp("128.0.0.0/1"), tp("0.0.0.0/1")}, `WithTrustedProxies: the IPv4 networks 0.0.0.0/1, 128.0.0.0/1 ` + ipv4},
		{"overlapping, unmasked, with an address", []httplimit.Option{tp("10.0.0.1", "0.1.2.3/1", "100.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2")}, `WithTrustedProxies: the IPv4 networks 0.0.0.0/1, 10.0.0.1/32, 128.0.0.0/2, 192.0.0.0/2 ` + ipv4},
		{"IPv4-mapped halves", []httplimit.Option{tp("::ffff:0.0.0.0/97", "::ffff:128.0.0.0/97")}, `WithTrustedProxies: the IPv4 networks 0.0.0.0/1, 128.0.0.0/1 ` + ipv4},
		{"mapped and plain", []httplimit.Option{tp("::ffff:0.0.0.0/97", "128.0.0.0/1", "2001:db8::/32")}, `WithTrustedProxies: the IPv4 networks 0.0.0.0/1, 128.0.0.0/1 ` + ipv4},
		{"256 /8s", []httplimit.Option{tp(slash8s...)}, `WithTrustedProxies: the IPv4 networks 0.0.0.0/8, 1.0.0.0/8, 2.0.0.0/8, 3.0.0.0/8 and 252 more ` + ipv4},
		{"IPv6 halves", []httplimit.Option{tp("::/1", "8000::/1")}, `WithTrustedProxies: the IPv6 networks ::/1, 8000::/1 ` + ipv6},
		{"IPv6 but the mapped addresses", []httplimit.Option{tp(notMapped...)}, `WithTrustedProxies: the IPv6 networks ::/81, ::8000:0:0/82, ::c000:0:0/83, ::e000:0:0/84 and 92 more cover every IPv6 address (the IPv4-mapped ones count as IPv4), which lets any client choose its key; name your proxies' networks`},
		// A gap, however small, is a set of proxies.
		{"one IPv4 address short", []httplimit.Option{tp("0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3", "224.0.0.0/4", "240.0.0.0/5", "248.0.0.0/6", "252.0.0.0/7", "254.0.0.0/8",
			"255.0.0.0/9", "255.128.0.0/10", "255.192.0.0/11", "255.224.0.0/12", "255.240.0.0/13", "255.248.0.0/14", "255.252.0.0/15", "255.254.0.0/16",
			"255.255.0.0/17", "255.255.128.0/18", "255.255.192.0/19", "255.255.224.0/20", "255.255.240.0/21", "255.255.248.0/22", "255.255.252.0/23", "255.255.254.0/24",
			"255.255.255.0/25", "255.255.255.128/26", "255.255.255.192/27", "255.255.255.224/28", "255.255.255.240/29", "255.255.255.248/30", "255.255.255.252/31", "255.255.255.254")}, ""},
		{"255 /8s", []httplimit.Option{tp(slash8s[1:]...)}, ""},
		{"an IPv4 half and an IPv6 half", []httplimit.Option{tp("0.0.0.0/1", "::/1")}, ""},
		// An IPv6 prefix that contains the mapped range trusts no IPv4 client:
		// clients' mapped addresses are keyed, and matched, as IPv4.
		{"IPv6 prefix over the mapped range and an IPv4 half", []httplimit.Option{tp("::/8", "128.0.0.0/1")}, ""},
	} {
		_, err := httplimit.New(lim, tc.opts...)
		if tc.want == "" {
			assert.NoErrorf(t, err, "%s", tc.name)
			continue
		}
		require.Errorf(t, err, "%s", tc.name)
		assert.ErrorIsf(t, err, admit.ErrInvalidOption, "%s", tc.name)
		assert.Equalf(t, "httplimit: admit: invalid option: "+tc.want, err.Error(), "%s", tc.name)
	}
}

// TestOptionBounds: a quota name of 64 bytes and an unknown key of
// MaxKeyBytes are accepted, one byte more is an error.
func TestOptionBounds(t *testing.T) {
	lim, rule := limiter(t, "token-bucket,5,10s", clock.NewFake())
	name := strings.Repeat("q", 64)
	mw, err := httplimit.New(lim, httplimit.WithPolicy(name, rule))
	require.NoError(t, err, "a quota name of 64 bytes")
	w := serve(mw.Handler(ok), request("203.0.113.7:1", "/"))
	assert.Equal(t, []string{`"` + name + `";q=5;w=10`}, w.Header()["Ratelimit-Policy"])
	_, err = httplimit.New(lim, httplimit.WithPolicy(name+"q", rule))
	assert.ErrorIs(t, err, admit.ErrInvalidOption, "a quota name of 65 bytes")

	rec := &recorder{}
	unknown := strings.Repeat("k", httplimit.MaxKeyBytes)
	mw, err = httplimit.New(rec, httplimit.WithUnknownKey(unknown))
	require.NoError(t, err, "an unknown key of MaxKeyBytes")
	serve(mw.Handler(ok), request("garbage", "/"))
	got, charged := rec.last()
	assert.True(t, charged && got == unknown, "a keyless request is charged to the unknown key of MaxKeyBytes")
	_, err = httplimit.New(rec, httplimit.WithUnknownKey(unknown+"k"))
	assert.ErrorIs(t, err, admit.ErrInvalidOption, "an unknown key of MaxKeyBytes+1")
}

// TestShadowMode: decisions and headers as usual, but every request passes,
// and each would-be denial reaches the hook.
func TestShadowMode(t *testing.T) {
	fake := clock.NewFake()
	var denials []httplimit.Denial
	h := middleware(t, "fixed-window,2,10s", fake, httplimit.WithShadow(func(r *http.Request, d httplimit.Denial) {
		denials = append(denials, d)
	})).Handler(ok)
	for i := range 4 {
		w := serve(h, request("203.0.113.7:1", "/"))
		assert.Equal(t, http.StatusOK, w.Code, "request %d passes in shadow mode", i)
		assert.Equal(t, "ok", w.Body.String(), "request %d reaches the next handler", i)
		assert.Empty(t, w.Header().Get("Retry-After"), "request %d: no Retry-After on a request that passed", i)
		want := `"default";r=` + strconv.Itoa(max(0, 1-i)) + ";t=10"
		assert.Equal(t, []string{want}, w.Header()["Ratelimit"], "request %d", i)
	}
	require.Len(t, denials, 2, "requests 3 and 4 would have been denied")
	assert.Equal(t, httplimit.Denial{
		Key: "203.0.113.7", Policy: "default",
		Decision: admit.Decision{Limit: 2, RetryAfter: 10 * time.Second, ResetAfter: 10 * time.Second},
	}, denials[0])

	// A keyless request passes too, reported as Unkeyed.
	assert.Equal(t, http.StatusOK, serve(h, request("garbage", "/")).Code)
	require.Len(t, denials, 3)
	assert.Equal(t, httplimit.Denial{Unkeyed: true}, denials[2])

	// The would-be denials were not charged: after the window, a fresh budget.
	fake.Set(10 * time.Second)
	assert.Equal(t, []string{`"default";r=1;t=10`}, serve(h, request("203.0.113.7:1", "/")).Header()["Ratelimit"])
}

// TestShadowModeCountsExactly: under concurrency, with the clock frozen, the
// hook sees exactly the requests beyond the limit, and every request passes.
func TestShadowModeCountsExactly(t *testing.T) {
	const limit, clients, perClient = 50, 8, 40
	var wouldDeny, passed atomic.Int64
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { passed.Add(1) })
	h := middleware(t, "token-bucket,"+strconv.Itoa(limit)+",1h", clock.NewFake(), httplimit.WithShadow(func(*http.Request, httplimit.Denial) {
		wouldDeny.Add(1)
	})).Handler(next)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			<-start
			for range perClient {
				serve(h, request("203.0.113.7:1", "/"))
			}
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, int64(clients*perClient), passed.Load(), "every request passed")
	assert.Equal(t, int64(clients*perClient-limit), wouldDeny.Load(), "would-be denials: everything beyond the limit")
}

// TestEnforcedConcurrently: with the clock frozen, exactly Limit requests of
// one client pass, however many goroutines send them.
func TestEnforcedConcurrently(t *testing.T) {
	const limit, clients, perClient = 50, 8, 40
	var passed, denied atomic.Int64
	h := middleware(t, "sliding-log,"+strconv.Itoa(limit)+",1m", clock.NewFake()).Handler(ok)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			<-start
			for range perClient {
				switch serve(h, request("[2001:db8::1]:1", "/")).Code {
				case http.StatusOK:
					passed.Add(1)
				case http.StatusTooManyRequests:
					denied.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, int64(limit), passed.Load())
	assert.Equal(t, int64(clients*perClient-limit), denied.Load())
}

// TestExempt: exempt requests pass without a key, without consuming and
// without headers.
func TestExempt(t *testing.T) {
	h := middleware(t, "fixed-window,1,10s", clock.NewFake(),
		httplimit.WithExempt(func(r *http.Request) bool { return r.URL.Path == "/healthz" })).Handler(ok)
	for i := range 5 {
		w := serve(h, request("203.0.113.7:1", "/healthz"))
		assert.Equal(t, http.StatusOK, w.Code, "health check %d", i)
		assert.Empty(t, w.Header().Values("RateLimit"), "health check %d has no rate-limit headers", i)
	}
	assert.Equal(t, http.StatusOK, serve(h, request("garbage", "/healthz")).Code, "exempt before the key is derived")
	w := serve(h, request("203.0.113.7:1", "/"))
	assert.Equal(t, http.StatusOK, w.Code, "the health checks consumed nothing")
	assert.Equal(t, []string{`"default";r=0;t=10`}, w.Header()["Ratelimit"])
	assert.Equal(t, http.StatusTooManyRequests, serve(h, request("203.0.113.7:1", "/")).Code)
}

// TestDenyHandler: a custom handler writes the response of a denial, with
// the headers already set, and of a keyless request.
func TestDenyHandler(t *testing.T) {
	var got []httplimit.Denial
	h := middleware(t, "fixed-window,1,10s", clock.NewFake(),
		httplimit.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, d httplimit.Denial) {
			got = append(got, d)
			if d.Unkeyed {
				http.Error(w, "who are you?", http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("later, " + d.Key)) //nolint:errcheck
		})).Handler(ok)
	serve(h, request("203.0.113.7:1", "/"))
	w := serve(h, request("203.0.113.7:1", "/"))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "later, 203.0.113.7", w.Body.String())
	assert.Equal(t, "text/plain", w.Header().Get("Content-Type"))
	assert.Equal(t, "10", w.Header().Get("Retry-After"), "set before the handler runs")
	assert.Equal(t, []string{`"default";r=0;t=10`}, w.Header()["Ratelimit"])
	assert.Equal(t, []string{`"default";q=1;w=10`}, w.Header()["Ratelimit-Policy"])

	w = serve(h, request("", "/"))
	assert.Equal(t, http.StatusForbidden, w.Code)
	require.Len(t, got, 2)
	assert.Equal(t, httplimit.Denial{Key: "203.0.113.7", Policy: "default",
		Decision: admit.Decision{Limit: 1, RetryAfter: 10 * time.Second, ResetAfter: 10 * time.Second}}, got[0])
	assert.True(t, got[1].Unkeyed)
}

// TestHandlerNilNext: like http.Server, a nil handler is DefaultServeMux.
func TestHandlerNilNext(t *testing.T) {
	mw := middleware(t, "fixed-window,1,10s", clock.NewFake())
	w := serve(mw.Handler(nil), request("203.0.113.7:1", "/no-such-path-in-the-default-mux"))
	assert.Equal(t, http.StatusNotFound, w.Code)
}

const serviceBook = `
default    = token-bucket,5,10s
api./login = fixed-window,2,10s
user.vip-1 = token-bucket,8,10s
user.jörg  = token-bucket,3,1500ms
`

// TestService: with a policy.Service the quota is the book's entry that
// applied, the user is the key and the API the route.
func TestService(t *testing.T) {
	fake := clock.NewFake()
	svc := service(t, serviceBook, fake)
	mw, err := httplimit.ForService(svc, httplimit.WithKeyFrom(httplimit.RequestHeader("X-User")))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /login", mw.Handler(ok))
	mux.Handle("GET /items/{id}", mw.Handler(ok))
	mux.Handle("/unrouted/", ok)
	mux.Handle("/", mw.Handler(ok))

	call := func(method, target, user string) *http.Response {
		r := request("203.0.113.7:1", target)
		r.Method = method
		r.Header.Set("X-User", user)
		w := serve(mux, r)
		return w.Result()
	}
	steps := []struct {
		method, target, user string
		status               int
		policy, rateLimit    string
	}{
		{"POST", "/login", "alice", 200, `"api./login";q=2;w=10`, `"api./login";r=1;t=10`},
		{"POST", "/login", "alice", 200, `"api./login";q=2;w=10`, `"api./login";r=0;t=10`},
		{"POST", "/login", "alice", 429, `"api./login";q=2;w=10`, `"api./login";r=0;t=10`},
		{"POST", "/login", "bob", 200, `"api./login";q=2;w=10`, `"api./login";r=1;t=10`},
		// Every /items/{id} is one API, "/items/{id}", under the default rule.
		{"GET", "/items/1", "alice", 200, `"default";q=5;w=10`, `"default";r=4;t=2`},
		{"GET", "/items/2", "alice", 200, `"default";q=5;w=10`, `"default";r=3;t=4`},
		{"GET", "/items/3", "vip-1", 200, `"user.vip-1";q=8;w=10`, `"user.vip-1";r=7;t=2`},
		{"POST", "/login", "vip-1", 200, `"user.vip-1";q=8;w=10`, `"user.vip-1";r=7;t=2`},
		{"GET", "/items/1", "jörg", 200, `"user.j%C3%B6rg";q=3;w=2`, `"user.j%C3%B6rg";r=2;t=1`},
	}
	for i, st := range steps {
		res := call(st.method, st.target, st.user)
		what := "step " + strconv.Itoa(i) + ": " + st.method + " " + st.target + " as " + st.user
		assert.Equal(t, st.status, res.StatusCode, what)
		assert.Equal(t, []string{st.policy}, res.Header["Ratelimit-Policy"], what)
		assert.Equal(t, []string{st.rateLimit}, res.Header["Ratelimit"], what)
		_, err := parseSFList(res.Header["Ratelimit"])
		assert.NoError(t, err, what)
	}

	// The problem body names the entry.
	r := request("203.0.113.7:1", "/login")
	r.Method = "POST"
	r.Header.Set("X-User", "alice")
	w := serve(mux, r)
	var body struct {
		Type     string   `json:"type"`
		Violated []string `json:"violated-policies"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, httplimit.ProblemType, body.Type)
	assert.Equal(t, []string{"api./login"}, body.Violated)

	// A Reload is picked up: /login now allows 3, and alice, who had spent
	// her 2, keeps them spent (the default, policy.CarryConsumed): one more
	// passes, and none is left.
	book, err := policy.Parse(strings.NewReader("default = token-bucket,5,10s\napi./login = fixed-window,3,10s\n"))
	require.NoError(t, err)
	require.NoError(t, svc.Reload(book))
	res := call("POST", "/login", "alice")
	assert.Equal(t, 200, res.StatusCode)
	assert.Equal(t, []string{`"api./login";q=3;w=10`}, res.Header["Ratelimit-Policy"])
	assert.Equal(t, []string{`"api./login";r=0;t=10`}, res.Header["Ratelimit"])
}

// TestServiceAPI: the API is the route path by default, "" outside a mux,
// and what WithAPI says otherwise.
func TestServiceAPI(t *testing.T) {
	fake := clock.NewFake()
	var apis []string
	recordAPI := httplimit.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, d httplimit.Denial) {
		apis = append(apis, d.API)
		w.WriteHeader(http.StatusTooManyRequests)
	})
	t.Run("outside a mux", func(t *testing.T) {
		svc := service(t, "default = fixed-window,1,10s\napi./login = fixed-window,5,10s\n", fake)
		mw, err := httplimit.ForService(svc, recordAPI)
		require.NoError(t, err)
		h := mw.Handler(ok)
		serve(h, request("203.0.113.7:1", "/login"))
		res := serve(h, request("203.0.113.7:1", "/anything-else")).Result()
		assert.Equal(t, 429, res.StatusCode, "all unrouted requests of a user share one budget")
		assert.Equal(t, []string{`"default";q=1;w=10`}, res.Header["Ratelimit-Policy"], "the API rule does not apply to \"\"")
		assert.Equal(t, []string{""}, apis)
	})
	t.Run("WithAPI asks the mux", func(t *testing.T) {
		apis = nil
		svc := service(t, "default = fixed-window,1,10s\napi./login = fixed-window,5,10s\n", fake)
		mux := http.NewServeMux()
		mux.Handle("POST example.com/login", ok)
		mw, err := httplimit.ForService(svc, recordAPI, httplimit.WithAPI(func(r *http.Request) string {
			_, pattern := mux.Handler(r)
			return httplimit.RouteAPI(pattern)
		}))
		require.NoError(t, err)
		r := request("203.0.113.7:1", "http://example.com/login")
		r.Method = "POST"
		res := serve(mw.Handler(mux), r).Result()
		assert.Equal(t, []string{`"api./login";q=5;w=10`}, res.Header["Ratelimit-Policy"])
	})
	for pattern, want := range map[string]string{
		"GET /items/{id}":             "/items/{id}",
		"example.com/items/":          "/items/",
		"POST example.com/login":      "/login",
		"/":                           "/",
		"":                            "",
		"GET /{$}":                    "/{$}",
		"DELETE /a/{rest...}":         "/a/{rest...}",
		"GET api.example.com/v1/item": "/v1/item",
	} {
		assert.Equal(t, want, httplimit.RouteAPI(pattern), "RouteAPI(%q)", pattern)
	}
}
