package admit

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Algorithm names one of the four admission algorithms. The zero value is not an
// algorithm; [Rule.Validate] rejects it.
type Algorithm uint8

const (
	// TokenBucket: a bucket of Limit tokens, refilled continuously at Limit per
	// Window, starting full. Allows a burst of Limit, then a steady rate.
	TokenBucket Algorithm = iota + 1
	// FixedWindow: at most Limit per window [kW, (k+1)W) of the clock. Cheapest;
	// allows 2×Limit across a window boundary.
	FixedWindow
	// SlidingLog: at most Limit admissions in any span of length Window, exactly,
	// at the price of Limit timestamps per key.
	SlidingLog
	// SlidingCounter: the previous and the current fixed window, the previous one
	// weighted by how much of it the sliding span still covers. Two counters per
	// key; approximate by design (see the package documentation for its bounds).
	SlidingCounter
)

var algorithmNames = [...]string{
	TokenBucket:    "token-bucket",
	FixedWindow:    "fixed-window",
	SlidingLog:     "sliding-log",
	SlidingCounter: "sliding-counter",
}

const acceptedAlgorithms = `"token-bucket", "fixed-window", "sliding-log" (or "sliding-window"), "sliding-counter"`

// String returns the algorithm's canonical name, as accepted by [ParseAlgorithm].
func (a Algorithm) String() string {
	if a.valid() {
		return algorithmNames[a]
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

func (a Algorithm) valid() bool { return a >= TokenBucket && a <= SlidingCounter }

// ParseAlgorithm returns the algorithm with the given name: "token-bucket",
// "fixed-window", "sliding-log" (also "sliding-window", the name the sliding log
// often goes by) or "sliding-counter". Names are exact and lower case.
func ParseAlgorithm(name string) (Algorithm, error) {
	switch name {
	case "token-bucket":
		return TokenBucket, nil
	case "fixed-window":
		return FixedWindow, nil
	case "sliding-log", "sliding-window":
		return SlidingLog, nil
	case "sliding-counter":
		return SlidingCounter, nil
	}
	return 0, fmt.Errorf("%w: algorithm %s is unknown; want one of %s", ErrInvalidRule, quote(name), acceptedAlgorithms)
}

// Bounds every rule must respect. They keep every variant's arithmetic within
// 64-bit integers (no overflow, no floating point) and a sliding log's memory
// per key within reason.
const (
	// MaxLimit is the largest Limit, so that a Limit fits an int on every platform.
	MaxLimit = math.MaxInt32

	// MaxSlidingLogLimit is the largest Limit of a sliding log, which keeps Limit
	// timestamps (8 bytes each, 512 KiB at this bound) per key. Larger limits want
	// the sliding counter.
	MaxSlidingLogLimit = 1 << 16

	// MaxLimitTimesWindow bounds Limit × Window (in nanoseconds). The token bucket
	// counts tokens in units of 1/Window and the sliding counter weighs counts by
	// nanoseconds, so both compute products of that size. 2^62 allows, for
	// example, a million per hour or a thousand per day.
	MaxLimitTimesWindow = 1 << 62
)

// maxRuleText bounds the text ParseRule reads, so that a hostile configuration
// cannot make parsing (or the error message) arbitrarily large.
const maxRuleText = 256

// Rule is a limit: at most Limit requests per Window, enforced by Algorithm.
//
// A Rule is a plain comparable value. Its text form, read by [ParseRule] and
// written by [Rule.String], is "algorithm,limit,window", for example
// "token-bucket,5,10s" (five per ten seconds).
type Rule struct {
	Algorithm Algorithm
	Limit     int
	Window    time.Duration
}

// Validate reports whether r is a rule every variant can enforce exactly. The
// error wraps [ErrInvalidRule], names the field at fault and says what would be
// accepted. The bounds are: a known Algorithm; 1 <= Limit <= [MaxLimit] (and
// <= [MaxSlidingLogLimit] for a sliding log); Window >= Limit nanoseconds (at
// most one request per nanosecond); Limit × Window <= [MaxLimitTimesWindow].
func (r Rule) Validate() error {
	if !r.Algorithm.valid() {
		if r.Algorithm == 0 {
			return fmt.Errorf("%w: algorithm is not set; want one of %s", ErrInvalidRule, acceptedAlgorithms)
		}
		return fmt.Errorf("%w: algorithm %v is unknown; want one of %s", ErrInvalidRule, r.Algorithm, acceptedAlgorithms)
	}
	if r.Limit < 1 {
		return fmt.Errorf("%w: limit %d must be at least 1", ErrInvalidRule, r.Limit)
	}
	if r.Limit > MaxLimit {
		return fmt.Errorf("%w: limit %d exceeds the maximum %d", ErrInvalidRule, r.Limit, MaxLimit)
	}
	if r.Algorithm == SlidingLog && r.Limit > MaxSlidingLogLimit {
		return fmt.Errorf("%w: limit %d exceeds %d, the largest sliding-log limit (a sliding log keeps one 8-byte timestamp per admitted request and key); use sliding-counter for larger limits",
			ErrInvalidRule, r.Limit, MaxSlidingLogLimit)
	}
	if r.Window <= 0 {
		return fmt.Errorf("%w: window %v must be positive", ErrInvalidRule, r.Window)
	}
	if int64(r.Window) < int64(r.Limit) {
		return fmt.Errorf("%w: window %v is shorter than %dns: a limit of %d per %v asks for more than one request per nanosecond",
			ErrInvalidRule, r.Window, r.Limit, r.Limit, r.Window)
	}
	if hi, lo := bits.Mul64(uint64(r.Limit), uint64(r.Window)); hi != 0 || lo > MaxLimitTimesWindow {
		return fmt.Errorf("%w: limit %d × window %v exceeds 2^62 ns, the bound that keeps every limiter's arithmetic in 64-bit integers; lower the limit or the window",
			ErrInvalidRule, r.Limit, r.Window)
	}
	return nil
}

// String returns the rule's canonical text, "algorithm,limit,window", with the
// window in the largest unit that expresses it exactly (10s, 1500ms, 1h, 7ns).
// For every valid rule, ParseRule(r.String()) == r.
func (r Rule) String() string {
	return r.Algorithm.String() + "," + strconv.Itoa(r.Limit) + "," + formatWindow(r.Window)
}

var windowUnits = [...]struct {
	name string
	size time.Duration
}{
	{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second},
	{"ms", time.Millisecond}, {"us", time.Microsecond}, {"ns", time.Nanosecond},
}

func formatWindow(w time.Duration) string {
	if w <= 0 {
		return w.String()
	}
	for _, u := range windowUnits {
		if w%u.size == 0 {
			return strconv.FormatInt(int64(w/u.size), 10) + u.name
		}
	}
	panic("unreachable: every positive duration is a whole number of nanoseconds")
}

// ParseRule reads a rule from its text form "algorithm,limit,window":
//
//   - algorithm is a name accepted by [ParseAlgorithm];
//   - limit is a positive base-10 integer: digits only, no sign, no leading zero,
//     no underscores, exponents, hex or fractions;
//   - window is either a bare positive integer of seconds ("10") or a duration in
//     Go's syntax ("10s", "1500ms", "1h30m", "2.5s"; units ns, us, µs, ms, s, m,
//     h) that is a whole number of nanoseconds: "1.5ns" is an error, not 1ns.
//
// Spaces and tabs around a field are ignored; nothing else is. The result is
// checked with [Rule.Validate]. Every error wraps [ErrInvalidRule], names the
// field at fault and says what is accepted.
func ParseRule(text string) (Rule, error) {
	if len(text) > maxRuleText {
		return Rule{}, fmt.Errorf("%w: rule text is %d bytes; a rule is at most %d bytes of the form algorithm,limit,window",
			ErrInvalidRule, len(text), maxRuleText)
	}
	fields := strings.Split(text, ",")
	if len(fields) != 3 {
		return Rule{}, fmt.Errorf("%w: %s has %d comma-separated fields; want 3: algorithm,limit,window (for example token-bucket,5,10s)",
			ErrInvalidRule, quote(text), len(fields))
	}
	for i := range fields {
		fields[i] = strings.Trim(fields[i], " \t")
	}
	alg, err := ParseAlgorithm(fields[0])
	if err != nil {
		return Rule{}, err
	}
	limit, err := parseLimit(fields[1])
	if err != nil {
		return Rule{}, err
	}
	window, err := parseWindow(fields[2])
	if err != nil {
		return Rule{}, err
	}
	r := Rule{Algorithm: alg, Limit: limit, Window: window}
	if err := r.Validate(); err != nil {
		return Rule{}, err
	}
	return r, nil
}

func parseLimit(s string) (int, error) {
	const want = "want a positive base-10 integer such as 5 (digits only: no sign, leading zero, underscore, exponent or fraction)"
	if s == "" {
		return 0, fmt.Errorf("%w: limit is empty; %s", ErrInvalidRule, want)
	}
	if !allDigits(s) || (s[0] == '0' && len(s) > 1) {
		return 0, fmt.Errorf("%w: limit %s is not accepted; %s", ErrInvalidRule, quote(s), want)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > MaxLimit {
		return 0, fmt.Errorf("%w: limit %s exceeds the maximum %d", ErrInvalidRule, quote(s), MaxLimit)
	}
	if v == 0 {
		return 0, fmt.Errorf("%w: limit 0 must be at least 1 (a rule that admits nothing is not a rate limit)", ErrInvalidRule)
	}
	return int(v), nil
}

const windowSyntax = `want a positive whole number of seconds ("10") or a duration such as "10s", "1500ms" or "1h30m" (units ns, us, ms, s, m, h)`

func parseWindow(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: window is empty; %s", ErrInvalidRule, windowSyntax)
	}
	if allDigits(s) {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v > math.MaxInt64/uint64(time.Second) {
			return 0, fmt.Errorf("%w: window %s seconds overflows a time.Duration; %s", ErrInvalidRule, quote(s), windowSyntax)
		}
		if v == 0 {
			return 0, fmt.Errorf("%w: window 0 must be positive; %s", ErrInvalidRule, windowSyntax)
		}
		return time.Duration(v) * time.Second, nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: window %s %s; %s", ErrInvalidRule, quote(s), err.Error(), windowSyntax)
	}
	if d == 0 {
		return 0, fmt.Errorf("%w: window %s must be positive; %s", ErrInvalidRule, quote(s), windowSyntax)
	}
	return d, nil
}

type durationError string

func (e durationError) Error() string { return string(e) }

// parseDuration is time.ParseDuration made exact: no sign, and a value that is
// not a whole number of nanoseconds is an error instead of being truncated.
func parseDuration(s string) (time.Duration, error) {
	var total uint64
	for s != "" {
		i := 0
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == 0 {
			return 0, durationError("is not a duration")
		}
		whole, err := strconv.ParseUint(s[:i], 10, 64)
		if err != nil {
			return 0, durationError("overflows a time.Duration")
		}
		s = s[i:]
		var frac string
		if s != "" && s[0] == '.' {
			j := 1
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			if j == 1 {
				return 0, durationError("has a '.' without digits after it")
			}
			frac, s = strings.TrimRight(s[1:j], "0"), s[j:]
		}
		j := 0
		for j < len(s) && !isDigit(s[j]) && s[j] != '.' {
			j++
		}
		unit, ok := unitSize(s[:j])
		if !ok {
			if j == 0 {
				return 0, durationError("has a number without a unit")
			}
			return 0, durationError(fmt.Sprintf("has unknown unit %s", quote(s[:j])))
		}
		s = s[j:]
		hi, v := bits.Mul64(whole, unit)
		if hi != 0 {
			return 0, durationError("overflows a time.Duration")
		}
		if frac != "" {
			if len(frac) > 19 {
				return 0, durationError("is not a whole number of nanoseconds")
			}
			f, _ := strconv.ParseUint(frac, 10, 64) // at most 19 digits: fits
			scale := pow10(len(frac))
			fh, fl := bits.Mul64(f, unit)
			q, rem := bits.Div64(fh, fl, scale) // fh < scale since f < scale
			if rem != 0 {
				return 0, durationError("is not a whole number of nanoseconds")
			}
			var carry uint64
			v, carry = bits.Add64(v, q, 0)
			if carry != 0 {
				return 0, durationError("overflows a time.Duration")
			}
		}
		var carry uint64
		total, carry = bits.Add64(total, v, 0)
		if carry != 0 || total > math.MaxInt64 {
			return 0, durationError("overflows a time.Duration")
		}
	}
	return time.Duration(total), nil
}

func unitSize(u string) (uint64, bool) {
	switch u {
	case "ns":
		return uint64(time.Nanosecond), true
	case "us", "µs", "μs": // U+00B5 and U+03BC, as time.ParseDuration
		return uint64(time.Microsecond), true
	case "ms":
		return uint64(time.Millisecond), true
	case "s":
		return uint64(time.Second), true
	case "m":
		return uint64(time.Minute), true
	case "h":
		return uint64(time.Hour), true
	}
	return 0, false
}

func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// quote quotes s for an error message, shortened so that a hostile input cannot
// make the message large.
func quote(s string) string {
	const max = 48
	if len(s) > max {
		// Back up at most to the start of the rune that straddles the cut; bytes
		// that are not UTF-8 at all are cut where they are (Quote escapes them).
		cut := max
		for cut > max-utf8.UTFMax+1 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}
