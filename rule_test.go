package admit_test

import (
	"errors"
	"math"
	"math/bits"
	"math/rand"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/admit-go/admit"
)

// invalidRulePrefix is ErrInvalidRule's text; every rule error starts with it,
// followed by the detail, which names the field at fault.
const invalidRulePrefix = "admit: invalid rule: "

// maxPlainErrorLen bounds the error for every input in the tables below (plain
// ASCII or a few non-ASCII runes). maxErrorLen bounds it for any input at all:
// a message quotes at most two excerpts of 48 input bytes, which strconv.Quote
// may expand fourfold (\x00), next to at most ~200 bytes of fixed text.
const (
	maxPlainErrorLen = 300
	maxErrorLen      = 640
)

// acceptedRules are texts ParseRule accepts, with the exact rule each one means.
var acceptedRules = []struct {
	in   string
	want admit.Rule
}{
	{"token-bucket,5,10", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}}, // bare number = seconds
	{"token-bucket,5,10s", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}},
	{"fixed-window,2,1500ms", admit.Rule{Algorithm: admit.FixedWindow, Limit: 2, Window: 1500 * time.Millisecond}},
	{"sliding-log,3,1m", admit.Rule{Algorithm: admit.SlidingLog, Limit: 3, Window: time.Minute}},
	{"sliding-window,3,1m", admit.Rule{Algorithm: admit.SlidingLog, Limit: 3, Window: time.Minute}}, // alias
	{"sliding-counter,100,1h30m", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 100, Window: 90 * time.Minute}},
	{" token-bucket , 5 , 10 ", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}},
	{"\ttoken-bucket\t,\t5\t,\t10s\t", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}},
	{" \t fixed-window \t, 2,1500ms  ", admit.Rule{Algorithm: admit.FixedWindow, Limit: 2, Window: 1500 * time.Millisecond}},
	{"token-bucket,5,2.5s", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 2500 * time.Millisecond}},
	{"token-bucket,5,1.5us", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 1500 * time.Nanosecond}},
	{"token-bucket,5,250µs", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 250 * time.Microsecond}}, // U+00B5 micro sign
	{"token-bucket,5,250μs", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 250 * time.Microsecond}}, // U+03BC Greek mu
	{"token-bucket,5,7ns", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 7 * time.Nanosecond}},
	{"token-bucket,5,5ns", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 5 * time.Nanosecond}}, // exactly one per ns
	{"token-bucket,5,1.000s", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second}},
	{"token-bucket,5,0.5s", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 500 * time.Millisecond}},
	{"token-bucket,5,1.0000000001h", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Hour + 360*time.Nanosecond}},
	// Go's duration syntax allows repeated units: 1h1h is 2h, as time.ParseDuration says.
	{"token-bucket,5,1h1h", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 2 * time.Hour}},
	{"token-bucket,5,1s1ms1us1ns", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second + time.Millisecond + time.Microsecond + time.Nanosecond}},
	// A window is read in base 10: 010 is ten seconds, never octal eight. (Unlike a
	// limit, a window may have a leading zero, as Go's duration syntax allows.)
	{"token-bucket,5,010", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}},
	{"token-bucket,5,010s", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}},
	// The bounds themselves are accepted.
	{"token-bucket,2147483647,2147483647ns", admit.Rule{Algorithm: admit.TokenBucket, Limit: admit.MaxLimit, Window: admit.MaxLimit}},
	{"sliding-log,65536,1m", admit.Rule{Algorithm: admit.SlidingLog, Limit: admit.MaxSlidingLogLimit, Window: time.Minute}},
	{"sliding-counter,65537,1m", admit.Rule{Algorithm: admit.SlidingCounter, Limit: admit.MaxSlidingLogLimit + 1, Window: time.Minute}},
	{"token-bucket,1,4611686018427387904ns", admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: admit.MaxLimitTimesWindow}},
	{"token-bucket,1,4611686018", admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: 4611686018 * time.Second}},
	{"token-bucket,1000000,1h", admit.Rule{Algorithm: admit.TokenBucket, Limit: 1000000, Window: time.Hour}}, // "a million per hour"
}

func TestParseRuleAccepts(t *testing.T) {
	for _, tc := range acceptedRules {
		got, err := admit.ParseRule(tc.in)
		if !assert.NoErrorf(t, err, "ParseRule(%q)", tc.in) {
			continue
		}
		assert.Equalf(t, tc.want, got, "ParseRule(%q) = %+v, want %+v", tc.in, got, tc.want)
		assert.NoErrorf(t, got.Validate(), "ParseRule(%q).Validate()", tc.in)
	}
}

