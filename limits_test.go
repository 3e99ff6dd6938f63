package admit_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
)

// distinctRules returns n valid rules, no two equal: every algorithm in
// turn, with limits 1, 2, 3, … and windows of that many seconds.
func distinctRules(n int) []admit.Rule {
	algs := []admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingLog, admit.SlidingCounter}
	rules := make([]admit.Rule, n)
	for i := range rules {
		rules[i] = admit.Rule{Algorithm: algs[i%len(algs)], Limit: i + 1, Window: time.Duration(i+1) * time.Second}
	}
	return rules
}

// joinRules is the text form of rules, joined by sep.
func joinRules(rules []admit.Rule, sep string) string {
	texts := make([]string, len(rules))
	for i, r := range rules {
		texts[i] = r.String()
	}
	return strings.Join(texts, sep)
}

func TestNewLimitsAccepts(t *testing.T) {
	for n := 1; n <= admit.MaxLimits; n++ {
		rules := distinctRules(n)
		l, err := admit.NewLimits(rules...)
		require.NoError(t, err, "NewLimits of %d rules", n)
		assert.NoError(t, l.Validate(), "NewLimits of %d rules: Validate", n)
		assert.Equal(t, n, l.Len(), "NewLimits of %d rules: Len", n)
		assert.Equal(t, rules, l.Rules(), "NewLimits of %d rules: Rules, in order", n)
		for i, r := range rules {
			assert.Equal(t, r, l.At(i), "NewLimits of %d rules: At(%d)", n, i)
		}
		assert.Equal(t, joinRules(rules, " + "), l.String(), "NewLimits of %d rules: String", n)
	}
	// A Limits of one rule is that rule: its text is the rule's.
	r := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}
	l, err := admit.NewLimits(r)
	require.NoError(t, err)
	assert.Equal(t, r.String(), l.String())
	assert.Equal(t, r.Limit, l.Limit())
}

func TestNewLimitsRejects(t *testing.T) {
	tb := func(limit int, window time.Duration) admit.Rule {
		return admit.Rule{Algorithm: admit.TokenBucket, Limit: limit, Window: window}
	}
	fw := func(limit int, window time.Duration) admit.Rule {
		return admit.Rule{Algorithm: admit.FixedWindow, Limit: limit, Window: window}
	}
	for _, tc := range []struct {
		name  string
		rules []admit.Rule
		say   []string // substrings of the error
		not   []string // substrings the error must not have
	}{
		{"no rule", nil, []string{"no rule", "want 1 to 8 rules"}, nil},
		{"nine rules", distinctRules(admit.MaxLimits + 1), []string{"9 rules", "want at most 8"}, nil},
		{"duplicate", []admit.Rule{tb(10, time.Second), fw(1000, time.Hour), tb(10, time.Second)},
			[]string{"rule 3", "repeats rule 1", "token-bucket,10,1s", "must differ"}, nil},
		{"adjacent duplicate", []admit.Rule{tb(10, time.Second), tb(10, time.Second)}, []string{"rule 2", "repeats rule 1"}, nil},
		{"invalid second rule", []admit.Rule{tb(10, time.Second), fw(0, time.Hour), tb(3, time.Minute)},
			[]string{"rule 2 of 3: ", "limit 0 must be at least 1"}, nil},
		{"invalid last rule", []admit.Rule{tb(10, time.Second), {Algorithm: admit.SlidingLog, Limit: 70000, Window: time.Hour}},
			[]string{"rule 2 of 2: ", "use sliding-counter"}, nil},
		{"zero rule inside", []admit.Rule{{}, tb(10, time.Second)}, []string{"rule 1 of 2: ", "algorithm is not set"}, nil},
		// One invalid rule alone is that rule's error, with no position.
		{"one invalid rule", []admit.Rule{tb(5, 3)}, []string{"more than one request per nanosecond"}, []string{"rule 1 of 1"}},
		// An invalid rule is reported before a duplicate that follows it.
		{"invalid then duplicate", []admit.Rule{tb(1, time.Second), tb(0, time.Second), tb(1, time.Second)}, []string{"rule 2 of 3: "}, []string{"repeats"}},
	} {
		l, err := admit.NewLimits(tc.rules...)
		if !assert.ErrorIs(t, err, admit.ErrInvalidRule, tc.name) {
			continue
		}
		assert.Equal(t, admit.Limits{}, l, "%s: the zero Limits comes with an error", tc.name)
		for _, s := range tc.say {
			assert.ErrorContains(t, err, s, tc.name)
		}
		for _, s := range tc.not {
			assert.NotContains(t, err.Error(), s, tc.name)
		}
	}
}

