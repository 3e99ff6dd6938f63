package policy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/policy"
)

// maxErrorLen bounds an error message, whatever the input.
const maxErrorLen = 1024

// checkBook asserts what every accepted book guarantees: valid limits, the
// Rule of one-rule entries only, a canonical text that parses back to the
// same book in both formats, and LimitsFor and RuleFor agreeing with the
// listing.
func checkBook(t *testing.T, b *policy.Book) {
	t.Helper()
	rules := b.Rules()
	require.Equal(t, b.Len(), len(rules))
	require.Equal(t, policy.Default, rules[0].Scope)
	require.Equal(t, rules[0].Limits, b.DefaultLimits())
	require.Equal(t, rules[0].Rule, b.Default())
	for _, e := range rules {
		require.NoError(t, e.Limits.Validate(), "%s", e)
		if e.Limits.Len() == 1 {
			require.Equal(t, e.Limits.At(0), e.Rule, "%s: the Rule of a one-rule entry", e)
		} else {
			require.Equal(t, admit.Rule{}, e.Rule, "%s: the Rule of a composite", e)
		}
		switch e.Scope {
		case policy.API:
			require.Equal(t, e.Limits, b.LimitsFor("\x00not a user", e.Name), "%s", e)
			require.Equal(t, e.Rule, b.RuleFor("\x00not a user", e.Name), "%s", e)
		case policy.User:
			require.Equal(t, e.Limits, b.LimitsFor(e.Name, "\x00not an api"), "%s", e)
			require.Equal(t, e.Rule, b.RuleFor(e.Name, "\x00not an api"), "%s", e)
		}
	}
	text := b.String()
	again, err := policy.Parse(strings.NewReader(text))
	require.NoError(t, err, "the canonical text %q", text)
	require.Equal(t, b, again, "Parse(b.String())")
	require.Equal(t, text, again.String(), "the canonical text is a fixed point")
	data, err := json.Marshal(b)
	require.NoError(t, err)
	again, err = policy.ParseJSON(bytes.NewReader(data))
	require.NoError(t, err, "the canonical JSON %s", data)
	require.Equal(t, b, again, "ParseJSON(json.Marshal(b))")
}

func checkError(t *testing.T, in []byte, b *policy.Book, err error) {
	t.Helper()
	require.Nil(t, b)
	var pe *policy.Error
	require.True(t, errors.As(err, &pe), "%v is a *policy.Error", err)
	require.LessOrEqual(t, len(err.Error()), maxErrorLen, "error message of %d bytes", len(err.Error()))
	require.LessOrEqual(t, pe.Line, bytes.Count(in, []byte{'\n'})+1, "line %d of a %d-line input", pe.Line, bytes.Count(in, []byte{'\n'})+1)
	require.NotEmpty(t, pe.Msg+func() string {
		if pe.Err != nil {
			return pe.Err.Error()
		}
		return ""
	}(), "the error says what is wrong")
}