// Fields a rejection can be about: the detail after ErrInvalidRule's text starts
// with the field's name, except for a wrong field count, which quotes the text.
const (
	fieldAlgorithm = "algorithm"
	fieldLimit     = "limit"
	fieldWindow    = "window"
	fieldFields    = "fields"
	fieldText      = "rule text"
)

// Hints: what an error says would be accepted.
const (
	wantAlgorithms = `want one of "token-bucket", "fixed-window", "sliding-log" (or "sliding-window"), "sliding-counter"`
	wantLimit      = "want a positive base-10 integer such as 5"
	wantWindow     = `want a positive whole number of seconds ("10") or a duration such as "10s"`
	wantFields     = "want 3: algorithm,limit,window"
)

// rejectedRules are texts ParseRule rejects (docs/reliability.md, P1–P10). field
// is the field the error must name, hint what it must say is accepted, echo a
// part of the input the error must quote back ("" if none).
var rejectedRules = []struct {
	in    string
	field string
	hint  string
	echo  string
}{
	// P1: float specials as a limit.
	{"token-bucket,NaN,10", fieldLimit, wantLimit, `"NaN"`},
	{"token-bucket,nan,10", fieldLimit, wantLimit, `"nan"`},
	{"token-bucket,Inf,10", fieldLimit, wantLimit, `"Inf"`},
	{"token-bucket,+Inf,10", fieldLimit, wantLimit, `"+Inf"`},
	{"token-bucket,Infinity,10", fieldLimit, wantLimit, `"Infinity"`},
	{"token-bucket,-Inf,10", fieldLimit, wantLimit, `"-Inf"`},
	// P2, P3: out-of-range and tiny floats.
	{"token-bucket,1e309,10", fieldLimit, wantLimit, `"1e309"`},
	{"token-bucket,5e-324,10", fieldLimit, wantLimit, `"5e-324"`},
	{"token-bucket,1e-10,10", fieldLimit, wantLimit, `"1e-10"`},
	{"token-bucket,1e3,10", fieldLimit, wantLimit, `"1e3"`},
	// P4: zero and negative limits.
	{"token-bucket,0,10", fieldLimit, "must be at least 1", ""},
	{"token-bucket,-5,10", fieldLimit, wantLimit, `"-5"`},
	{"token-bucket,-0,10", fieldLimit, wantLimit, `"-0"`},
	{"token-bucket,00,10", fieldLimit, wantLimit, `"00"`},
	// P5: other number syntaxes; a limit is base 10, digits only.
	{"token-bucket,+5,10", fieldLimit, wantLimit, `"+5"`},
	{"token-bucket,1_000,10", fieldLimit, wantLimit, `"1_000"`},
	{"token-bucket,0x10,10", fieldLimit, wantLimit, `"0x10"`},
	{"token-bucket,010,10", fieldLimit, wantLimit, `"010"`},
	{"token-bucket,0x1p-2,10", fieldLimit, wantLimit, `"0x1p-2"`},
	{"token-bucket,1.5,10", fieldLimit, wantLimit, `"1.5"`},
	{"token-bucket,5.0,10", fieldLimit, wantLimit, `"5.0"`},
	{"token-bucket,5 5,10", fieldLimit, wantLimit, `"5 5"`},
	// P6: windows that are zero, negative, truncated, overflowing or misspelt.
	{"token-bucket,5,0", fieldWindow, "must be positive", ""},
	{"token-bucket,5,0s", fieldWindow, "must be positive", `"0s"`},
	{"token-bucket,5,0.0s", fieldWindow, "must be positive", `"0.0s"`},
	{"token-bucket,5,-1s", fieldWindow, wantWindow, `"-1s"`},
	{"token-bucket,5,-10", fieldWindow, wantWindow, `"-10"`},
	{"token-bucket,5,+10s", fieldWindow, wantWindow, `"+10s"`},
	{"token-bucket,5,1.5ns", fieldWindow, "whole number of nanoseconds", `"1.5ns"`},
	{"token-bucket,5,0.0000000001s", fieldWindow, "whole number of nanoseconds", `"0.0000000001s"`},
	{"token-bucket,5,2562048h", fieldWindow, wantWindow, `"2562048h"`},
	{"token-bucket,5,9223372036854775808ns", fieldWindow, wantWindow, `"9223372036854775808ns"`},
	{"token-bucket,5,9223372037", fieldWindow, wantWindow, `"9223372037"`},
	{"token-bucket,5,99999999999999999999999", fieldWindow, wantWindow, `"99999999999999999999999"`},
	{"token-bucket,5,10 s", fieldWindow, wantWindow, `"10 s"`},
	{"token-bucket,5,10S", fieldWindow, wantWindow, `"10S"`},
	{"token-bucket,5,1h30", fieldWindow, "number without a unit", `"1h30"`},
	{"token-bucket,5,2.5", fieldWindow, "number without a unit", `"2.5"`},
	{"token-bucket,5,1.s", fieldWindow, wantWindow, `"1.s"`},
	{"token-bucket,5,.5s", fieldWindow, wantWindow, `".5s"`},
	{"token-bucket,5,1d", fieldWindow, wantWindow, `"1d"`},
	{"token-bucket,5,NaN", fieldWindow, wantWindow, `"NaN"`},
	{"token-bucket,5,Inf", fieldWindow, wantWindow, `"Inf"`},
	{"token-bucket,5,1e3s", fieldWindow, wantWindow, `"1e3s"`},
	{"token-bucket,5,s", fieldWindow, wantWindow, `"s"`},
	// P7: field count and shape.
	{"token-bucket,5", fieldFields, wantFields, `"token-bucket,5"`},
	{"token-bucket,5,10,", fieldFields, wantFields, `"token-bucket,5,10,"`},
	{"token-bucket,5,10,extra", fieldFields, wantFields, `"token-bucket,5,10,extra"`},
	{"token-bucket 5 10", fieldFields, wantFields, `"token-bucket 5 10"`},
	{"", fieldFields, wantFields, `""`},
	{",,", fieldAlgorithm, wantAlgorithms, `""`},
	{"token-bucket,,10", fieldLimit, wantLimit, ""},
	{"token-bucket,5,", fieldWindow, wantWindow, ""},
	{",5,10", fieldAlgorithm, wantAlgorithms, `""`},
	{"token-bucket;5;10", fieldFields, wantFields, `"token-bucket;5;10"`},
	// P8: case, look-alike runes, fullwidth digits, NUL, BOM, other spaces.
	{"TOKEN-BUCKET,5,10", fieldAlgorithm, wantAlgorithms, `"TOKEN-BUCKET"`},
	{"Token-Bucket,5,10", fieldAlgorithm, wantAlgorithms, `"Token-Bucket"`},
	{"token_bucket,5,10", fieldAlgorithm, wantAlgorithms, `"token_bucket"`},
	{"tokenbucket,5,10", fieldAlgorithm, wantAlgorithms, `"tokenbucket"`},
	{"token\u2010bucket,5,10", fieldAlgorithm, wantAlgorithms, "\"token\u2010bucket\""}, // U+2010 hyphen
	{"token-bucket,\uff15,10", fieldLimit, wantLimit, "\"\uff15\""},                     // fullwidth 5
	{"token-bucket,5,\uff11\uff10s", fieldWindow, wantWindow, "\"\uff11\uff10s\""},      // fullwidth 10
	{"token-bucket,\u0665,10", fieldLimit, wantLimit, "\"\u0665\""},                     // Arabic-Indic 5
	{"token-bucket\x00,5,10", fieldAlgorithm, wantAlgorithms, `"token-bucket\x00"`},
	{"token-bucket,5\x00,10", fieldLimit, wantLimit, `"5\x00"`},
	{"token-bucket,5,10s\x00", fieldWindow, wantWindow, `"10s\x00"`},
	{"\ufefftoken-bucket,5,10", fieldAlgorithm, wantAlgorithms, `"\ufefftoken-bucket"`}, // BOM
	{"token-bucket,5,10\r", fieldWindow, wantWindow, `"10\r"`},
	{"token-bucket,5,10\n", fieldWindow, wantWindow, `"10\n"`},
	{"token-bucket,\u00a05,10", fieldLimit, wantLimit, `"\u00a05"`}, // no-break space
	{"token-bucket,5,10\u3000", fieldWindow, wantWindow, `"10\u3000"`},
	// P10: limits and products beyond the bounds.
	{"token-bucket,2147483648,10", fieldLimit, "exceeds the maximum 2147483647", `"2147483648"`},
	{"token-bucket,9223372036854775808,10", fieldLimit, "exceeds the maximum 2147483647", `"9223372036854775808"`},
	{"token-bucket,99999999999999999999999,10", fieldLimit, "exceeds the maximum 2147483647", `"99999999999999999999999"`},
	{"token-bucket,2147483647,2562047h", fieldLimit, "lower the limit or the window", "2147483647 × window 2562047h"},
	{"token-bucket,1,4611686018427387905ns", fieldLimit, "lower the limit or the window", "× window"},
	{"token-bucket,1,4611686019", fieldLimit, "lower the limit or the window", "× window"},
	{"sliding-log,65537,10", fieldLimit, "use sliding-counter", "65537"},
	{"sliding-window,1000000,1h", fieldLimit, "use sliding-counter", "1000000"},
	{"token-bucket,5,3ns", fieldWindow, "more than one request per nanosecond", "3ns"},
	{"token-bucket,2147483647,1s", fieldWindow, "shorter than 2147483647ns", "a limit of 2147483647 per 1s"},
}

