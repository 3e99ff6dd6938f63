package policy_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/policy"
)

// seedConfig is the demo configuration of the design notes.
const seedConfig = `# the design notes' demo config
default    = token-bucket,5,10
api./login = fixed-window,2,10
user.vip-1 = token-bucket,8,10
`

func rule(t testing.TB, text string) admit.Rule {
	t.Helper()
	r, err := admit.ParseRule(text)
	require.NoError(t, err)
	return r
}

func limits(t testing.TB, text string) admit.Limits {
	t.Helper()
	l, err := admit.ParseLimits(text)
	require.NoError(t, err)
	return l
}

// entry is the Entry a Book returns for the limits text: Limits set, and
// Rule too for one rule.
func entry(t testing.TB, s policy.Scope, name, text string) policy.Entry {
	t.Helper()
	e := policy.Entry{Scope: s, Name: name, Limits: limits(t, text)}
	if e.Limits.Len() == 1 {
		e.Rule = e.Limits.At(0)
	}
	return e
}

func parse(t testing.TB, text string) *policy.Book {
	t.Helper()
	b, err := policy.Parse(strings.NewReader(text))
	require.NoError(t, err)
	return b
}

func TestParseSeed(t *testing.T) {
	b := parse(t, seedConfig)
	def := entry(t, policy.Default, "", "token-bucket,5,10s")
	login := entry(t, policy.API, "/login", "fixed-window,2,10s")
	vip := entry(t, policy.User, "vip-1", "token-bucket,8,10s")
	assert.Equal(t, def.Rule, b.Default())
	assert.Equal(t, def.Limits, b.DefaultLimits())
	assert.Equal(t, 3, b.Len())
	assert.Equal(t, []policy.Entry{def, login, vip}, b.Rules())
	assert.Equal(t, "default = token-bucket,5,10s\napi./login = fixed-window,2,10s\nuser.vip-1 = token-bucket,8,10s\n", b.String())

	// The most specific rule wins: user rule, then API rule, then default.
	for _, tc := range []struct {
		user, api string
		want      policy.Entry
	}{
		{"alice", "/orders", def},
		{"alice", "/login", login},
		{"vip-1", "/orders", vip},
		{"vip-1", "/login", vip},
		{"VIP-1", "/login", login}, // names are case-sensitive
		{"", "", def},
	} {
		assert.Equal(t, tc.want, b.EntryFor(tc.user, tc.api), "EntryFor(%q, %q)", tc.user, tc.api)
		assert.Equal(t, tc.want.Rule, b.RuleFor(tc.user, tc.api), "RuleFor(%q, %q)", tc.user, tc.api)
		assert.Equal(t, tc.want.Limits, b.LimitsFor(tc.user, tc.api), "LimitsFor(%q, %q)", tc.user, tc.api)
	}
}