// FuzzParse checks the properties format on any input: Parse never panics;
// an error is a *policy.Error with a bounded message and a line within the
// input; an accepted book is valid and its canonical text (and JSON) parse
// back to the same book.
//
// Run it with: go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 2m ./policy/
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		seedConfig,
		"default = token-bucket,5,10\r\napi./login = fixed-window,2,10\r\n",
		"default=sliding-log,3,1500ms",
		"# c\n\n\tdefault\t=\tsliding-counter,7,1h\n",
		"default = token-bucket,5,10\napi.v1.orders = token-bucket,2,1\nuser.a.b@c = token-bucket,3,1\nuser.zoë = token-bucket,1,1",
		"default = token-bucket,5,10\napi.x = token-bucket,1,1\nuser.x = token-bucket,1,1",
		"",
		"\n\n\n",
		"api./login = fixed-window,2,10\n",
		"default = token-bucket,5,10\napi./login fixed-window,2,10\n",
		"default = token-bucket,5,10\nAPI./login = fixed-window,2,10\n",
		"default = token-bucket,5,10\napi. = fixed-window,2,10\n",
		"default = token-bucket,5,10\nuser. = fixed-window,2,10\n",
		"default = token-bucket,5,10\ndefault = token-bucket,5,10\n",
		"default = token-bucket,5,10\napi./a = fixed-window,2,10\napi./a = fixed-window,2,10\n",
		"default = token-bucket,5,10 # comment\n",
		"default = token-bucket,NaN,10", "default = token-bucket,5,1e309", "default = token-bucket,-0,10",
		"default = token-bucket,0x10,10", "default = token-bucket,010,10", "default = token-bucket,1_000,10",
		"default = TOKEN-BUCKET,5,10", "default = token\u2010bucket,5,10", "default = token-bucket,\uff15,10",
		"default = token-bucket,5,0.0000000001s", "default = token-bucket,5,1.5ns", "default = token-bucket,5,2562048h",
		"default = sliding-log,1000000000,1h", "default = token-bucket,9223372036854775807,2562047h",
		"\uFEFFdefault = token-bucket,5,10",
		"default = token-bucket,5,10\nuser.\xff = token-bucket,1,1",
		"default = token-bucket,5,10\nuser.a\x00b = token-bucket,1,1",
		"default = token-bucket,5,10\nuser.a\u200bb = token-bucket,1,1",
		"default = token-bucket,5,10\nuser.a=b = token-bucket,1,1",
		"default = token-bucket,5,10\nuser.a\rb = token-bucket,1,1",
		"default = token-bucket,5,10\n" + strings.Repeat("x", policy.MaxLineBytes+1),
		"default = token-bucket,5,10\nuser." + strings.Repeat("n", policy.MaxNameBytes+1) + " = token-bucket,1,1",
		"default = token-bucket,5,10\n" + strings.Repeat("#\n", 1000),
		"= = =", "====", "default == token-bucket,5,10", "default = = token-bucket,5,10",
		".= token-bucket,5,10", "api.api.api = token-bucket,1,1",
		"default = token-bucket,10,1s + fixed-window,1000,1h\napi./s = sliding-log,5,1s+sliding-counter,9,1m\nuser.u = token-bucket,1,1 + token-bucket,2,1",
		"default = token-bucket,10,1s +", "default = + token-bucket,10,1s", "default = token-bucket,10,1s ++ fixed-window,1,1s",
		"default = token-bucket,1,1 + token-bucket,1,1s", "default = token-bucket,10,1s + fixed-window,0,1h",
		"default = " + strings.Repeat("fixed-window,1,1h+", 8) + "fixed-window,2,1h",
		"default = token-bucket,+5,10", "default = token-bucket,5,10+#",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		b, err := policy.Parse(strings.NewReader(text))
		if err != nil {
			checkError(t, []byte(text), b, err)
			return
		}
		checkBook(t, b)
	})
}