func TestParseRuleRejects(t *testing.T) {
	for _, tc := range rejectedRules {
		got, err := admit.ParseRule(tc.in)
		if !assert.Errorf(t, err, "ParseRule(%q) = %+v, want an error about the %s", tc.in, got, tc.field) {
			continue
		}
		assertRuleError(t, tc.in, err, tc.field, tc.hint)
		assert.Equalf(t, admit.Rule{}, got, "ParseRule(%q) returned a non-zero rule with its error", tc.in)
		if tc.echo != "" {
			assert.Containsf(t, err.Error(), tc.echo, "ParseRule(%q): the error should quote the input", tc.in)
		}
	}
}

// assertRuleError checks the shape of every rule error: it wraps ErrInvalidRule,
// names the field at fault, says what would be accepted and stays short.
func assertRuleError(t *testing.T, in string, err error, field, hint string) {
	t.Helper()
	msg := err.Error()
	assert.Truef(t, errors.Is(err, admit.ErrInvalidRule), "ParseRule(%q) error %q does not wrap ErrInvalidRule", in, msg)
	detail, ok := strings.CutPrefix(msg, invalidRulePrefix)
	assert.Truef(t, ok, "ParseRule(%q) error %q does not start with %q", in, msg, invalidRulePrefix)
	if field == fieldFields {
		assert.Containsf(t, detail, "comma-separated fields", "ParseRule(%q) error %q should be about the field count", in, msg)
	} else {
		assert.Truef(t, strings.HasPrefix(detail, field+" "), "ParseRule(%q) error %q should name the %s first", in, msg, field)
	}
	assert.Containsf(t, msg, hint, "ParseRule(%q) error %q should say what is accepted", in, msg)
	assert.Lessf(t, len(msg), maxPlainErrorLen, "ParseRule(%q) error is %d bytes: %q", in, len(msg), msg)
}

