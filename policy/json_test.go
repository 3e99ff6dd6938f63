package policy_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/policy"
)

func parseJSON(t testing.TB, text string) *policy.Book {
	t.Helper()
	b, err := policy.ParseJSON(strings.NewReader(text))
	require.NoError(t, err)
	return b
}

// seedJSON is the seed's config in JSON, with the object forms of the
// second design note.
const seedJSON = `{
  "default": "token-bucket,5,10",
  "apis": {
    "/login": {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 2, "windowMs": 10000}}
  },
  "users": {
    "vip-1": {"algorithm": "TokenBucket", "algoConfig": {"capacity": 8, "refillRatePerSecond": 0.8}}
  }
}`

func TestParseJSONSeed(t *testing.T) {
	assert.Equal(t, parse(t, seedConfig), parseJSON(t, seedJSON))
}

func TestParseJSONObjectForms(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// The second design note's examples: capacity 10 refilled at 1/s is
		// 10 per 10s; 5 per 1000 ms.
		{`{"algorithm":"TokenBucket","algoConfig":{"capacity":10,"refillRatePerSecond":1}}`, "token-bucket,10,10s"},
		{`{"algorithm":"SlidingWindowLog","algoConfig":{"maxRequests":5,"windowMs":1000}}`, "sliding-log,5,1s"},
		{`{"algorithm":"FixedWindow","algoConfig":{"maxRequests":2,"windowMs":10000}}`, "fixed-window,2,10s"},
		{`{"algorithm":"SlidingWindowCounter","algoConfig":{"maxRequests":100,"windowMs":60000}}`, "sliding-counter,100,1m"},
		{`{"algoConfig":{"windowMs":1500,"maxRequests":3},"algorithm":"FixedWindow"}`, "fixed-window,3,1500ms"}, // any order
		{`{"algorithm":"TokenBucket","algoConfig":{"capacity":5,"refillRatePerSecond":0.5}}`, "token-bucket,5,10s"},
		{`{"algorithm":"TokenBucket","algoConfig":{"capacity":1,"refillRatePerSecond":4}}`, "token-bucket,1,250ms"},
		{`{"algorithm":"TokenBucket","algoConfig":{"capacity":1,"refillRatePerSecond":1.6}}`, "token-bucket,1,625ms"},
		{`{"algorithm":"TokenBucket","algoConfig":{"capacity":100,"refillRatePerSecond":0.001}}`, "token-bucket,100,100000s"},
		{`{"algorithm":"TokenBucket","algoConfig":{"capacity":3,"refillRatePerSecond":1.50}}`, "token-bucket,3,2s"},
		{`"sliding-window,3,10"`, "sliding-log,3,10s"},
	} {
		b := parseJSON(t, `{"default":`+tc.in+`}`)
		assert.Equal(t, tc.want, b.Default().String(), "%s", tc.in)
	}
}

func TestParseJSONAccepts(t *testing.T) {
	b := parseJSON(t, "\n\t {\"users\": {}, \"apis\": {\"/a\": \"token-bucket,1,1\", \"/A\": \"token-bucket,2,1\"}, \"default\": \"token-bucket,3,1\"}\n\n")
	assert.Equal(t, "default = token-bucket,3,1s\napi./A = token-bucket,2,1s\napi./a = token-bucket,1,1s\n", b.String())
	// An escaped name is the name it spells.
	b = parseJSON(t, `{"default": "token-bucket,3,1", "users": {"zo\u00eb": "token-bucket,2,1"}}`)
	assert.Equal(t, rule(t, "token-bucket,2,1"), b.RuleFor("zoë", "/x"))
}