// FuzzParseJSON checks the JSON format on any input, with the invariants of
// FuzzParse; its seeds include every input that docs/configuration.md lists
// as one encoding/json would let through, or read otherwise.
//
// Run it with: go test -run '^$' -fuzz '^FuzzParseJSON$' -fuzztime 2m ./policy/
func FuzzParseJSON(f *testing.F) {
	tb := func(cfg string) string {
		return `{"default": {"algorithm": "TokenBucket", "algoConfig": {` + cfg + `}}}`
	}
	for _, s := range []string{
		seedJSON,
		`{"default": "token-bucket,5,10"}`,
		`{"default": "token-bucket,5,10", "apis": {"/login": "fixed-window,2,10"}, "users": {"vip-1": "token-bucket,8,10"}}`,
		`{"default": {"algorithm":"SlidingWindowLog","algoConfig":{"maxRequests":5,"windowMs":1000}}}`,
		`{"default": {"algorithm":"SlidingWindowCounter","algoConfig":{"maxRequests":5,"windowMs":1000}}}`,
		`{"default": {"algorithm":"FixedWindow","algoConfig":{"windowMs":1000,"maxRequests":5}}}`,
		tb(`"capacity": 10, "refillRatePerSecond": 1`),
		tb(`"capacity": 10, "refillRatePerSecond": 0.3`),
		tb(`"capacity": 3, "refillRatePerSecond": 0.000000003`),
		tb(`"capacity": 10, "refillRatePerSecond": 1e400`),
		tb(`"capacity": 1e400, "refillRatePerSecond": 1`),
		tb(`"capacity": "5", "refillRatePerSecond": 1`),
		tb(`"capacity": null, "refillRatePerSecond": 1`),
		tb(`"capacity": 1.5, "refillRatePerSecond": 1`),
		tb(`"capacity": -0, "refillRatePerSecond": -0.0`),
		tb(`"capacity": 10, "capacity": 0, "refillRatePerSecond": 1`),
		tb(`"Capacity": 10, "refillRatePerSecond": 1`),
		tb(`"capacity": 10, "refillRatePerSecond": 1, "burst": 3`),
		tb(`"capacty": 10, "refillRatePerSecond": 1`),
		tb(`"capacity": 2147483647, "refillRatePerSecond": 0.5`),
		`{"RATE": 5}`, `{"Default": "token-bucket,5,10"}`, `{"DEFAULT": "token-bucket,5,10"}`,
		`{"default": "token-bucket,5,10", "default": "token-bucket,0,10"}`,
		`{"default": null}`, `{"default": "token-bucket,5,10", "apis": null}`, `null`, `[]`, `""`, `5`,
		`{"default": "token-bucket,5,10"} garbage`, `{"default": "token-bucket,5,10"}{}`, `{"default": "token-bucket,5,10"`,
		`{"default": "token-bucket,5,10", "apis": {"": "token-bucket,1,1"}}`,
		`{"default": "token-bucket,5,10", "users": {"a\u0000b": "token-bucket,1,1", "a\ud800": "token-bucket,1,1"}}`,
		`{"default": "token-bucket,5,10", "users": {"ab": "token-bucket,1,1", "\u0061b": "token-bucket,1,1"}}`,
		`{"default": "token-bucket,5,10", "apis": {"/a": "token-bucket,1,1", "/a": "token-bucket,1,1"}}`,
		`{"default": "token-bucket,5,10", "users": {"zo\u00eb": "token-bucket,1,1", "x=y": "token-bucket,1,1"}}`,
		"{\"default\": \"token-bucket,5,10\", \"users\": {\"\xff\": \"token-bucket,1,1\"}}",
		"\uFEFF{\"default\": \"token-bucket,5,10\"}",
		`{"default": ` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
		`{"default": {"algorithm": {"algorithm": {}}}}`,
		`{"default": {"algoConfig": {"algoConfig": {}}}}`,
		`{"default": "token-bucket,5,10", "apis": {"/a": {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 2, "windowMs": 9223372036855}}}}`,
		`{"default": ["token-bucket,10,1s", {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 1000, "windowMs": 3600000}}], "apis": {"/s": "sliding-log,5,1s + sliding-counter,9,1m", "/one": ["token-bucket,3,1s"]}}`,
		`{"default": []}`, `{"default": [null]}`, `{"default": [[]]}`, `{"default": ["token-bucket,1,1", "token-bucket,1,1s"]}`,
		`{"default": ["token-bucket,1,1 + fixed-window,1,1", "sliding-log,1,1"]}`, `{"default": ["token-bucket,1,1",]}`,
		`{"default": ["fixed-window,1,1h","fixed-window,2,1h","fixed-window,3,1h","fixed-window,4,1h","fixed-window,5,1h","fixed-window,6,1h","fixed-window,7,1h","fixed-window,8,1h","fixed-window,9,1h"]}`,
		`{"default": ["token-bucket,1,1", {"algorithm": "TokenBucket", "algoConfig": {"capacity": 1, "refillRatePerSecond": 1}}]}`,
		`{"default": "token-bucket,5,10", "users": {"u": ["token-bucket,1,1", "fixed-window,0,1"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := policy.ParseJSON(bytes.NewReader(data))
		if err != nil {
			checkError(t, data, b, err)
			// An invalid rule is reported as such, whatever the form.
			if errors.Is(err, admit.ErrInvalidRule) {
				var pe *policy.Error
				require.True(t, errors.As(err, &pe))
				require.NotEmpty(t, pe.Path, "a rule error says which rule")
			}
			return
		}
		checkBook(t, b)
		// encoding/json would accept what ParseJSON accepts.
		require.True(t, json.Valid(data), "ParseJSON accepted invalid JSON %q", data)
	})
}