func TestParseLimitsAccepts(t *testing.T) {
	tb10 := admit.Rule{Algorithm: admit.TokenBucket, Limit: 10, Window: time.Second}
	fw1000 := admit.Rule{Algorithm: admit.FixedWindow, Limit: 1000, Window: time.Hour}
	sl3 := admit.Rule{Algorithm: admit.SlidingLog, Limit: 3, Window: time.Minute}
	eight := distinctRules(admit.MaxLimits)
	for _, tc := range []struct {
		in   string
		want []admit.Rule
	}{
		{"token-bucket,10,1s + fixed-window,1000,1h", []admit.Rule{tb10, fw1000}},
		{"token-bucket,10,1s+fixed-window,1000,1h", []admit.Rule{tb10, fw1000}},
		{"token-bucket,10,1s\t+\tfixed-window,1000,1h", []admit.Rule{tb10, fw1000}},
		{" \t token-bucket , 10 , 1 \t +  fixed-window,1000,3600s \t", []admit.Rule{tb10, fw1000}},
		{"fixed-window,1000,1h + token-bucket,10,1s", []admit.Rule{fw1000, tb10}}, // order is kept
		{"token-bucket,10,1s + sliding-window,3,1m + fixed-window,1000,60m", []admit.Rule{tb10, sl3, fw1000}},
		{"token-bucket,10,1s", []admit.Rule{tb10}},
		{"  token-bucket,10,1000ms\t", []admit.Rule{tb10}},
		{joinRules(eight, " + "), eight},
		{joinRules(eight, "+"), eight},
		{joinRules(eight, " \t+\t "), eight},
	} {
		got, err := admit.ParseLimits(tc.in)
		if !assert.NoError(t, err, "ParseLimits(%q)", tc.in) {
			continue
		}
		want, err := admit.NewLimits(tc.want...)
		require.NoError(t, err)
		assert.Equal(t, want, got, "ParseLimits(%q)", tc.in)
		assert.Equal(t, tc.want, got.Rules(), "ParseLimits(%q).Rules()", tc.in)
	}
}

func TestParseLimitsRejects(t *testing.T) {
	nine := joinRules(distinctRules(admit.MaxLimits+1), " + ")
	for _, tc := range []struct {
		in  string
		say []string // substrings of the error
		not []string // substrings the error must not have
	}{
		{"", []string{`""`, "want 3: algorithm,limit,window"}, []string{"of 1"}},
		{" \t ", []string{"want 3"}, []string{"of 1"}},
		{"+", []string{"rule 1 of 2: ", `""`}, nil},
		{"token-bucket,10,1s +", []string{"rule 2 of 2: ", "want 3"}, nil},
		{"token-bucket,10,1s + \t", []string{"rule 2 of 2: "}, nil},
		{"+ token-bucket,10,1s", []string{"rule 1 of 2: "}, nil},
		{"token-bucket,10,1s + + fixed-window,1000,1h", []string{"rule 2 of 3: ", "want 3"}, nil},
		{"token-bucket,10,1s ++ fixed-window,1000,1h", []string{"rule 2 of 3: "}, nil},
		{"token-bucket,10,1s + fixed-window,0,1h", []string{"rule 2 of 2: ", "limit 0 must be at least 1"}, nil},
		{"token-bucket,10,1s + fixed-window,1000,1h + token_bucket,1,1s", []string{"rule 3 of 3: ", `"token_bucket"`}, nil},
		{"token-bucket,10,1s, fixed-window,1000,1h", []string{"6 comma-separated fields"}, []string{"of 1"}},
		{"token-bucket,10,1s & fixed-window,1000,1h", []string{"5 comma-separated fields"}, nil},
		// Duplicates are found after parsing: two spellings of one rule.
		{"token-bucket,10,1s + token-bucket,10,1000ms", []string{"rule 2", "repeats rule 1"}, nil},
		{nine, []string{"joins 9 rules", "want at most 8"}, nil},
		{strings.Repeat("+", 8), []string{"joins 9 rules"}, nil},
		{strings.Repeat("+", 7), []string{"rule 1 of 8: "}, nil},
		{"token-bucket,10,1s" + strings.Repeat(" ", 2100) + "+ fixed-window,1000,1h", []string{"bytes", "at most 8 rules"}, nil},
	} {
		l, err := admit.ParseLimits(tc.in)
		if !assert.ErrorIs(t, err, admit.ErrInvalidRule, "ParseLimits(%q)", tc.in) {
			continue
		}
		assert.Equal(t, admit.Limits{}, l, "ParseLimits(%q): the zero Limits comes with an error", tc.in)
		for _, s := range tc.say {
			assert.ErrorContains(t, err, s, "ParseLimits(%q)", tc.in)
		}
		for _, s := range tc.not {
			assert.NotContains(t, err.Error(), s, "ParseLimits(%q)", tc.in)
		}
		assert.LessOrEqual(t, len(err.Error()), maxLimitsErrorLen, "ParseLimits(%q): error length", tc.in)
	}
	// One rule's error is ParseRule's, word for word.
	for _, tc := range rejectedRules {
		if strings.Contains(tc.in, "+") {
			continue
		}
		_, want := admit.ParseRule(tc.in)
		_, got := admit.ParseLimits(tc.in)
		assert.EqualError(t, got, want.Error(), "ParseLimits(%q) of one rule", tc.in)
	}
}