// TestParseJSONComposites: an array of rules, each in the text or the object
// form, is a composite wherever a rule is accepted; so is a composite's text
// form; a one-element array is its rule.
func TestParseJSONComposites(t *testing.T) {
	b := parseJSON(t, `{
  "default": ["token-bucket,10,1s", {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 1000, "windowMs": 3600000}}],
  "apis": {
    "/search": "sliding-counter,100,1m + token-bucket,5,1s",
    "/one":    ["token-bucket,3,1s"],
    "/obj":    [{"algorithm": "SlidingWindowLog", "algoConfig": {"maxRequests": 5, "windowMs": 1000}}]
  },
  "users": {
    "vip-1": [
      {"algorithm": "TokenBucket", "algoConfig": {"capacity": 50, "refillRatePerSecond": 50}},
      "fixed-window,10000,1h",
      "sliding-log,2000,10m"
    ]
  }
}`)
	assert.Equal(t, parse(t, `
default     = token-bucket,10,1s + fixed-window,1000,1h
api./search = sliding-counter,100,1m + token-bucket,5,1s
api./one    = token-bucket,3,1s
api./obj    = sliding-log,5,1s
user.vip-1  = token-bucket,50,1s + fixed-window,10000,1h + sliding-log,2000,10m
`), b, "the JSON book equals its properties twin")
	assert.Equal(t, rule(t, "token-bucket,3,1s"), b.RuleFor("alice", "/one"), "a one-element array is its rule")
	assert.Equal(t, admit.Rule{}, b.RuleFor("alice", "/search"))
	assert.Equal(t, limits(t, "sliding-counter,100,1m + token-bucket,5,1s"), b.LimitsFor("alice", "/search"))

	// MarshalJSON writes a composite as the array of its rules' texts, and a
	// single rule as its text, however it was given.
	data, err := json.Marshal(b)
	require.NoError(t, err)
	assert.JSONEq(t, `{
  "default": ["token-bucket,10,1s", "fixed-window,1000,1h"],
  "apis": {"/obj": "sliding-log,5,1s", "/one": "token-bucket,3,1s", "/search": ["sliding-counter,100,1m", "token-bucket,5,1s"]},
  "users": {"vip-1": ["token-bucket,50,1s", "fixed-window,10000,1h", "sliding-log,2000,10m"]}
}`, string(data))
	assert.Equal(t, b, parseJSON(t, string(data)))
}