// TestParseRuleHugeInput is P9: a megabyte of text is refused up front, without
// reading (or splitting, or quoting) all of it.
func TestParseRuleHugeInput(t *testing.T) {
	const mb = 1 << 20
	inputs := map[string]string{
		"1MB of letters":            strings.Repeat("a", mb),
		"1MB of commas":             strings.Repeat(",", mb),
		"valid rule then 1MB space": "token-bucket,5,10" + strings.Repeat(" ", mb),
		"1MB window digits":         "token-bucket,5," + strings.Repeat("9", mb),
		"1MB of NUL":                strings.Repeat("\x00", mb),
		"1MB of multibyte runes":    strings.Repeat("é", mb/2),
		"1MB limit":                 "token-bucket," + strings.Repeat("1", mb) + ",10s",
	}
	for name, in := range inputs {
		var err error
		allocated := bytesAllocated(func() { _, err = admit.ParseRule(in) })
		if !assert.Errorf(t, err, "%s: ParseRule(%d bytes) accepted", name, len(in)) {
			continue
		}
		assertRuleError(t, name, err, fieldText, "a rule is at most")
		// Splitting a megabyte of commas alone would allocate 16 MB of string
		// headers; refusing it up front allocates the error message only.
		assert.Lessf(t, allocated, uint64(64<<10), "%s: ParseRule allocated %d bytes", name, allocated)
	}
}

// bytesAllocated reports how many heap bytes f allocates.
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestParseRuleLengthBound pins the bound the error message states: a rule is
// at most 256 bytes, padding included.
func TestParseRuleLengthBound(t *testing.T) {
	const rule = "token-bucket,5,10"
	at := rule + strings.Repeat(" ", 256-len(rule))
	r, err := admit.ParseRule(at)
	require.NoErrorf(t, err, "ParseRule(%q), %d bytes", at, len(at))
	assert.Equal(t, admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}, r)

	past := at + " "
	_, err = admit.ParseRule(past)
	require.Errorf(t, err, "ParseRule(%q), %d bytes", past, len(past))
	assertRuleError(t, past, err, fieldText, "a rule is at most 256 bytes")
}