// maxLimitsErrorLen bounds ParseLimits' error for any input: a rule's error
// (maxErrorLen) after "rule i of n: ".
const maxLimitsErrorLen = maxErrorLen + len("rule 8 of 8: ")

// TestParseLimitsLengthBound: ParseLimits refuses a text longer than eight
// rules of ParseRule's longest text and their " + " separators before it
// parses any of it. The longest text it accepts is shorter: eight rules of
// the longest text joined by a bare "+", since the spaces around a "+"
// belong to the rules' texts.
func TestParseLimitsLengthBound(t *testing.T) {
	const maxRuleText, maxText = 256, admit.MaxLimits*(256+len(" + ")) - len(" + ")
	rules := distinctRules(admit.MaxLimits)
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = r.String() + strings.Repeat(" ", maxRuleText-len(r.String()))
	}
	text := strings.Join(parts, "+")
	got, err := admit.ParseLimits(text)
	require.NoError(t, err, "ParseLimits of %d bytes", len(text))
	assert.Equal(t, rules, got.Rules())
	_, err = admit.ParseLimits(strings.Join(parts, "+ "))
	assert.ErrorContains(t, err, "rule 2 of 8: ", "a rule's text with the space before it is one byte too long")
	assert.ErrorContains(t, err, "257 bytes")

	long := text + strings.Repeat(" ", maxText+1-len(text))
	_, err = admit.ParseLimits(long)
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	assert.ErrorContains(t, err, fmt.Sprintf("limits text is %d bytes", maxText+1))
	_, err = admit.ParseLimits(long[:maxText])
	assert.NotContains(t, err.Error(), "limits text", "%d bytes are read", maxText)
}

// drawRule draws a valid rule of any algorithm, from the small to the
// largest each algorithm accepts.
func drawRule(t *rapid.T, label string) admit.Rule {
	alg := rapid.SampledFrom([]admit.Algorithm{admit.TokenBucket, admit.FixedWindow, admit.SlidingLog, admit.SlidingCounter}).Draw(t, label+"-algorithm")
	maxLimit := admit.MaxLimit
	if alg == admit.SlidingLog {
		maxLimit = admit.MaxSlidingLogLimit
	}
	limit := rapid.OneOf(rapid.IntRange(1, 20), rapid.IntRange(1, maxLimit), rapid.Just(maxLimit)).Draw(t, label+"-limit")
	maxWindow := int64(admit.MaxLimitTimesWindow) / int64(limit)
	window := rapid.OneOf(
		rapid.Int64Range(int64(limit), min(maxWindow, int64(limit)+1000)),
		rapid.Int64Range(int64(limit), maxWindow),
		rapid.SampledFrom([]int64{int64(time.Second), int64(10 * time.Second), int64(time.Minute), int64(time.Hour), int64(1500 * time.Millisecond)}),
	).Draw(t, label+"-window")
	r := admit.Rule{Algorithm: alg, Limit: limit, Window: time.Duration(max(int64(limit), min(window, maxWindow)))}
	if err := r.Validate(); err != nil {
		t.Fatalf("drawRule made an invalid rule %v: %v", r, err)
	}
	return r
}