// TestParseJSONErrors pins every error of the JSON format: its line, its path
// and its whole message.
func TestParseJSONErrors(t *testing.T) {
	const ruleWant = `want rule text such as "token-bucket,5,10s", an object such as {"algorithm": "TokenBucket", "algoConfig": {"capacity": 5, "refillRatePerSecond": 0.5}}, or an array of such rules that all apply`
	const elementWant = `an element of the array is one rule: rule text such as "token-bucket,5,10s" or an object such as {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 1000, "windowMs": 3600000}}`
	const bookWant = `want a JSON object such as {"default": "token-bucket,5,10s", "apis": {"/login": "fixed-window,2,10s"}, "users": {"vip-1": "token-bucket,8,10s"}}`
	const tbWants = `TokenBucket wants "capacity" and "refillRatePerSecond"`
	tb := func(cfg string) string {
		return `{"default": {"algorithm": "TokenBucket", "algoConfig": {` + cfg + `}}}`
	}
	fw := func(cfg string) string {
		return `{"default": {"algorithm": "FixedWindow", "algoConfig": {` + cfg + `}}}`
	}
	for _, tc := range []struct {
		name string
		in   string
		line int
		path string
		msg  string
		rule bool // wraps admit.ErrInvalidRule
	}{
		// The document.
		{"empty", " \n", 0, "", `empty input; want a JSON object such as {"default": "token-bucket,5,10s"}`, false},
		{"array", "[]", 1, "", "an array is not an object; " + bookWant, false},
		{"null book", "null", 1, "", "null is not an object; " + bookWant, false},
		{"string book", `"token-bucket,5,10"`, 1, "", `the string "token-bucket,5,10" is not an object; ` + bookWant, false},
		{"missing default", `{"apis": {}}`, 0, "", "no default rule; add one for the requests that match no user or API rule, such as `default = token-bucket,5,10s` (or \"default\": \"token-bucket,5,10s\" in JSON)", false},
		// Syntax: the line of the first byte at which the text stops being
		// JSON, or of the last byte that is not space when the text ends
		// early; the same line and message on every Go release.
		{"syntax", "{\n\"default\": \"token-bucket,5,10\",\n}", 3, "", "invalid JSON: '}' after the ',' on line 2; want another field, or no ',' before the '}'", false},
		{"trailing comma, one line", `{"default": "token-bucket,5,10",}`, 1, "", "invalid JSON: '}' after ','; want another field, or no ',' before the '}'", false},
		{"trailing comma in an array", "{\"default\": [\"token-bucket,1,1\",\n]}", 2, "default[1]", "invalid JSON: ']' after the ',' on line 1; want another element, or no ',' before the ']'", false},
		{"missing comma", "{\"default\": \"token-bucket,5,10\"\n\"apis\": {}}", 2, "", `invalid JSON: invalid character '"' after a field's value; want ',' or '}'`, false},
		{"missing colon", `{"default" "token-bucket,5,10"}`, 1, "default", `invalid JSON: invalid character '"' after a field name; want ':'`, false},
		{"single quotes", `{'default': 'token-bucket,5,10'}`, 1, "", `invalid JSON: invalid character '\'' where a field name was expected; want a name in double quotes`, false},
		{"comment", "# rules\n{\"default\": \"token-bucket,5,10\"}", 1, "", "invalid JSON: invalid character '#' where a value was expected; want a string in double quotes, a number, an object, an array, true, false or null", false},
		{"bare word", "{\"default\":\n token-bucket}", 2, "default", "invalid JSON: invalid character 'o' in the literal true", false},
		{"not a value", `{"default": «token-bucket,5,10»}`, 1, "default", "invalid JSON: invalid character '«' where a value was expected; want a string in double quotes, a number, an object, an array, true, false or null", false},
		{"line break in a string", "{\"default\": \"token-bucket,5,10\n\"}", 1, "default", `invalid JSON: invalid character '\n' in a string; want it escaped, such as \n for a line break`, false},
		{"tab in a string", "{\"default\": \"token-bucket,5,\t10\"}", 1, "default", `invalid JSON: invalid character '\t' in a string; want it escaped, such as \n for a line break`, false},
		{"bad escape", `{"default": "token-bucket\,5,10"}`, 1, "default", `invalid JSON: invalid escape '\,' in a string; want \", \\, \/, \b, \f, \n, \r, \t, or \u and four hexadecimal digits`, false},
		{"bad \\u escape", `{"default": "token-bucket\u00g1"}`, 1, "default", `invalid JSON: invalid character 'g' in a \u escape; want four hexadecimal digits`, false},
		{"number without digits", tb(`"capacity": -, "refillRatePerSecond": 1`), 1, "default.algoConfig.capacity", "invalid JSON: invalid character ',' in a number after '-'; want a digit", false},
		{"number ending in .", tb(`"capacity": 10., "refillRatePerSecond": 1`), 1, "default.algoConfig.capacity", "invalid JSON: invalid character ',' in a number after '.'; want a digit", false},
		{"exponent without digits", tb(`"capacity": 1e+, "refillRatePerSecond": 1`), 1, "default.algoConfig.capacity", "invalid JSON: invalid character ',' in a number after '+'; want a digit", false},
		{"leading zero", tb(`"capacity": 010, "refillRatePerSecond": 1`), 1, "default.algoConfig", "invalid JSON: invalid character '1' after a field's value; want ',' or '}'", false},
		{"bracket mismatch", `{"default": ["token-bucket,1,1"}`, 1, "default", "invalid JSON: invalid character '}' after an element of an array; want ',' or ']'", false},
		{"literal cut short", `{"default": nul}`, 1, "default", "invalid JSON: invalid character '}' in the literal null", false},
		{"unterminated", `{"default": "token-bucket,5,10"`, 1, "", "invalid JSON: unexpected end of input", false},
		{"unterminated string", `{"default": "token-bucket,5,10`, 1, "default", "invalid JSON: unexpected end of input", false},
		{"unterminated, a line ending last", "{\"default\": \"token-bucket,5,10\",\n\"apis\": {\n\n", 2, "apis", "invalid JSON: unexpected end of input", false},
		{"unterminated number", `{"default": -`, 1, "default", "invalid JSON: unexpected end of input", false},
		{"trailing garbage", `{"default": "token-bucket,5,10"} garbage`, 1, "", "text after the end of the book's object; a JSON book is one object and nothing else", false},
		{"second object", "{\"default\": \"token-bucket,5,10\"}\n{}", 2, "", "an object after the end of the book's object; a JSON book is one object and nothing else", false},
		{"not utf-8", "{\"default\": \"token-bucket,5,10\",\n\"users\": {\"\xff\": \"token-bucket,5,10\"}}", 2, "", "not valid UTF-8; save the file as UTF-8", false},
		{"byte order mark", "\uFEFF{\"default\": \"token-bucket,5,10\"}", 1, "", "the file starts with a byte order mark (U+FEFF); save it as UTF-8 without one", false},
		{"byte order mark alone", "\uFEFF", 1, "", "the file starts with a byte order mark (U+FEFF); save it as UTF-8 without one", false},
		{"byte order mark then a blank line", "\uFEFF\n{\"default\": \"token-bucket,5,10\"}", 1, "", "the file starts with a byte order mark (U+FEFF); save it as UTF-8 without one", false},
		// Top-level fields.
		{"unknown field", `{"default": "token-bucket,5,10", "endpoints": {}}`, 1, "", `unknown field "endpoints"; want "default", "apis" or "users"`, false},
		{"Default", `{"Default": "token-bucket,5,10"}`, 1, "", `unknown field "Default"; field names are case-sensitive: did you mean "default"?`, false},
		{"APIS", `{"default": "token-bucket,5,10", "APIS": {}}`, 1, "", `unknown field "APIS"; field names are case-sensitive: did you mean "apis"?`, false},
		{"duplicate default", "{\"default\": \"token-bucket,5,10\",\n \"default\": \"token-bucket,0,10\"}", 2, "", `duplicate field "default" (first on line 1); each field may appear once`, false},
		{"duplicate apis", `{"default": "token-bucket,5,10", "apis": {}, "apis": {}}`, 1, "", `duplicate field "apis" (first on line 1); each field may appear once`, false},
		{"null default", `{"default": null}`, 1, "default", "null is not a rule; " + ruleWant, false},
		{"number default", `{"default": 5}`, 1, "default", "the number 5 is not a rule; " + ruleWant, false},
		{"array of a rule's fields", `{"default": ["token-bucket",5,10]}`, 1, "default[0]", `rule 1 of 3: admit: invalid rule: "token-bucket" has 1 comma-separated fields; want 3: algorithm,limit,window (for example token-bucket,5,10s)`, true},
		{"bad rule text", `{"default": "token-bucket,5,0"}`, 1, "default", `admit: invalid rule: window 0 must be positive; want a positive whole number of seconds ("10") or a duration such as "10s", "1500ms" or "1h30m" (units ns, us, ms, s, m, h)`, true},
		{"null apis", `{"default": "token-bucket,5,10", "apis": null}`, 1, "apis", `null is not an object; want an object from name to rule such as {"/login": "fixed-window,2,10s"}, or no apis field at all`, false},
		{"array users", `{"default": "token-bucket,5,10", "users": ["vip-1"]}`, 1, "users", `an array is not an object; want an object from name to rule such as {"vip-1": "token-bucket,8,10s"}, or no users field at all`, false},
		// Names.
		{"empty api name", `{"default": "token-bucket,5,10", "apis": {"": "token-bucket,1,1"}}`, 1, `apis[""]`, "empty API name; want api.<name>, for example api./login", false},
		{"space in user name", `{"default": "token-bucket,5,10", "users": {"bob smith": "token-bucket,1,1"}}`, 1, `users["bob smith"]`, `user name "bob smith" contains U+0020, which a name may not: a name is printable characters other than space, '=' and U+FFFD`, false},
		{"NUL in name", `{"default": "token-bucket,5,10", "users": {"a\u0000": "token-bucket,1,1"}}`, 1, `users["a\x00"]`, `user name "a\x00" contains U+0000, which a name may not: a name is printable characters other than space, '=' and U+FFFD`, false},
		{"lone surrogate", `{"default": "token-bucket,5,10", "users": {"a\ud800": "token-bucket,1,1"}}`, 1, `users["a�"]`, `user name "a�" contains U+FFFD, which a name may not: a name is printable characters other than space, '=' and U+FFFD`, false},
		{"= in name", `{"default": "token-bucket,5,10", "apis": {"/a=b": "token-bucket,1,1"}}`, 1, `apis["/a=b"]`, `API name "/a=b" contains U+003D, which a name may not: a name is printable characters other than space, '=' and U+FFFD`, false},
		{"duplicate api name", "{\"default\": \"token-bucket,5,10\", \"apis\": {\n\"/login\": \"fixed-window,2,10\",\n\"/login\": \"fixed-window,200,10\"}}", 3, `apis["/login"]`, `duplicate name "/login" (first on line 2); each name may appear once`, false},
		{"duplicate user name by escape", `{"default": "token-bucket,5,10", "users": {"ab": "token-bucket,1,1", "\u0061b": "token-bucket,9,1"}}`, 1, `users["ab"]`, `duplicate name "ab" (first on line 1); each name may appear once`, false},
		{"bad api rule", "{\"default\": \"token-bucket,5,10\",\n \"apis\": {\"/login\": \"fixed-window,2\"}}", 2, `apis["/login"]`, `admit: invalid rule: "fixed-window,2" has 2 comma-separated fields; want 3: algorithm,limit,window (for example token-bucket,5,10s)`, true},
		// The object form.
		{"missing algorithm", `{"default": {"algoConfig": {"capacity": 1}}}`, 1, "default", `missing field "algorithm"; want one of "TokenBucket", "FixedWindow", "SlidingWindowLog", "SlidingWindowCounter"`, false},
		{"missing algoConfig", `{"default": {"algorithm": "SlidingWindowLog"}}`, 1, "default", `missing field "algoConfig"; SlidingWindowLog wants "maxRequests" and "windowMs"`, false},
		{"unknown algorithm", `{"default": {"algorithm": "LeakyBucket", "algoConfig": {}}}`, 1, "default.algorithm", `unknown algorithm "LeakyBucket"; want one of "TokenBucket", "FixedWindow", "SlidingWindowLog", "SlidingWindowCounter"`, false},
		{"algorithm case", `{"default": {"algorithm": "tokenbucket", "algoConfig": {}}}`, 1, "default.algorithm", `unknown algorithm "tokenbucket"; algorithm names are case-sensitive: did you mean "TokenBucket"?`, false},
		{"algorithm text name", `{"default": {"algorithm": "token-bucket", "algoConfig": {}}}`, 1, "default.algorithm", `unknown algorithm "token-bucket"; want one of "TokenBucket", "FixedWindow", "SlidingWindowLog", "SlidingWindowCounter"`, false},
		{"null algorithm", `{"default": {"algorithm": null, "algoConfig": {}}}`, 1, "default.algorithm", `null is not an algorithm; want one of "TokenBucket", "FixedWindow", "SlidingWindowLog", "SlidingWindowCounter"`, false},
		{"unknown rule field", `{"default": {"algorithm": "TokenBucket", "algoConfig": {}, "endpoint": "/x"}}`, 1, "default", `unknown field "endpoint"; a rule object has only "algorithm" and "algoConfig"`, false},
		{"rule field case", `{"default": {"Algorithm": "TokenBucket"}}`, 1, "default", `unknown field "Algorithm"; field names are case-sensitive: did you mean "algorithm"?`, false},
		{"algoconfig case", `{"default": {"algorithm": "TokenBucket", "algoconfig": {}}}`, 1, "default", `unknown field "algoconfig"; field names are case-sensitive: did you mean "algoConfig"?`, false},
		{"duplicate algorithm", `{"default": {"algorithm": "FixedWindow", "algorithm": "TokenBucket"}}`, 1, "default", `duplicate field "algorithm" (first on line 1); each field may appear once`, false},
		{"null algoConfig", `{"default": {"algorithm": "TokenBucket", "algoConfig": null}}`, 1, "default.algoConfig", `null is not an object; want an object of the algorithm's parameters, such as {"maxRequests": 5, "windowMs": 1000}`, false},
		{"unknown param", "{\"default\": {\"algorithm\": \"TokenBucket\",\n\"algoConfig\": {\"capacity\": 10, \"refillRate\": 1}}}", 2, "default.algoConfig", `unknown field "refillRate"; ` + tbWants, false},
		{"param case", tb(`"Capacity": 10, "refillRatePerSecond": 1`), 1, "default.algoConfig", `unknown field "Capacity"; field names are case-sensitive: did you mean "capacity"?`, false},
		{"param of another algorithm", tb(`"maxRequests": 10, "windowMs": 1`), 1, "default.algoConfig", `unknown field "maxRequests"; ` + tbWants, false},
		{"missing param", tb(`"capacity": 10`), 1, "default.algoConfig", `missing field "refillRatePerSecond"; ` + tbWants, false},
		{"duplicate param", tb(`"capacity": 10, "capacity": 0, "refillRatePerSecond": 1`), 1, "default.algoConfig", `duplicate field "capacity" (first on line 1); each field may appear once`, false},
		{"null param", tb(`"capacity": null, "refillRatePerSecond": 1`), 1, "default.algoConfig.capacity", "null is not a number; want a number such as 10", false},
		{"string param", tb(`"capacity": "5", "refillRatePerSecond": 1`), 1, "default.algoConfig.capacity", `the string "5" is not a number; want a number such as 10`, false},
		{"bool param", fw(`"maxRequests": true, "windowMs": 1`), 1, "default.algoConfig.maxRequests", "true is not a number; want a number such as 10", false},
		{"object param", fw(`"maxRequests": {}, "windowMs": 1`), 1, "default.algoConfig.maxRequests", "an object is not a number; want a number such as 10", false},
		{"1e400", tb(`"capacity": 1e400, "refillRatePerSecond": 1`), 1, "default.algoConfig.capacity", "1e400 is not accepted; want a whole number such as 10, written without a fraction or an exponent", false},
		{"fraction", fw(`"maxRequests": 2.5, "windowMs": 1000`), 1, "default.algoConfig.maxRequests", "2.5 is not accepted; want a whole number such as 10, written without a fraction or an exponent", false},
		{"10.0", fw(`"maxRequests": 10.0, "windowMs": 1000`), 1, "default.algoConfig.maxRequests", "10.0 is not accepted; want a whole number such as 10, written without a fraction or an exponent", false},
		{"exponent", fw(`"maxRequests": 1E3, "windowMs": 1000`), 1, "default.algoConfig.maxRequests", "1E3 is not accepted; want a whole number such as 10, written without a fraction or an exponent", false},
		{"negative", fw(`"maxRequests": -1, "windowMs": 1000`), 1, "default.algoConfig.maxRequests", "-1 must be at least 1", false},
		{"negative zero", fw(`"maxRequests": 2, "windowMs": -0`), 1, "default.algoConfig.windowMs", "-0 must be at least 1", false},
		{"zero", fw(`"maxRequests": 0, "windowMs": 1000`), 1, "default.algoConfig.maxRequests", "0 must be at least 1", false},
		{"limit too large", fw(`"maxRequests": 2147483648, "windowMs": 1000`), 1, "default.algoConfig.maxRequests", "2147483648 exceeds the maximum 2147483647", false},
		{"huge integer", fw(`"maxRequests": 2, "windowMs": 99999999999999999999999`), 1, "default.algoConfig.windowMs", "99999999999999999999999 exceeds the maximum 9223372036854", false},
		{"windowMs overflow", fw(`"maxRequests": 2, "windowMs": 9223372036855`), 1, "default.algoConfig.windowMs", "9223372036855 exceeds the maximum 9223372036854", false},
		{"rate zero", tb(`"capacity": 10, "refillRatePerSecond": 0.0`), 1, "default.algoConfig.refillRatePerSecond", "0.0 must be positive (a bucket that never refills is not a rate limit); want a positive decimal number of tokens per second, such as 2 or 0.5, written without an exponent", false},
		{"rate negative", tb(`"capacity": 10, "refillRatePerSecond": -1`), 1, "default.algoConfig.refillRatePerSecond", "-1 must be positive; want a positive decimal number of tokens per second, such as 2 or 0.5, written without an exponent", false},
		{"rate exponent", tb(`"capacity": 10, "refillRatePerSecond": 1e-3`), 1, "default.algoConfig.refillRatePerSecond", "1e-3 is not accepted; want a positive decimal number of tokens per second, such as 2 or 0.5, written without an exponent", false},
		{"rate digits", tb(`"capacity": 10, "refillRatePerSecond": 0.` + strings.Repeat("0", 40) + `1`), 1, "default.algoConfig.refillRatePerSecond", "0.00000000000000000000000000000000000000001 has more than 40 digits; want a positive decimal number of tokens per second, such as 2 or 0.5, written without an exponent", false},
		{"window not whole ns", tb(`"capacity": 10, "refillRatePerSecond": 3`), 1, "default.algoConfig.refillRatePerSecond", "the refill window capacity / refillRatePerSecond = 10 / 3 seconds is not a whole number of nanoseconds; choose a rate that divides capacity × 10^9 exactly, such as 10 (a 1s window) or 5 (2s)", false},
		{"window not whole ns, odd", tb(`"capacity": 7, "refillRatePerSecond": 0.3`), 1, "default.algoConfig.refillRatePerSecond", "the refill window capacity / refillRatePerSecond = 7 / 0.3 seconds is not a whole number of nanoseconds; choose a rate that divides capacity × 10^9 exactly, such as 7 (a 1s window) or 3.5 (2s)", false},
		{"window overflow", tb(`"capacity": 10, "refillRatePerSecond": 0.000000001`), 1, "default.algoConfig.refillRatePerSecond", "the refill window capacity / refillRatePerSecond = 10 / 0.000000001 seconds overflows a time.Duration (about 292 years); raise the rate", false},
		{"rule invalid after conversion", tb(`"capacity": 2147483647, "refillRatePerSecond": 1`), 1, "default", "as token-bucket,2147483647,2147483647s: admit: invalid rule: limit 2147483647 × window 596523h14m7s exceeds 2^62 ns, the bound that keeps every limiter's arithmetic in 64-bit integers; lower the limit or the window", true},
		{"sliding log too large", fw(`"maxRequests": 100000, "windowMs": 1000`)[:0] + `{"default": {"algorithm": "SlidingWindowLog", "algoConfig": {"maxRequests": 100000, "windowMs": 1000}}}`, 1, "default", "as sliding-log,100000,1s: admit: invalid rule: limit 100000 exceeds 65536, the largest sliding-log limit (a sliding log keeps one 8-byte timestamp per admitted request and key); use sliding-counter for larger limits", true},
		{"too fast", fw(`"maxRequests": 2000000, "windowMs": 1`), 1, "default", "as fixed-window,2000000,1ms: admit: invalid rule: window 1ms is shorter than 2000000ns: a limit of 2000000 per 1ms asks for more than one request per nanosecond", true},
		// Composites: the path and the message name the rule at fault.
		{"composite: bad rule text", "{\"default\": \"token-bucket,5,10\",\n \"apis\": {\"/search\": [\"token-bucket,10,1s\",\n \"fixed-window,0,1h\"]}}", 3, `apis["/search"][1]`, "rule 2 of 2: admit: invalid rule: limit 0 must be at least 1 (a rule that admits nothing is not a rate limit)", true},
		{"composite: bad object", `{"default": ["token-bucket,10,1s", {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 0, "windowMs": 1000}}, "sliding-log,5,1s"]}`, 1, "default[1].algoConfig.maxRequests", "rule 2 of 3: 0 must be at least 1", false},
		{"composite: invalid object", `{"default": ["token-bucket,10,1s", {"algorithm": "SlidingWindowLog", "algoConfig": {"maxRequests": 100000, "windowMs": 1000}}]}`, 1, "default[1]", "rule 2 of 2: as sliding-log,100000,1s: admit: invalid rule: limit 100000 exceeds 65536, the largest sliding-log limit (a sliding log keeps one 8-byte timestamp per admitted request and key); use sliding-counter for larger limits", true},
		{"composite: unknown field", `{"default": [{"algorithm": "TokenBucket", "algoConfig": {"capacty": 5}}, "fixed-window,5,1s"]}`, 1, "default[0].algoConfig", `rule 1 of 2: unknown field "capacty"; ` + tbWants, false},
		{"composite: repeated rule", "{\"default\": [\"token-bucket,10,1s\", \"fixed-window,5,1h\",\n{\"algorithm\": \"TokenBucket\", \"algoConfig\": {\"capacity\": 10, \"refillRatePerSecond\": 10}}]}", 2, "default[2]", "rule 3 of 3: admit: invalid rule: token-bucket,10,1s repeats rule 1; each rule of a composite must differ", true},
		{"composite: null element", `{"default": ["token-bucket,10,1s", null]}`, 1, "default[1]", "rule 2 of 2: null is not a rule; " + elementWant, false},
		{"composite: nested array", `{"default": [["token-bucket,10,1s"], "fixed-window,5,1h"]}`, 1, "default[0]", "rule 1 of 2: an array is not a rule; " + elementWant, false},
		{"composite: composite text element", `{"default": ["token-bucket,10,1s + fixed-window,5,1h", "sliding-log,5,1s"]}`, 1, "default[0]", `rule 1 of 2: "token-bucket,10,1s + fixed-window,5,1h" joins 2 rules; ` + elementWant + ": give each its own element", false},
		{"composite: empty", `{"default": "token-bucket,5,10", "users": {"u": []}}`, 1, `users["u"]`, `an empty array is not a rule; want 1 to 8 rules that all apply, such as ["token-bucket,10,1s", "fixed-window,1000,1h"]`, false},
		{"composite: nine rules", `{"default": ["fixed-window,1,1s", "fixed-window,2,1s", "fixed-window,3,1s", "fixed-window,4,1s", "fixed-window,5,1s", "fixed-window,6,1s", "fixed-window,7,1s", "fixed-window,8,1s", "fixed-window,9,1s"]}`, 1, "default", "an array of 9 rules; a composite holds at most 8", false},
		{"composite: one bad rule", `{"default": ["token-bucket,0,1s"]}`, 1, "default[0]", "admit: invalid rule: limit 0 must be at least 1 (a rule that admits nothing is not a rate limit)", true},
		{"composite: bad text form", `{"default": "token-bucket,10,1s + fixed-window,1000"}`, 1, "default", `rule 2 of 2: admit: invalid rule: " fixed-window,1000" has 2 comma-separated fields; want 3: algorithm,limit,window (for example token-bucket,5,10s)`, true},
		{"composite: unterminated", `{"default": ["token-bucket,10,1s", 5`, 1, "default[1]", "the number 5 is not a rule; " + elementWant, false},
		{"error inside apis", "{\"default\": \"token-bucket,5,10\", \"apis\": {\n  \"/login\": {\"algorithm\": \"FixedWindow\", \"algoConfig\": {\"maxRequests\": 2, \"windowMs\": \"10000\"}}}}", 2, `apis["/login"].algoConfig.windowMs`, `the string "10000" is not a number; want a number such as 10`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := policy.ParseJSON(strings.NewReader(tc.in))
			require.Error(t, err)
			assert.Nil(t, b)
			var pe *policy.Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.line, pe.Line, "line")
			assert.Equal(t, tc.path, pe.Path, "path")
			want := tc.msg
			if tc.path != "" {
				want = tc.path + ": " + want
			}
			if tc.line > 0 {
				want = "line " + strconv.Itoa(tc.line) + ": " + want
			}
			assert.Equal(t, want, err.Error())
			assert.Equal(t, tc.rule, errors.Is(err, admit.ErrInvalidRule), "wraps admit.ErrInvalidRule")
			assert.LessOrEqual(t, len(err.Error()), 600, "error messages are bounded")
		})
	}
}