// TestParseRuleLongPaddingIsRejected pins that the length bound applies to the
// raw text: padding does not smuggle a longer text through.
func TestParseRuleLongPaddingIsRejected(t *testing.T) {
	in := "token-bucket,5," + strings.Repeat(" ", 1000) + "10s"
	_, err := admit.ParseRule(in)
	require.Errorf(t, err, "ParseRule(%d bytes of padded rule)", len(in))
	assert.ErrorIs(t, err, admit.ErrInvalidRule)
}

// TestParseRuleErrorsAreBounded feeds fields that strconv.Quote expands the
// most (NUL and invalid bytes become \x00, U+2028 becomes \u2028) at the
// longest length ParseRule reads, in every position.
func TestParseRuleErrorsAreBounded(t *testing.T) {
	fillers := []string{"\x00", "\x80", "\xff", "\u2028", "\"", "\\", "é", "a"}
	for _, fill := range fillers {
		long := strings.Repeat(fill, 240/len(fill))
		for _, in := range []string{
			long,
			long + ",5,10",
			"token-bucket," + long + ",10",
			"token-bucket,5," + long,
			"token-bucket,5,1" + long,
			"token-bucket,5,1" + long[:120] + "1" + long[:100],
			strings.Repeat(fill+",", 200/(len(fill)+1)),
		} {
			_, err := admit.ParseRule(in)
			if !assert.Errorf(t, err, "ParseRule(%q)", in) {
				continue
			}
			assert.ErrorIsf(t, err, admit.ErrInvalidRule, "ParseRule(%q)", in)
			assert.LessOrEqualf(t, len(err.Error()), maxErrorLen, "ParseRule(%q) error is %d bytes: %q", in, len(err.Error()), err)
		}
	}
}

// TestParseRuleQuotesInvalidUTF8 checks that an error about a long field of
// bytes that are not UTF-8 still shows (the start of) the field. It used to be
// shortened to "" because the cut backed up over every non-rune-start byte.
func TestParseRuleQuotesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct{ in, echo string }{
		{strings.Repeat("\x80", 60) + ",5,10", `"\x80\x80\x80\x80`},
		{"token-bucket," + strings.Repeat("\xbf", 60) + ",10", `"\xbf\xbf\xbf\xbf`},
		{"token-bucket,5,1" + strings.Repeat("\x80", 60), `"1\x80\x80\x80`},
		// A valid multi-byte rune straddling the cut is left out whole.
		{strings.Repeat("a", 47) + "é" + strings.Repeat("a", 10) + ",5,10", `"` + strings.Repeat("a", 47) + `"…`},
		{strings.Repeat("a", 46) + "€" + strings.Repeat("a", 10) + ",5,10", `"` + strings.Repeat("a", 46) + `"…`},
		{strings.Repeat("a", 45) + "€" + strings.Repeat("a", 10) + ",5,10", `"` + strings.Repeat("a", 45) + `€"…`},
		{strings.Repeat("a", 45) + "😀" + strings.Repeat("a", 10) + ",5,10", `"` + strings.Repeat("a", 45) + `"…`},
	} {
		_, err := admit.ParseRule(tc.in)
		require.Errorf(t, err, "ParseRule(%q)", tc.in)
		assert.Containsf(t, err.Error(), tc.echo, "ParseRule(%q) error should quote the start of the field", tc.in)
	}
}

// TestParseRuleQuoteBoundary pins the cut of a quoted field at exactly 48
// bytes, in every field an error quotes: 47 and 48 bytes are quoted whole, 49
// are cut to 48 and "…".
func TestParseRuleQuoteBoundary(t *testing.T) {
	for _, n := range []int{47, 48, 49} {
		field := strings.Repeat("z", n)
		want := strconv.Quote(field)
		if n > 48 {
			want = strconv.Quote(field[:48]) + "…"
		}
		for _, tc := range []struct{ in, quoted string }{
			{field + ",5,10", "algorithm " + want + " is unknown"},
			{"token-bucket," + field + ",10", "limit " + want + " is not accepted"},
			{"token-bucket,5," + field, "window " + want + " "},
			{"token-bucket,5,1" + field, "has unknown unit " + want + ";"}, // the unit is the window less its digit
		} {
			_, err := admit.ParseRule(tc.in)
			require.Errorf(t, err, "ParseRule(%q)", tc.in)
			assert.Containsf(t, err.Error(), tc.quoted, "ParseRule of a %d-byte field", n)
		}
	}
}