// drawLimits draws valid Limits of 1 to MaxLimits distinct rules.
func drawLimits(t *rapid.T) admit.Limits {
	n := rapid.IntRange(1, admit.MaxLimits).Draw(t, "rules")
	var rules []admit.Rule
	for i := range n {
		r := drawRule(t, fmt.Sprintf("rule%d", i))
		dup := false
		for _, q := range rules {
			dup = dup || q == r
		}
		if !dup {
			rules = append(rules, r)
		}
	}
	l, err := admit.NewLimits(rules...)
	if err != nil {
		t.Fatalf("NewLimits(%v): %v", rules, err)
	}
	return l
}

// TestLimitsRoundTrip: for every valid Limits, ParseLimits(l.String()) == l,
// and the text is the rules' canonical texts joined by " + ".
func TestLimitsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := drawLimits(t)
		text := l.String()
		if want := joinRules(l.Rules(), " + "); text != want {
			t.Fatalf("String() = %q, want %q", text, want)
		}
		got, err := admit.ParseLimits(text)
		if err != nil {
			t.Fatalf("ParseLimits(%q): %v", text, err)
		}
		if got != l {
			t.Fatalf("ParseLimits(%q) = %v, want %v", text, got.Rules(), l.Rules())
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("Limits %q do not validate: %v", text, err)
		}
	})
}

// FuzzParseLimits checks ParseLimits on any text. Its invariants:
//
//   - it never panics;
//   - an error wraps ErrInvalidRule, comes with the zero Limits and is at most
//     maxLimitsErrorLen bytes, whatever the input's length;
//   - accepted Limits are valid, hold 1 to MaxLimits rules, each the rule
//     ParseRule reads from its part of the text; their String parses back to
//     them and is stable (canonical text is a fixed point).
//
// Run it with: go test -run '^$' -fuzz FuzzParseLimits -fuzztime 3m .
func FuzzParseLimits(f *testing.F) {
	for _, in := range []string{
		"token-bucket,10,1s + fixed-window,1000,1h",
		"token-bucket,10,1s+fixed-window,1000,1h",
		"token-bucket,10,1s\t+\tfixed-window,1000,1h",
		"token-bucket,10,1s + + fixed-window,1000,1h",
		"token-bucket,10,1s +",
		"+",
		"",
		"token-bucket,10,1s + token-bucket,10,1000ms",
		"sliding-window,3,1m + sliding-counter,100,1h30m + fixed-window,2,1500ms",
		joinRules(distinctRules(admit.MaxLimits), " + "),
		joinRules(distinctRules(admit.MaxLimits+1), " + "),
		strings.Repeat("+", 9),
		strings.Repeat("token-bucket,5,10 + ", 8),
		"token-bucket,10,1s" + strings.Repeat(" ", 2100) + "+ fixed-window,1000,1h",
		"token-bucket,5,1" + strings.Repeat("\x00", 240) + " + fixed-window,5,1",
	} {
		f.Add(in)
	}
	for _, tc := range acceptedRules {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, text string) {
		l, err := admit.ParseLimits(text)
		if err != nil {
			if !errors.Is(err, admit.ErrInvalidRule) {
				t.Fatalf("ParseLimits(%q) error %q does not wrap ErrInvalidRule", text, err)
			}
			if n := len(err.Error()); n > maxLimitsErrorLen {
				t.Fatalf("ParseLimits(%q) error is %d bytes, more than %d: %q", text, n, maxLimitsErrorLen, err)
			}
			if l != (admit.Limits{}) {
				t.Fatalf("ParseLimits(%q) = %v with error %v, want the zero Limits", text, l.Rules(), err)
			}
			return
		}
		if verr := l.Validate(); verr != nil {
			t.Fatalf("ParseLimits(%q) = %v, which does not validate: %v", text, l.Rules(), verr)
		}
		parts := strings.Split(text, "+")
		if l.Len() != len(parts) || l.Len() < 1 || l.Len() > admit.MaxLimits {
			t.Fatalf("ParseLimits(%q) holds %d rules from %d parts", text, l.Len(), len(parts))
		}
		for i, p := range parts {
			if r, err := admit.ParseRule(p); err != nil || r != l.At(i) {
				t.Fatalf("ParseLimits(%q).At(%d) = %v, but ParseRule(%q) = %v, %v", text, i, l.At(i), p, r, err)
			}
		}
		canon := l.String()
		again, err := admit.ParseLimits(canon)
		if err != nil {
			t.Fatalf("ParseLimits(%q) = %v, but ParseLimits(its String %q) fails: %v", text, l.Rules(), canon, err)
		}
		if again != l {
			t.Fatalf("ParseLimits(%q) = %v, but ParseLimits(%q) = %v", text, l.Rules(), canon, again.Rules())
		}
		if s := again.String(); s != canon {
			t.Fatalf("String is not stable: ParseLimits(%q).String() = %q, then %q", text, canon, s)
		}
	})
}

