package admit

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests that kill mutants `make mutate` found alive; the survivors no test
// can kill are listed in docs/stress.md ("Mutation testing").

// TestParseWindowSecondsEdge: a window in whole seconds is accepted up to
// the largest count that fits a time.Duration, and refused one above it.
// (No valid rule has such a window, so ParseRule's message would come from
// the rule's bounds; parseWindow is where the overflow is caught.)
func TestParseWindowSecondsEdge(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"9223372036", 9223372036 * time.Second, true}, // MaxInt64 / 1e9
		{"9223372037", 0, false},
		{"18446744073709551616", 0, false}, // 2^64: ParseUint fails
		{"1", time.Second, true},
		{"0", 0, false},
	} {
		got, err := parseWindow(c.in)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("parseWindow(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if !c.ok && !errors.Is(err, ErrInvalidRule) {
			t.Errorf("parseWindow(%q) = %v, %v; want an error wrapping ErrInvalidRule", c.in, got, err)
		}
	}
}

// TestParseDurationEdges: a duration of exactly MaxInt64 nanoseconds fits,
// in one term or in two; one more nanosecond overflows.
func TestParseDurationEdges(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"9223372036.854775807s", math.MaxInt64, true},
		{"9223372036854775807ns", math.MaxInt64, true},
		{"9223372036854775808ns", 0, false},
		{"9223372036854775806ns1ns", math.MaxInt64, true},
		{"9223372036854775807ns1ns", 0, false},
	} {
		got, err := parseDuration(c.in)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if !c.ok && err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", c.in, got)
		}
	}
}

// TestQuoteCut: quote keeps inputs of up to 48 bytes whole; a longer one is
// cut at 48 bytes, backing up at most three bytes to the start of the rune
// that straddles the cut (bytes that are not UTF-8 are cut where they are).
func TestQuoteCut(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	for _, c := range []struct {
		in, want string
	}{
		{a(48), strconv.Quote(a(48))},
		{a(49), strconv.Quote(a(48)) + "…"},
		{a(46) + "€", strconv.Quote(a(46)) + "…"},                                   // € is 3 bytes: 46..48
		{a(45) + "\U0001F600", strconv.Quote(a(45)) + "…"},                          // 4 bytes: 45..48
		{a(43) + strings.Repeat("\x80", 10), strconv.Quote(a(43)+"\x80\x80") + "…"}, // no rune start: back 3 at most
	} {
		if got := quote(c.in); got != c.want {
			t.Errorf("quote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