// TestParseComposites: a value of two or more rules joined by "+" is a
// composite, wherever a rule is accepted. RuleFor and Default give the zero
// Rule for a composite; LimitsFor, DefaultLimits and EntryFor give its
// Limits; a composite of one rule is that rule.
func TestParseComposites(t *testing.T) {
	b := parse(t, `
default     = token-bucket,10,1s+fixed-window,1000,1h
api./search = sliding-counter,100,1m + token-bucket,5,1s
api./one    = token-bucket,3,1s
user.vip-1  =	token-bucket,50,1s	+	fixed-window,10000,1h	+ sliding-log,2000,10m
`)
	def := entry(t, policy.Default, "", "token-bucket,10,1s + fixed-window,1000,1h")
	search := entry(t, policy.API, "/search", "sliding-counter,100,1m + token-bucket,5,1s")
	one := entry(t, policy.API, "/one", "token-bucket,3,1s")
	vip := entry(t, policy.User, "vip-1", "token-bucket,50,1s + fixed-window,10000,1h + sliding-log,2000,10m")
	assert.Equal(t, []policy.Entry{def, one, search, vip}, b.Rules())
	assert.Equal(t, 2, def.Limits.Len())
	assert.Equal(t, admit.Rule{}, def.Rule, "a composite entry has the zero Rule")
	assert.Equal(t, admit.Rule{}, b.Default(), "Default of a composite")
	assert.Equal(t, def.Limits, b.DefaultLimits())
	for _, tc := range []struct {
		user, api string
		want      policy.Entry
	}{
		{"alice", "/orders", def},
		{"alice", "/search", search},
		{"alice", "/one", one},
		{"vip-1", "/one", vip},
	} {
		assert.Equal(t, tc.want, b.EntryFor(tc.user, tc.api), "EntryFor(%q, %q)", tc.user, tc.api)
		assert.Equal(t, tc.want.Limits, b.LimitsFor(tc.user, tc.api), "LimitsFor(%q, %q)", tc.user, tc.api)
		assert.Equal(t, tc.want.Rule, b.RuleFor(tc.user, tc.api), "RuleFor(%q, %q)", tc.user, tc.api)
	}
	assert.Equal(t, rule(t, "token-bucket,3,1s"), b.RuleFor("alice", "/one"), "RuleFor of a one-rule entry")
	assert.Equal(t, `default = token-bucket,10,1s + fixed-window,1000,1h
api./one = token-bucket,3,1s
api./search = sliding-counter,100,1m + token-bucket,5,1s
user.vip-1 = token-bucket,50,1s + fixed-window,10000,1h + sliding-log,2000,10m
`, b.String())
	assert.Equal(t, "api./search = sliding-counter,100,1m + token-bucket,5,1s", search.String())
	assert.Equal(t, b, parse(t, b.String()), "the canonical form parses back to the same book")

	// The order of a composite's rules is kept: it is the order of
	// AllowNWhich's indices.
	swapped := parse(t, "default = fixed-window,1000,1h + token-bucket,10,1s")
	assert.NotEqual(t, b.DefaultLimits(), swapped.DefaultLimits())
	assert.Equal(t, "default = fixed-window,1000,1h + token-bucket,10,1s\n", swapped.String())

	// Eight rules, the most a composite holds.
	var eight []string
	for i := range admit.MaxLimits {
		eight = append(eight, "fixed-window,"+strconv.Itoa(i+1)+",1h")
	}
	b = parse(t, "default = "+strings.Join(eight, "+"))
	assert.Equal(t, admit.MaxLimits, b.DefaultLimits().Len())
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string // want: the canonical String of the book
	}{
		{"crlf", "default = token-bucket,5,10\r\napi./a = fixed-window,1,1s\r\n", "default = token-bucket,5,10s\napi./a = fixed-window,1,1s\n"},
		{"no final newline", "default=sliding-log,3,1500ms", "default = sliding-log,3,1500ms\n"},
		{"tabs and indented comment", "\t# c\n\tdefault\t=\tsliding-counter,7,1h\t\n\n", "default = sliding-counter,7,1h\n"},
		{"sliding-window alias", "default = sliding-window,3,10", "default = sliding-log,3,10s\n"},
		{"dots in names", "default = token-bucket,1,1\napi.v1.orders = token-bucket,2,1\nuser.a.b@c = token-bucket,3,1", "default = token-bucket,1,1s\napi.v1.orders = token-bucket,2,1s\nuser.a.b@c = token-bucket,3,1s\n"},
		{"unicode names", "default = token-bucket,1,1\nuser.zoë = token-bucket,2,1", "default = token-bucket,1,1s\nuser.zoë = token-bucket,2,1s\n"},
		{"order does not matter", "user.u = token-bucket,2,1\ndefault = token-bucket,1,1\napi.b = token-bucket,1,1\napi.a = token-bucket,1,1", "default = token-bucket,1,1s\napi.a = token-bucket,1,1s\napi.b = token-bucket,1,1s\nuser.u = token-bucket,2,1s\n"},
		{"same name as user and api", "default = token-bucket,1,1\napi.x = token-bucket,2,1\nuser.x = token-bucket,3,1", "default = token-bucket,1,1s\napi.x = token-bucket,2,1s\nuser.x = token-bucket,3,1s\n"},
		{"longest line", "default = token-bucket,1,1\napi./" + strings.Repeat("a", policy.MaxNameBytes-1) + " = token-bucket,1,1", "default = token-bucket,1,1s\napi./" + strings.Repeat("a", policy.MaxNameBytes-1) + " = token-bucket,1,1s\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := parse(t, tc.in)
			assert.Equal(t, tc.want, b.String())
			assert.Equal(t, b, parse(t, b.String()), "the canonical form parses back to the same book")
		})
	}
}