// TestLimitsLimit: Limit is the smallest Limit of the rules, the largest n
// a composite can ever admit, wherever that rule stands.
func TestLimitsLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"token-bucket,10,1s", 10},
		{"token-bucket,10,1s + fixed-window,1000,1h", 10},
		{"fixed-window,1000,1h + token-bucket,10,1s", 10},
		{"fixed-window,1000,1h + sliding-log,3,1m + token-bucket,10,1s", 3},
		{"fixed-window,7,1h + sliding-log,7,1m", 7},
	} {
		l, err := admit.ParseLimits(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, l.Limit(), "ParseLimits(%q).Limit()", tc.in)
	}
	rapid.Check(t, func(t *rapid.T) {
		l := drawLimits(t)
		least := l.At(0).Limit
		for _, r := range l.Rules() {
			least = min(least, r.Limit)
		}
		if l.Limit() != least {
			t.Fatalf("%v: Limit() = %d, want the smallest, %d", l, l.Limit(), least)
		}
	})
	assert.Zero(t, admit.Limits{}.Limit(), "the zero Limits")
}

// TestLimitsAt: At panics for an index out of range, as indexing a slice
// does, and only then.
func TestLimitsAt(t *testing.T) {
	rules := distinctRules(3)
	l, err := admit.NewLimits(rules...)
	require.NoError(t, err)
	for i, r := range rules {
		assert.NotPanics(t, func() { assert.Equal(t, r, l.At(i)) }, "At(%d)", i)
	}
	for _, i := range []int{-1, 3, 4, admit.MaxLimits, admit.MaxLimits + 1, math.MinInt} {
		assert.Panics(t, func() { l.At(i) }, "At(%d) of 3 rules", i)
	}
	assert.Panics(t, func() { admit.Limits{}.At(0) }, "At(0) of the zero Limits")
}

// TestLimitsRulesIsACopy: Rules returns a slice of the caller's own.
func TestLimitsRulesIsACopy(t *testing.T) {
	l, err := admit.NewLimits(distinctRules(2)...)
	require.NoError(t, err)
	rs := l.Rules()
	rs[0].Limit = 99
	assert.Equal(t, 1, l.At(0).Limit)
	assert.Empty(t, admit.Limits{}.Rules())
}

// TestLimitsZero: the zero Limits hold no rule and do not validate.
func TestLimitsZero(t *testing.T) {
	var l admit.Limits
	err := l.Validate()
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
	assert.ErrorContains(t, err, "NewLimits or ParseLimits")
	assert.Zero(t, l.Len())
	assert.Empty(t, l.String())
	_, err = admit.ParseLimits(l.String())
	assert.ErrorIs(t, err, admit.ErrInvalidRule, "the zero Limits' text does not parse")
}

// TestLimitsComparable: Limits are plain values: equal rules in the same
// order are equal Limits, however they were built, and key a map.
func TestLimitsComparable(t *testing.T) {
	parse := func(text string) admit.Limits {
		l, err := admit.ParseLimits(text)
		require.NoError(t, err, text)
		return l
	}
	a := parse("token-bucket,10,1s + fixed-window,1000,1h")
	b, err := admit.NewLimits(
		admit.Rule{Algorithm: admit.TokenBucket, Limit: 10, Window: time.Second},
		admit.Rule{Algorithm: admit.FixedWindow, Limit: 1000, Window: time.Hour},
	)
	require.NoError(t, err)
	assert.True(t, a == b, "the same rules, parsed and built")
	swapped := parse("fixed-window,1000,1h + token-bucket,10,1s")
	assert.False(t, a == swapped, "the order of the rules is part of the value: it names the binding rule")
	one := parse("token-bucket,10,1s")
	byKey := map[admit.Limits]string{a: "a", swapped: "swapped", one: "one", {}: "zero"}
	assert.Len(t, byKey, 4)
	assert.Equal(t, "a", byKey[b])
	assert.Equal(t, "one", byKey[parse("token-bucket , 10 , 1000ms")])
	assert.Equal(t, "zero", byKey[admit.Limits{}])
}