func TestRuleValidate(t *testing.T) {
	overMaxLimit := admit.MaxLimit // a variable, so that +1 compiles where int is 32 bits
	overMaxLimit++
	tests := []struct {
		name string
		r    admit.Rule
		want string // a part of the error; "" when the rule is valid
	}{
		{"zero rule", admit.Rule{}, "algorithm is not set; want one of"},
		{"unknown algorithm", admit.Rule{Algorithm: 9, Limit: 5, Window: time.Second}, "algorithm Algorithm(9) is unknown; want one of"},
		{"algorithm 255", admit.Rule{Algorithm: 255, Limit: 5, Window: time.Second}, "algorithm Algorithm(255) is unknown"},
		{"no algorithm", admit.Rule{Limit: 5, Window: time.Second}, "algorithm is not set"},
		{"zero limit", admit.Rule{Algorithm: admit.TokenBucket, Window: time.Second}, "limit 0 must be at least 1"},
		{"negative limit", admit.Rule{Algorithm: admit.TokenBucket, Limit: -5, Window: time.Second}, "limit -5 must be at least 1"},
		{"min int limit", admit.Rule{Algorithm: admit.FixedWindow, Limit: math.MinInt, Window: time.Second}, "must be at least 1"},
		{"limit at MaxLimit", admit.Rule{Algorithm: admit.TokenBucket, Limit: admit.MaxLimit, Window: admit.MaxLimit + 1}, ""},
		{"limit past MaxLimit", admit.Rule{Algorithm: admit.TokenBucket, Limit: overMaxLimit, Window: time.Second}, "exceeds the maximum 2147483647"},
		{"sliding log at its bound", admit.Rule{Algorithm: admit.SlidingLog, Limit: admit.MaxSlidingLogLimit, Window: time.Second}, ""},
		{"sliding log past its bound", admit.Rule{Algorithm: admit.SlidingLog, Limit: admit.MaxSlidingLogLimit + 1, Window: time.Second}, "limit 65537 exceeds 65536, the largest sliding-log limit"},
		{"sliding counter past the log bound", admit.Rule{Algorithm: admit.SlidingCounter, Limit: admit.MaxSlidingLogLimit + 1, Window: time.Second}, ""},
		{"zero window", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5}, "window 0s must be positive"},
		{"negative window", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: -time.Second}, "window -1s must be positive"},
		{"min window", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: math.MinInt64}, "must be positive"},
		{"window of limit ns", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 5}, ""},
		{"window one ns short", admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 4}, "window 4ns is shorter than 5ns"},
		{"one per ns at MaxLimit", admit.Rule{Algorithm: admit.SlidingCounter, Limit: admit.MaxLimit, Window: admit.MaxLimit}, ""},
		{"product at the bound", admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: admit.MaxLimitTimesWindow}, ""},
		{"product one past the bound", admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: admit.MaxLimitTimesWindow + 1}, "exceeds 2^62 ns"},
		{"product at the bound, limit 4", admit.Rule{Algorithm: admit.FixedWindow, Limit: 4, Window: admit.MaxLimitTimesWindow / 4}, ""},
		{"product past the bound, limit 4", admit.Rule{Algorithm: admit.FixedWindow, Limit: 4, Window: admit.MaxLimitTimesWindow/4 + 1}, "exceeds 2^62 ns"},
		{"longest window", admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: math.MaxInt64}, "exceeds 2^62 ns"},
		{"product overflows 64 bits", admit.Rule{Algorithm: admit.TokenBucket, Limit: admit.MaxLimit, Window: math.MaxInt64}, "exceeds 2^62 ns"},
		{"P10 bucket4j", admit.Rule{Algorithm: admit.TokenBucket, Limit: admit.MaxLimit, Window: 2562047 * time.Hour}, "limit 2147483647 × window 2562047h0m0s exceeds 2^62 ns"},
		{"a thousand per day", admit.Rule{Algorithm: admit.SlidingCounter, Limit: 1000, Window: 24 * time.Hour}, ""},
	}
	for _, tc := range tests {
		err := tc.r.Validate()
		if tc.want == "" {
			assert.NoErrorf(t, err, "%s: %#v.Validate()", tc.name, tc.r)
			continue
		}
		if !assert.Errorf(t, err, "%s: %#v.Validate() = nil, want an error containing %q", tc.name, tc.r, tc.want) {
			continue
		}
		assert.ErrorIsf(t, err, admit.ErrInvalidRule, "%s: %#v.Validate()", tc.name, tc.r)
		assert.Containsf(t, err.Error(), tc.want, "%s: %#v.Validate()", tc.name, tc.r)
		assert.Lessf(t, len(err.Error()), maxPlainErrorLen, "%s: %#v.Validate() = %q", tc.name, tc.r, err)
	}
}