// TestParseErrors pins every error of the properties format: its line and its
// whole message.
func TestParseErrors(t *testing.T) {
	const def = "default = token-bucket,5,10\n"
	for _, tc := range []struct {
		name string
		in   string
		line int
		msg  string
		rule bool // the error wraps admit.ErrInvalidRule
	}{
		{"empty file", "", 0, "no default rule; add one for the requests that match no user or API rule, such as `default = token-bucket,5,10s` (or \"default\": \"token-bucket,5,10s\" in JSON)", false},
		{"only comments", "# nothing\n\n", 0, "no default rule; add one for the requests that match no user or API rule, such as `default = token-bucket,5,10s` (or \"default\": \"token-bucket,5,10s\" in JSON)", false},
		{"missing default", "api./login = fixed-window,2,10\n", 0, "no default rule; add one for the requests that match no user or API rule, such as `default = token-bucket,5,10s` (or \"default\": \"token-bucket,5,10s\" in JSON)", false},
		{"missing =", def + "api./login fixed-window,2,10\n", 2, `"api./login fixed-window,2,10" has no '='; want name = rule, such as default = token-bucket,5,10s (or # at the start of a comment)`, false},
		{"colon separator", def + "user.bob: token-bucket,1,1\n", 2, `"user.bob: token-bucket,1,1" has no '='; want name = rule, such as default = token-bucket,5,10s (or # at the start of a comment)`, false},
		{"java ! comment", "! comment\n" + def, 1, `"! comment" has no '='; want name = rule, such as default = token-bucket,5,10s (or # at the start of a comment)`, false},
		{"no name", def + " = token-bucket,1,1\n", 2, "no name before '='; want default, api.<api> or user.<user>", false},
		{"unknown prefix", def + "endpoint./login = fixed-window,2,10\n", 2, `unknown name "endpoint./login"; want default, api.<api> (such as api./login) or user.<user> (such as user.vip-1)`, false},
		{"defaults", "defaults = token-bucket,1,1\n", 1, `unknown name "defaults"; want default, api.<api> (such as api./login) or user.<user> (such as user.vip-1)`, false},
		{"upper-case prefix", def + "API./login = fixed-window,2,10\n", 2, `unknown name "API./login"; names are case-sensitive: want default, api.<api> or user.<user> in lower case`, false},
		{"upper-case default", "Default = token-bucket,1,1\n", 1, `unknown name "Default"; names are case-sensitive: want default, api.<api> or user.<user> in lower case`, false},
		{"prefix without dot", def + "api = fixed-window,2,10\n", 2, "api has no name; want api.<name>, such as api./login or user.vip-1", false},
		{"empty api name", def + "api. = fixed-window,2,10\n", 2, "empty API name; want api.<name>, for example api./login", false},
		{"empty user name", def + "user.= token-bucket,1,1\n", 2, "empty user name; want user.<name>, for example user.vip-1", false},
		{"space in name", def + "user.bob smith = token-bucket,1,1\n", 2, `user name "bob smith" contains U+0020, which a name may not: a name is printable characters other than space, '=' and U+FFFD`, false},
		{"control in name", def + "api./a\x01b = token-bucket,1,1\n", 2, `API name "/a\x01b" contains U+0001, which a name may not: a name is printable characters other than space, '=' and U+FFFD`, false},
		{"zero-width in name", def + "user.bo\u200bb = token-bucket,1,1\n", 2, `user name "bo\u200bb" contains U+200B, which a name may not: a name is printable characters other than space, '=' and U+FFFD`, false},
		{"name too long", def + "user." + strings.Repeat("n", policy.MaxNameBytes+1) + " = token-bucket,1,1\n", 2, "user name is 1025 bytes; a name is at most 1024 bytes", false},
		{"no rule", def + "api./login =\n", 2, "api./login has no rule after '='; want algorithm,limit,window, such as api./login = token-bucket,5,10s", false},
		{"trailing comment", def + "api./login = fixed-window,2,10 # strict\n", 2, `api./login: the rule "fixed-window,2,10 # strict" contains '#'; a comment must be on a line of its own`, false},
		{"bad algorithm", def + "api./login = leaky-bucket,2,10\n", 2, `api./login: admit: invalid rule: algorithm "leaky-bucket" is unknown; want one of "token-bucket", "fixed-window", "sliding-log" (or "sliding-window"), "sliding-counter"`, true},
		{"zero limit", "default = token-bucket,0,10\n", 1, "default: admit: invalid rule: limit 0 must be at least 1 (a rule that admits nothing is not a rate limit)", true},
		{"missing field", def + "\n\nuser.vip-1 = token-bucket,8\n", 4, `user.vip-1: admit: invalid rule: "token-bucket,8" has 2 comma-separated fields; want 3: algorithm,limit,window (for example token-bucket,5,10s)`, true},
		{"NaN window", def + "user.vip-1 = token-bucket,8,NaN\n", 2, `user.vip-1: admit: invalid rule: window "NaN" is not a duration; want a positive whole number of seconds ("10") or a duration such as "10s", "1500ms" or "1h30m" (units ns, us, ms, s, m, h)`, true},
		{"duplicate default", def + "# again\ndefault = token-bucket,6,10\n", 3, `"default" is defined twice (first at line 1); each name may appear once`, false},
		{"duplicate api", def + "api./login = fixed-window,2,10\napi./login = fixed-window,3,10\n", 3, `"api./login" is defined twice (first at line 2); each name may appear once`, false},
		{"duplicate user, same rule", def + "user.u = token-bucket,1,1\nuser.u = token-bucket,1,1\n", 3, `"user.u" is defined twice (first at line 2); each name may appear once`, false},
		{"bad utf-8", def + "user.\xff = token-bucket,1,1\n", 2, "not valid UTF-8; save the file as UTF-8", false},
		{"byte order mark", "\uFEFF" + def, 1, "the file starts with a byte order mark (U+FEFF); save it as UTF-8 without one", false},
		{"NUL byte", def + "\x00\n", 2, `"\x00" has no '='; want name = rule, such as default = token-bucket,5,10s (or # at the start of a comment)`, false},
		{"line too long", def + "# " + strings.Repeat("x", policy.MaxLineBytes) + "\n", 2, "line too long; a line is at most 4096 bytes", false},
		{"line one byte too long", def + strings.Repeat("#", policy.MaxLineBytes+1) + "\n", 2, "line too long (4097 bytes); a line is at most 4096 bytes", false},
		{"too many lines", def + strings.Repeat("\n", policy.MaxLines), policy.MaxLines + 1, "too many lines; a rule file has at most 100000 lines, comments and blank lines included", false},
		// Composites: the error names the rule at fault.
		{"bad rule of a composite", def + "\napi./search = token-bucket,10,1s + fixed-windw,1000,1h\n", 3, `api./search: rule 2 of 2: admit: invalid rule: algorithm "fixed-windw" is unknown; want one of "token-bucket", "fixed-window", "sliding-log" (or "sliding-window"), "sliding-counter"`, true},
		{"invalid rule of a composite", "default = token-bucket,10,1s + fixed-window,0,1h + sliding-log,5,1s\n", 1, "default: rule 2 of 3: admit: invalid rule: limit 0 must be at least 1 (a rule that admits nothing is not a rate limit)", true},
		{"empty rule of a composite", def + "user.u = token-bucket,10,1s +\n", 2, `user.u: rule 2 of 2: admit: invalid rule: "" has 1 comma-separated fields; want 3: algorithm,limit,window (for example token-bucket,5,10s)`, true},
		{"repeated rule", def + "user.u = token-bucket,10,1s + fixed-window,5,1h + token-bucket,10,1\n", 2, "user.u: admit: invalid rule: rule 3, token-bucket,10,1s, repeats rule 1; each rule of a composite must differ", true},
		{"nine rules", def + "api.x = " + strings.TrimSuffix(strings.Repeat("token-bucket,1,1+", 9), "+") + "\n", 2, `api.x: admit: invalid rule: "token-bucket,1,1+token-bucket,1,1+token-bucket,1"… joins 9 rules; want at most 8`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := policy.Parse(strings.NewReader(tc.in))
			require.Error(t, err)
			assert.Nil(t, b)
			var pe *policy.Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.line, pe.Line, "line")
			assert.Empty(t, pe.Path)
			assert.Empty(t, pe.File)
			want := tc.msg
			if tc.line > 0 {
				want = "line " + strconv.Itoa(tc.line) + ": " + tc.msg
			}
			assert.Equal(t, want, err.Error())
			assert.Equal(t, tc.rule, errors.Is(err, admit.ErrInvalidRule), "wraps admit.ErrInvalidRule")
			assert.LessOrEqual(t, len(err.Error()), 600, "error messages are bounded")
		})
	}
}