func TestParseJSONBounds(t *testing.T) {
	t.Run("size", func(t *testing.T) {
		in := `{"default": "token-bucket,5,10", "users": {` + strings.Repeat(" ", policy.MaxJSONBytes) + `}}`
		_, err := policy.ParseJSON(strings.NewReader(in))
		assert.EqualError(t, err, "the JSON book is larger than 8388608 bytes, the most a rule book may be")
	})
	t.Run("rules", func(t *testing.T) {
		var sb strings.Builder
		sb.WriteString(`{"default": "token-bucket,5,10", "users": {`)
		for i := range policy.MaxRules + 1 {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`"u` + strconv.Itoa(i) + `": "token-bucket,1,1"`)
		}
		sb.WriteString("}}")
		_, err := policy.ParseJSON(strings.NewReader(sb.String()))
		assert.EqualError(t, err, `line 1: users["u99999"]: too many rules; a book holds at most 100000`)
	})
	t.Run("deep nesting", func(t *testing.T) {
		in := `{"default": ` + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + `}`
		_, err := policy.ParseJSON(strings.NewReader(in))
		assert.EqualError(t, err, "line 1: default[0]: an array is not a rule; "+`an element of the array is one rule: rule text such as "token-bucket,5,10s" or an object such as {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 1000, "windowMs": 3600000}}`)
	})
}