func TestRuleString(t *testing.T) {
	tests := []struct {
		r    admit.Rule
		want string
	}{
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 10 * time.Second}, "token-bucket,5,10s"},
		{admit.Rule{Algorithm: admit.FixedWindow, Limit: 2, Window: 1500 * time.Millisecond}, "fixed-window,2,1500ms"},
		{admit.Rule{Algorithm: admit.SlidingLog, Limit: 3, Window: time.Minute}, "sliding-log,3,1m"},
		{admit.Rule{Algorithm: admit.SlidingCounter, Limit: 100, Window: time.Hour}, "sliding-counter,100,1h"},
		{admit.Rule{Algorithm: admit.SlidingCounter, Limit: 100, Window: 90 * time.Minute}, "sliding-counter,100,90m"},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 7 * time.Nanosecond}, "token-bucket,5,7ns"},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 250 * time.Microsecond}, "token-bucket,5,250us"},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 2 * time.Hour}, "token-bucket,5,2h"},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: 61 * time.Second}, "token-bucket,5,61s"},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Hour + time.Nanosecond}, "token-bucket,5,3600000000001ns"},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: admit.MaxLimitTimesWindow}, "token-bucket,1,4611686018427387904ns"},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: admit.MaxLimit, Window: admit.MaxLimit}, "token-bucket,2147483647,2147483647ns"},
		// Invalid rules still print, without panicking.
		{admit.Rule{}, "Algorithm(0),0,0s"},
		{admit.Rule{Algorithm: 9, Limit: -1, Window: -time.Second}, "Algorithm(9),-1,-1s"},
		{admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: math.MinInt64}, "token-bucket,1,-2562047h47m16.854775808s"},
	}
	for _, tc := range tests {
		assert.Equalf(t, tc.want, tc.r.String(), "%#v.String()", tc.r)
	}
}

func TestAlgorithmStringAndParse(t *testing.T) {
	names := map[admit.Algorithm]string{
		admit.TokenBucket:    "token-bucket",
		admit.FixedWindow:    "fixed-window",
		admit.SlidingLog:     "sliding-log",
		admit.SlidingCounter: "sliding-counter",
	}
	for a, name := range names {
		assert.Equalf(t, name, a.String(), "Algorithm(%d).String()", uint8(a))
		got, err := admit.ParseAlgorithm(a.String())
		if assert.NoErrorf(t, err, "ParseAlgorithm(%q)", a.String()) {
			assert.Equalf(t, a, got, "ParseAlgorithm(%q)", a.String())
		}
	}

	got, err := admit.ParseAlgorithm("sliding-window")
	require.NoError(t, err, `ParseAlgorithm("sliding-window")`)
	assert.Equal(t, admit.SlidingLog, got, `ParseAlgorithm("sliding-window") is the sliding log`)
	assert.Equal(t, "sliding-log", got.String(), "the alias prints as the canonical name")

	assert.Equal(t, "Algorithm(0)", admit.Algorithm(0).String())
	assert.Equal(t, "Algorithm(5)", admit.Algorithm(5).String())
	assert.Equal(t, "Algorithm(255)", admit.Algorithm(255).String())

	for _, name := range []string{"", "Algorithm(0)", "Algorithm(1)", "1", "token-bucket ", " token-bucket", "TOKEN-BUCKET", "Token-Bucket", "leaky-bucket", "sliding", "token\u2010bucket", "\ufefftoken-bucket"} {
		a, err := admit.ParseAlgorithm(name)
		if !assert.Errorf(t, err, "ParseAlgorithm(%q) = %v", name, a) {
			continue
		}
		assert.ErrorIsf(t, err, admit.ErrInvalidRule, "ParseAlgorithm(%q)", name)
		assert.Containsf(t, err.Error(), wantAlgorithms, "ParseAlgorithm(%q)", name)
		assert.Equalf(t, admit.Algorithm(0), a, "ParseAlgorithm(%q) returned an algorithm with its error", name)
	}

	// Every byte value: exactly the four algorithms have names that parse back.
	for i := range 256 {
		a := admit.Algorithm(i)
		got, err := admit.ParseAlgorithm(a.String())
		_, named := names[a]
		if named {
			assert.NoErrorf(t, err, "ParseAlgorithm(%q)", a.String())
			assert.Equalf(t, a, got, "ParseAlgorithm(%q)", a.String())
		} else {
			assert.Errorf(t, err, "ParseAlgorithm(%q) = %v", a.String(), got)
		}
	}
}