func TestParseLongLinesAreBounded(t *testing.T) {
	// A 10 MB line is rejected after reading at most a line's worth of it.
	r := &countingReader{r: strings.NewReader("default = token-bucket,1,1\n# " + strings.Repeat("x", 10<<20))}
	_, err := policy.Parse(r)
	require.Error(t, err)
	assert.Equal(t, "line 2: line too long; a line is at most 4096 bytes", err.Error())
	assert.Less(t, r.n, 64<<10, "Parse read %d bytes of a hostile line", r.n)
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := policy.Parse(iotest.ErrReader(boom))
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, "policy: reading rules after line 0: boom", err.Error())
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	props := write("rules.conf", seedConfig)
	js := write("rules.JSON", `{"default": "token-bucket,5,10", "apis": {"/login": "fixed-window,2,10"}, "users": {"vip-1": "token-bucket,8,10"}}`)
	b1, err := policy.Load(props)
	require.NoError(t, err)
	b2, err := policy.Load(js)
	require.NoError(t, err)
	assert.Equal(t, b1, b2, "the two formats of the seed config give the same book")

	// A .json file is never read as properties, and the reverse.
	badJSON := write("bad.json", seedConfig)
	_, err = policy.Load(badJSON)
	var pe *policy.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, badJSON, pe.File)
	assert.Equal(t, badJSON+": line 1: invalid JSON: invalid character '#' where a value was expected; want a string in double quotes, a number, an object, an array, true, false or null", err.Error())

	badProps := write("rules.properties", "default = token-bucket,5,10\napi./login = fixed-window,0,10\n")
	_, err = policy.Load(badProps)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Line)
	assert.Equal(t, badProps+": line 2: api./login: admit: invalid rule: limit 0 must be at least 1 (a rule that admits nothing is not a rate limit)", err.Error())
	assert.ErrorIs(t, err, admit.ErrInvalidRule)

	// An error opening the file is wrapped, not an *Error: errors.Is sees
	// through it.
	missing := filepath.Join(dir, "missing.conf")
	_, err = policy.Load(missing)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.False(t, errors.As(err, &pe), "an open error is not a *policy.Error")
	assert.True(t, strings.HasPrefix(err.Error(), "policy: open "+missing+": "), "%q", err)
}