func TestBookJSONRoundTrip(t *testing.T) {
	b := parseJSON(t, seedJSON)
	data, err := json.Marshal(b)
	require.NoError(t, err)
	assert.JSONEq(t, `{"default":"token-bucket,5,10s","apis":{"/login":"fixed-window,2,10s"},"users":{"vip-1":"token-bucket,8,10s"}}`, string(data))
	assert.Equal(t, b, parseJSON(t, string(data)))

	only := parse(t, "default = sliding-log,3,1500ms")
	data, err = json.Marshal(only)
	require.NoError(t, err)
	assert.Equal(t, `{"default":"sliding-log,3,1500ms"}`, string(data))

	composite := parse(t, "default = token-bucket,10,1s + fixed-window,1000,1h\nuser.u = sliding-log,3,1s")
	data, err = json.Marshal(composite)
	require.NoError(t, err)
	assert.Equal(t, `{"default":["token-bucket,10,1s","fixed-window,1000,1h"],"users":{"u":"sliding-log,3,1s"}}`, string(data))
	assert.Equal(t, composite, parseJSON(t, string(data)))

	_, err = json.Marshal(&policy.Book{})
	assert.ErrorIs(t, err, admit.ErrInvalidRule)

	// A Book can be a field of a larger configuration, read just as strictly.
	var cfg struct {
		Listen string       `json:"listen"`
		Rules  *policy.Book `json:"rules"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"listen": ":8080", "rules": `+seedJSON+`}`), &cfg))
	assert.Equal(t, parse(t, seedConfig), cfg.Rules)
	err = json.Unmarshal([]byte(`{"rules": {"default": "token-bucket,5,10", "Users": {}}}`), &cfg)
	assert.EqualError(t, err, `line 1: unknown field "Users"; field names are case-sensitive: did you mean "users"?`)
	var book policy.Book
	assert.Error(t, book.UnmarshalJSON([]byte("null")), "null is not a book")
}

func TestObjectFormWindowIsExact(t *testing.T) {
	// capacity / rate seconds, computed exactly for rates with many digits.
	b := parseJSON(t, `{"default": {"algorithm": "TokenBucket", "algoConfig": {"capacity": 3, "refillRatePerSecond": 0.000000003}}}`)
	assert.Equal(t, admit.Rule{Algorithm: admit.TokenBucket, Limit: 3, Window: 1e9 * time.Second}, b.Default())
}
