package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/httplimit"
)

// maxRequests bounds every request loop of the test.
const maxRequests = 20

// TestServer starts the server on a free loopback port with the example rule
// file and a fake clock, and drives it with a real HTTP client until it is
// limited.
func TestServer(t *testing.T) {
	fake := clock.NewFake()
	base, _ := start(t, config{rules: "rules.conf", clock: fake})

	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	do := func(method, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		require.NoError(t, err)
		res, err := client.Do(req)
		require.NoError(t, err, "%s %s", method, path)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, string(body)
	}
	// untilLimited sends requests until one is denied, at most maxRequests,
	// and returns how many passed and the denial.
	untilLimited := func(method, path string) (int, *http.Response, string) {
		t.Helper()
		for i := range maxRequests {
			res, body := do(method, path)
			if res.StatusCode == http.StatusTooManyRequests {
				return i, res, body
			}
			require.Equal(t, http.StatusOK, res.StatusCode, "%s %s #%d: %s", method, path, i, body)
			assert.NotEmpty(t, res.Header.Get("RateLimit"), "%s %s #%d: RateLimit on an admitted response", method, path, i)
		}
		t.Fatalf("%s %s: not limited after %d requests", method, path, maxRequests)
		return 0, nil, ""
	}

	// GET /hello: the default rule, 5 per 10s as a token bucket.
	passed, res, body := untilLimited("GET", "/hello")
	assert.Equal(t, 5, passed, "GET /hello: requests admitted before the first 429")
	assert.Equal(t, `"default";q=5;w=10`, res.Header.Get("RateLimit-Policy"))
	assert.Equal(t, `"default";r=0;t=2`, res.Header.Get("RateLimit"), "the next token is 2s away")
	assert.Equal(t, "2", res.Header.Get("Retry-After"))
	assertProblem(t, res, body, "default")

	// POST /login: its own rule (2 per fixed 10s window) and its own budget.
	passed, res, body = untilLimited("POST", "/login")
	assert.Equal(t, 2, passed, "POST /login: requests admitted before the first 429")
	assert.Equal(t, `"api./login";q=2;w=10`, res.Header.Get("RateLimit-Policy"))
	assert.Equal(t, `"api./login";r=0;t=10`, res.Header.Get("RateLimit"))
	assert.Equal(t, "10", res.Header.Get("Retry-After"))
	assertProblem(t, res, body, "api./login")

	// Every /items/{id} is one API with the default rule: a budget of its own.
	res, body = do("GET", "/items/42")
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "item 42\n", body)
	assert.Equal(t, `"default";r=4;t=2`, res.Header.Get("RateLimit"))
	res, _ = do("GET", "/items/43")
	assert.Equal(t, `"default";r=3;t=4`, res.Header.Get("RateLimit"), "/items/43 shares /items/42's budget")

	// Health checks are exempt: never limited, no headers.
	for i := range maxRequests {
		res, body := do("GET", "/healthz")
		require.Equal(t, http.StatusOK, res.StatusCode, "health check %d", i)
		assert.Equal(t, "ok\n", body)
		assert.Empty(t, res.Header.Values("RateLimit"), "health check %d", i)
	}

	// Two seconds later /hello has one token again, and only one.
	fake.Advance(2 * time.Second)
	res, _ = do("GET", "/hello")
	assert.Equal(t, http.StatusOK, res.StatusCode, "GET /hello after Retry-After")
	assert.Equal(t, `"default";r=0;t=10`, res.Header.Get("RateLimit"))
	res, _ = do("GET", "/hello")
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode)

	// /login's window ends at 10s.
	fake.Set(10 * time.Second)
	res, _ = do("POST", "/login")
	assert.Equal(t, http.StatusOK, res.StatusCode, "POST /login in the next window")
}

