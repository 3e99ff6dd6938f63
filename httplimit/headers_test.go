package httplimit_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
)

// TestDraftExamplesParse checks the test's structured-field parser on the
// examples of draft-ietf-httpapi-ratelimit-headers-10 (sections 3.2, 4.2), so
// that the tests below, which read the middleware's fields with it, read them
// as the draft means them.
func TestDraftExamplesParse(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  []sfItem
	}{
		{`"default";q=100;w=10`, []sfItem{{"default", []sfParam{{"q", int64(100)}, {"w", int64(10)}}}}},
		{`"permin";q=50;w=60,"perhr";q=1000;w=3600`, []sfItem{
			{"permin", []sfParam{{"q", int64(50)}, {"w", int64(60)}}},
			{"perhr", []sfParam{{"q", int64(1000)}, {"w", int64(3600)}}},
		}},
		{`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, []sfItem{{"peruser", []sfParam{
			{"q", int64(65535)}, {"qu", "content-bytes"}, {"w", int64(10)}, {"pk", sfBytes("sdfjLJUOUH==")},
		}}}},
		{`"default";r=50;t=30`, []sfItem{{"default", []sfParam{{"r", int64(50)}, {"t", int64(30)}}}}},
		{`"default";r=999;pk=:dHJpYWwxMjEzMjM=:`, []sfItem{{"default", []sfParam{{"r", int64(999)}, {"pk", sfBytes("dHJpYWwxMjEzMjM=")}}}}},
	} {
		got, err := parseSFList([]string{tc.field})
		require.NoError(t, err, "parse %s", tc.field)
		assert.Equal(t, tc.want, got, "parse %s", tc.field)
	}
}

// TestHeadersMatchDraftExamples drives a middleware to the states of the
// draft's examples and compares the fields byte for byte.
func TestHeadersMatchDraftExamples(t *testing.T) {
	t.Run("policy/q=100;w=10", func(t *testing.T) {
		w := serve(middleware(t, "fixed-window,100,10s", clock.NewFake()).Handler(ok), request("192.0.2.1:1234", "/"))
		assert.Equal(t, []string{`"default";q=100;w=10`}, w.Result().Header["Ratelimit-Policy"])
	})
	t.Run("ratelimit/r=50;t=30", func(t *testing.T) {
		// 100 per minute, fixed windows [0, 60s): fifty requests at 30s
		// leave 50, and the window resets in 30s.
		fake := clock.NewFake()
		h := middleware(t, "fixed-window,100,60s", fake).Handler(ok)
		fake.Set(30 * time.Second)
		var w = serve(h, request("192.0.2.1:1234", "/"))
		for range 49 {
			w = serve(h, request("192.0.2.1:1234", "/"))
		}
		res := w.Result()
		assert.Equal(t, http.StatusOK, res.StatusCode)
		assert.Equal(t, []string{`"default";q=100;w=60`}, res.Header["Ratelimit-Policy"])
		assert.Equal(t, []string{`"default";r=50;t=30`}, res.Header["Ratelimit"])
		assert.Empty(t, res.Header.Get("Retry-After"), "no Retry-After on an admitted request")

		items, err := parseSFList(res.Header.Values("RateLimit"))
		require.NoError(t, err)
		require.Len(t, items, 1)
		assert.Equal(t, "default", items[0].Value)
		assert.Equal(t, int64(50), items[0].param("r"))
		assert.Equal(t, int64(30), items[0].param("t"))
	})
}

// TestHeadersStep scripts requests of one client over time and checks every
// field of every response.
func TestHeadersStep(t *testing.T) {
	fake := clock.NewFake()
	h := middleware(t, "token-bucket,2,10s", fake, httplimit.WithLegacyHeaders()).Handler(ok)
	steps := []struct {
		at                        time.Duration
		status                    int
		rateLimit, retry          string
		limit, remaining, resetXR string
	}{
		// A bucket of 2, one token per 5s. t: until the bucket is full again.
		{0, 200, `"default";r=1;t=5`, "", "2", "1", "5"},
		{0, 200, `"default";r=0;t=10`, "", "2", "0", "10"},
		// Denied: t and Retry-After are the wait for the next token.
		{0, 429, `"default";r=0;t=5`, "5", "2", "0", "5"},
		{4*time.Second + 1, 429, `"default";r=0;t=1`, "1", "2", "0", "1"},
		{5 * time.Second, 200, `"default";r=0;t=10`, "", "2", "0", "10"},
		{7*time.Second + 500*time.Millisecond, 429, `"default";r=0;t=3`, "3", "2", "0", "3"},
	}
	for i, st := range steps {
		fake.Set(st.at)
		res := serve(h, request("192.0.2.1:1234", "/")).Result()
		call := func(what string) string { return "step " + strconv.Itoa(i) + " (t=" + st.at.String() + "): " + what }
		assert.Equal(t, st.status, res.StatusCode, call("status"))
		assert.Equal(t, []string{`"default";q=2;w=10`}, res.Header["Ratelimit-Policy"], call("RateLimit-Policy"))
		assert.Equal(t, []string{st.rateLimit}, res.Header["Ratelimit"], call("RateLimit"))
		assert.Equal(t, st.retry, res.Header.Get("Retry-After"), call("Retry-After"))
		assert.Equal(t, st.limit, res.Header.Get("X-RateLimit-Limit"), call("X-RateLimit-Limit"))
		assert.Equal(t, st.remaining, res.Header.Get("X-RateLimit-Remaining"), call("X-RateLimit-Remaining"))
		assert.Equal(t, st.resetXR, res.Header.Get("X-RateLimit-Reset"), call("X-RateLimit-Reset"))
	}
}

// TestRetryAfterRoundsUp: Retry-After and t are the exact RetryAfter rounded
// up to whole seconds, never down and never 0 on a 429.
func TestRetryAfterRoundsUp(t *testing.T) {
	t.Run("62.5ms is 1", func(t *testing.T) {
		// 16 per second: a token every 62.5ms (Envoy's PartialConsumption case).
		h := middleware(t, "token-bucket,16,1s", clock.NewFake()).Handler(ok)
		for i := range 16 {
			require.Equal(t, 200, serve(h, request("192.0.2.1:1", "/")).Code, "request %d", i)
		}
		res := serve(h, request("192.0.2.1:1", "/")).Result()
		assert.Equal(t, 429, res.StatusCode)
		assert.Equal(t, "1", res.Header.Get("Retry-After"))
		assert.Equal(t, []string{`"default";r=0;t=1`}, res.Header["Ratelimit"])
	})
	for _, tc := range []struct {
		at   time.Duration // of the denied request, with the window [0, 10s) spent at 0
		want string
	}{
		{8 * time.Second, "2"},         // exactly 2s: not rounded up to 3
		{8*time.Second - 1, "3"},       // 2s + 1ns: rounded up
		{10*time.Second - 1, "1"},      // 1ns: 1, not 0
		{500 * time.Millisecond, "10"}, // 9.5s
	} {
		t.Run("fixed-window/at="+tc.at.String(), func(t *testing.T) {
			fake := clock.NewFake()
			h := middleware(t, "fixed-window,1,10s", fake).Handler(ok)
			require.Equal(t, 200, serve(h, request("192.0.2.1:1", "/")).Code)
			fake.Set(tc.at)
			res := serve(h, request("192.0.2.1:1", "/")).Result()
			require.Equal(t, 429, res.StatusCode)
			assert.Equal(t, tc.want, res.Header.Get("Retry-After"))
			assert.Equal(t, []string{`"default";r=0;t=` + tc.want}, res.Header["Ratelimit"])
		})
	}
	t.Run("a denial without RetryAfter is still 1", func(t *testing.T) {
		// A KeyedLimiter of someone else's that denies with RetryAfter 0.
		mw, err := httplimit.New(fixed{admit.Decision{Limit: 3}})
		require.NoError(t, err)
		res := serve(mw.Handler(ok), request("192.0.2.1:1", "/")).Result()
		assert.Equal(t, 429, res.StatusCode)
		assert.Equal(t, "1", res.Header.Get("Retry-After"))
		assert.Equal(t, []string{`"default";r=0;t=1`}, res.Header["Ratelimit"])
		assert.Empty(t, res.Header["Ratelimit-Policy"], "no WithPolicy: the window is unknown")
	})
}

// TestWindowRoundsUp: w is the Window in whole seconds, rounded up.
func TestWindowRoundsUp(t *testing.T) {
	for rule, want := range map[string]string{
		"token-bucket,3,1500ms": `"default";q=3;w=2`,
		"token-bucket,3,1ms":    `"default";q=3;w=1`,
		"fixed-window,5,1h":     `"default";q=5;w=3600`,
		"sliding-log,7,2s":      `"default";q=7;w=2`,
	} {
		res := serve(middleware(t, rule, clock.NewFake()).Handler(ok), request("192.0.2.1:1", "/")).Result()
		assert.Equal(t, []string{want}, res.Header["Ratelimit-Policy"], rule)
	}
}

// TestProblemBody: a denial is a 429 with an RFC 9457 body of the draft's
// quota-exceeded type naming the quota.
func TestProblemBody(t *testing.T) {
	lim, rule := limiter(t, "fixed-window,1,10s", clock.NewFake())
	mw, err := httplimit.New(lim, httplimit.WithPolicy(`per "ten" \s`, rule))
	require.NoError(t, err)
	h := mw.Handler(ok)
	serve(h, request("192.0.2.1:1", "/"))
	w := serve(h, request("192.0.2.1:1", "/"))
	res := w.Result()
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	assert.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
	assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	assert.Equal(t, []string{`"per \"ten\" \\s";q=1;w=10`}, res.Header["Ratelimit-Policy"])

	var body map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), "body %s", w.Body)
	assert.Equal(t, map[string]any{
		"type":              httplimit.ProblemType,
		"title":             "Quota Exceeded",
		"status":            float64(429),
		"violated-policies": []any{`per "ten" \s`},
		"detail":            "Too many requests; retry in 10s.",
	}, body)

	items, err := parseSFList(res.Header.Values("RateLimit"))
	require.NoError(t, err)
	assert.Equal(t, `per "ten" \s`, items[0].Value, "the header's name is the body's")
}

// TestStackedMiddlewares: a second limiter adds its items to the list fields.
func TestStackedMiddlewares(t *testing.T) {
	fake := clock.NewFake()
	perClient := middleware(t, "token-bucket,10,1m", fake)
	lim, rule := limiter(t, "fixed-window,100,1s", fake)
	global, err := httplimit.New(lim, httplimit.WithPolicy("global", rule), httplimit.WithKey(func(*http.Request) (string, bool) { return "all", true }))
	require.NoError(t, err)
	h := perClient.Handler(global.Handler(ok))

	res := serve(h, request("192.0.2.1:1", "/")).Result()
	assert.Equal(t, []string{`"default";q=10;w=60`, `"global";q=100;w=1`}, res.Header["Ratelimit-Policy"])
	assert.Equal(t, []string{`"default";r=9;t=6`, `"global";r=99;t=1`}, res.Header["Ratelimit"])
	items, err := parseSFList(res.Header.Values("RateLimit"))
	require.NoError(t, err)
	assert.Len(t, items, 2)
}