// validRule is a quick.Generator of valid rules spread over every scale: any
// algorithm, limits from 1 to the algorithm's bound, windows from Limit ns to the
// product bound, rounded to a random unit so that String uses every unit.
type validRule struct{ admit.Rule }

var windowGrains = []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour}

func (validRule) Generate(rnd *rand.Rand, _ int) reflect.Value {
	for {
		alg := admit.Algorithm(1 + rnd.Intn(4))
		maxLimit := int64(admit.MaxLimit)
		if alg == admit.SlidingLog {
			maxLimit = admit.MaxSlidingLogLimit
		}
		limit := logUniform(rnd, 1, maxLimit)
		window := time.Duration(logUniform(rnd, limit, admit.MaxLimitTimesWindow/limit))
		grain := windowGrains[rnd.Intn(len(windowGrains))]
		if window >= grain {
			window -= window % grain
		}
		r := admit.Rule{Algorithm: alg, Limit: int(limit), Window: window}
		if r.Validate() == nil {
			return reflect.ValueOf(validRule{r})
		}
	}
}

// logUniform returns an int64 in [lo, hi] whose bit length is spread evenly,
// with the bounds themselves drawn often. It requires 0 <= hi-lo <= 2^62.
func logUniform(rnd *rand.Rand, lo, hi int64) int64 {
	switch rnd.Intn(8) {
	case 0:
		return lo
	case 1:
		return hi
	}
	span := hi - lo
	n := rnd.Intn(bits.Len64(uint64(span)) + 1) // bits in the offset: 0..len(span)
	return lo + min(span, rnd.Int63n(int64(1)<<n))
}

// TestRuleRoundTrip is P17: for every valid rule r, ParseRule(r.String()) == r.
func TestRuleRoundTrip(t *testing.T) {
	roundTrips := func(v validRule) bool {
		text := v.String()
		got, err := admit.ParseRule(text)
		if err != nil {
			t.Logf("ParseRule(%q) for %#v: %v", text, v.Rule, err)
			return false
		}
		if got != v.Rule {
			t.Logf("ParseRule(%q) = %#v, want %#v", text, got, v.Rule)
			return false
		}
		return true
	}
	assert.NoError(t, quick.Check(roundTrips, &quick.Config{MaxCount: 20000}))
}

// TestRuleStringParsesIffValid checks arbitrary rules, valid or not: the text of
// an invalid rule never parses, the text of a valid one parses back to it.
func TestRuleStringParsesIffValid(t *testing.T) {
	edges := []int64{math.MinInt64, -1, 0, 1, 2, 4, 5, admit.MaxSlidingLogLimit, admit.MaxSlidingLogLimit + 1, admit.MaxLimit, admit.MaxLimit + 1,
		int64(time.Second), admit.MaxLimitTimesWindow, admit.MaxLimitTimesWindow + 1, math.MaxInt64}
	pick := func(rnd *rand.Rand) int64 {
		switch rnd.Intn(3) {
		case 0:
			return edges[rnd.Intn(len(edges))]
		case 1:
			return rnd.Int63n(1 << (1 + rnd.Intn(62)))
		}
		return int64(rnd.Uint64())
	}
	cfg := &quick.Config{
		MaxCount: 20000,
		Values: func(args []reflect.Value, rnd *rand.Rand) {
			r := admit.Rule{Algorithm: admit.Algorithm(rnd.Intn(7)), Limit: int(pick(rnd)), Window: time.Duration(pick(rnd))}
			args[0] = reflect.ValueOf(r)
		},
	}
	property := func(r admit.Rule) bool {
		valid := r.Validate() == nil
		got, err := admit.ParseRule(r.String())
		switch {
		case valid && (err != nil || got != r):
			t.Logf("valid %#v: ParseRule(%q) = %#v, %v", r, r.String(), got, err)
			return false
		case !valid && err == nil:
			t.Logf("invalid %#v (%v): ParseRule(%q) = %#v, want an error", r, r.Validate(), r.String(), got)
			return false
		case !valid && !errors.Is(err, admit.ErrInvalidRule):
			t.Logf("invalid %#v: ParseRule(%q) error %v does not wrap ErrInvalidRule", r, r.String(), err)
			return false
		}
		return true
	}
	assert.NoError(t, quick.Check(property, cfg))
}