// start runs the server of cfg on a free loopback port until the test ends,
// and returns its base URL and a function that stops it and returns run's
// error.
func start(t *testing.T, cfg config) (base string, stop func() error) {
	t.Helper()
	cfg.addr = "127.0.0.1:0"
	addrc := make(chan string, 1)
	cfg.ready = func(addr string) { addrc <- addr }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	select {
	case addr := <-addrc:
		base = "http://" + addr
	case err := <-done:
		cancel()
		t.Fatalf("run returned before listening: %v", err)
	}
	stopped := false
	var err error
	stop = func() error {
		if stopped {
			return err
		}
		stopped = true
		cancel()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			err = errors.New("the server did not stop within 10s of its context being cancelled")
		}
		return err
	}
	t.Cleanup(func() { assert.NoError(t, stop(), "stopping the server") })
	return base, stop
}

// assertProblem checks a 429's problem body: RFC 9457, the draft's
// quota-exceeded type, naming the quota.
func assertProblem(t *testing.T, res *http.Response, body, quota string) {
	t.Helper()
	assert.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
	var p struct {
		Type     string   `json:"type"`
		Title    string   `json:"title"`
		Status   int      `json:"status"`
		Detail   string   `json:"detail"`
		Violated []string `json:"violated-policies"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&p), "problem body %s", body)
	assert.Equal(t, httplimit.ProblemType, p.Type)
	assert.Equal(t, "Quota Exceeded", p.Title)
	assert.Equal(t, http.StatusTooManyRequests, p.Status)
	assert.Equal(t, []string{quota}, p.Violated)
	assert.Equal(t, "Too many requests; retry in "+res.Header.Get("Retry-After")+"s.", p.Detail)
}

// TestServerShadow: in shadow mode the server blocks nothing and logs the
// would-be denials.
func TestServerShadow(t *testing.T) {
	var logs bytes.Buffer
	base, stop := start(t, config{rules: "rules.conf", clock: clock.NewFake(), shadow: true, log: log.New(&logs, "", 0)})
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for i := range 3 {
		res, err := client.Post(base+"/login", "text/plain", nil)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, "POST /login #%d in shadow mode", i)
	}
	require.NoError(t, stop())
	assert.Contains(t, logs.String(), "shadow: would deny POST /login for 127.0.0.1 (quota api./login, retry in 10s)")
}

// TestBadRules: a rule file with a mistake stops the server before it
// listens, with the error naming the line.
func TestBadRules(t *testing.T) {
	path := t.TempDir() + "/bad.conf"
	require.NoError(t, os.WriteFile(path, []byte("default = token-bucket,0,10s\n"), 0o600))
	err := run(t.Context(), config{addr: "127.0.0.1:0", rules: path})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 1")
	err = run(t.Context(), config{addr: "127.0.0.1:0", rules: "rules.conf", trustXFF: []string{"10.0.0.0/33"}})
	require.Error(t, err, "an invalid trusted network")
}

// TestMetrics: /metrics reports the Service's decisions per API, scope and
// outcome, without a client address anywhere, and is never limited itself.
func TestMetrics(t *testing.T) {
	base, _ := start(t, config{rules: "rules.conf", clock: clock.NewFake()})
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	get := func(path string) (int, string) {
		t.Helper()
		res, err := client.Get(base + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	for range 6 { // the default rule admits 5 in 10s
		get("/hello")
	}
	var metrics string
	for range 10 { // scrapes are exempt: never a 429
		code, body := get("/metrics")
		require.Equal(t, http.StatusOK, code)
		metrics = body
	}
	assert.Contains(t, metrics, `admit_decisions_total{limits="token-bucket,5,10s",name="/hello",outcome="admitted",scope="default",source="policy"} 5`)
	assert.Contains(t, metrics, `admit_decisions_total{limits="token-bucket,5,10s",name="/hello",outcome="denied",scope="default",source="policy"} 1`)
	assert.Contains(t, metrics, `admit_store_keys{limits="token-bucket,5,10s",name="/hello",source="policy"} 1`)
	assert.Regexp(t, `admit_decisions_total\{limits="",name="service",outcome="denied",scope="",source="http"\} 1\n`, metrics)
	assert.NotContains(t, metrics, "127.0.0.1", "a client address in the metrics")
	assert.NotContains(t, metrics, `name="/metrics"`, "the exempt scrapes were decided")
}
