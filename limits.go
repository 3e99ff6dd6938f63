package admit

import (
	"fmt"
	"strings"
	"time"
)

// MaxLimits is the largest number of rules in a [Limits].
const MaxLimits = 8

// limitsSeparator joins the rules of a Limits in its text form.
const limitsSeparator = " + "

// maxLimitsText bounds the text ParseLimits reads: eight rules at most and
// their separators.
const maxLimitsText = MaxLimits*(maxRuleText+len(limitsSeparator)) - len(limitsSeparator)

// Limits is an ordered set of 1 to [MaxLimits] rules enforced together on
// the same key: a composite limit such as "10 per second and 1,000 per
// hour". A request for n is admitted only if every rule admits n at that
// reading, and then every rule is charged; if any rule denies, none is
// charged. A Limits of one rule is that rule.
//
// The zero Limits holds no rule and is not valid. A Limits is a plain
// comparable value, built by [NewLimits] or [ParseLimits]; its text form,
// written by [Limits.String], is the rules' texts joined by " + ", for
// example "token-bucket,10,1s + fixed-window,1000,1h".
//
// The Decision of a composite: Allowed when every rule admits; Remaining the
// smallest of the rules' (how many more single requests all of them would
// admit); RetryAfter the largest (the wait after which every rule admits the
// same request, if nothing else arrives); ResetAfter the largest; and Limit
// the Limit of the rule that bound: on a denial the rule with the largest
// RetryAfter, on an admission the rule with the smallest Remaining, the first
// in order on a tie. A composite limiter's AllowNWhich returns that rule's
// index too ([CompositeLimiter], [CompositeStore]). AllowN(n) with n above
// the smallest Limit is denied with RetryAfter [Never].
type Limits struct {
	rules [MaxLimits]Rule
	n     uint8
}

// NewLimits returns the Limits of rules, in order. It refuses no rule, more
// than [MaxLimits], an invalid rule and the same rule twice, with an error
// wrapping [ErrInvalidRule] that names the rule at fault.
func NewLimits(rules ...Rule) (Limits, error) {
	var l Limits
	if len(rules) == 0 {
		return Limits{}, fmt.Errorf("%w: limits hold no rule; want 1 to %d rules", ErrInvalidRule, MaxLimits)
	}
	if len(rules) > MaxLimits {
		return Limits{}, fmt.Errorf("%w: limits hold %d rules; want at most %d", ErrInvalidRule, len(rules), MaxLimits)
	}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			if len(rules) == 1 {
				return Limits{}, err
			}
			return Limits{}, fmt.Errorf("rule %d of %d: %w", i+1, len(rules), err)
		}
		for j := range i {
			if rules[j] == r {
				return Limits{}, fmt.Errorf("%w: rule %d, %v, repeats rule %d; each rule of a composite must differ", ErrInvalidRule, i+1, r, j+1)
			}
		}
		l.rules[i] = r
	}
	l.n = uint8(len(rules))
	return l, nil
}

// ParseLimits reads Limits from their text form: one or more rules in the
// form [ParseRule] reads, separated by "+" (spaces and tabs around it are
// ignored), for example "token-bucket,10,1s + fixed-window,1000,1h". The
// result is checked as [NewLimits] checks it. Every error wraps
// [ErrInvalidRule] and, for a composite, names the rule at fault.
func ParseLimits(text string) (Limits, error) {
	if len(text) > maxLimitsText {
		return Limits{}, fmt.Errorf("%w: limits text is %d bytes; at most %d rules of at most %d bytes each are accepted",
			ErrInvalidRule, len(text), MaxLimits, maxRuleText)
	}
	parts := strings.Split(text, "+")
	if len(parts) > MaxLimits {
		return Limits{}, fmt.Errorf("%w: %s joins %d rules; want at most %d", ErrInvalidRule, quote(text), len(parts), MaxLimits)
	}
	var rules [MaxLimits]Rule
	for i, p := range parts {
		r, err := ParseRule(p)
		if err != nil {
			if len(parts) == 1 {
				return Limits{}, err
			}
			return Limits{}, fmt.Errorf("rule %d of %d: %w", i+1, len(parts), err)
		}
		rules[i] = r
	}
	return NewLimits(rules[:len(parts)]...)
}

// Len returns the number of rules in l.
func (l Limits) Len() int { return int(l.n) }

// At returns the i-th rule of l, for 0 <= i < l.Len(); it panics for an
// index out of that range, as indexing a slice does.
func (l Limits) At(i int) Rule {
	if i < 0 || i >= int(l.n) {
		panic(fmt.Sprintf("admit: Limits.At(%d) of %d rules", i, l.n))
	}
	return l.rules[i]
}

// Rules returns a new slice of l's rules, in order.
func (l Limits) Rules() []Rule { return append([]Rule(nil), l.rules[:l.n]...) }

// Limit returns the smallest Limit of l's rules: the largest n that AllowN
// can ever admit.
func (l Limits) Limit() int {
	m := 0
	for i, r := range l.rules[:l.n] {
		if i == 0 || r.Limit < m {
			m = r.Limit
		}
	}
	return m
}

// Validate reports whether l is Limits that NewLimits would return. The zero
// Limits is not.
func (l Limits) Validate() error {
	if l.n == 0 || int(l.n) > MaxLimits {
		return fmt.Errorf("%w: limits hold no rule (the zero Limits); build them with NewLimits or ParseLimits", ErrInvalidRule)
	}
	_, err := NewLimits(l.rules[:l.n]...)
	return err
}

// String returns l's canonical text: the rules' canonical texts joined by
// " + ". For every valid Limits, ParseLimits(l.String()) == l.
func (l Limits) String() string {
	var b strings.Builder
	for i, r := range l.rules[:l.n] {
		if i > 0 {
			b.WriteString(limitsSeparator)
		}
		b.WriteString(r.String())
	}
	return b.String()
}

// CompositeLimiter is the single-key limiter that the NewLimitsLimiter
// constructors of packages atomic and locked return for Limits of two or
// more rules; assert it to learn which rule bound a decision.
type CompositeLimiter interface {
	Limiter

	// Limits returns the rules the limiter enforces.
	Limits() Limits

	// AllowNWhich is AllowN, and also returns the index in Limits of the
	// rule that bound the decision (see [Limits]).
	AllowNWhich(n int) (Decision, int)
}

// CompositeStore is what NewLimits returns in packages atomic, locked and
// sharded: a keyed limiter of several rules per key with every control of
// its store. For Limits of one rule NewLimits returns New's [Store], which
// is a CompositeStore too. Every keyed store of the three packages does all
// of it, so a caller never asserts a capability.
type CompositeStore interface {
	KeyedLimiter

	// ReserveN is [Reserver.ReserveN] for key. When every rule is a token
	// bucket, it takes n tokens now in every rule and reports when they
	// are due. A store with a rule of another algorithm reserves nothing
	// ahead: it admits n now when AllowN would (Delay 0, true), and
	// otherwise takes nothing and reports the Decision's RetryAfter as the
	// Delay, with false; [WaitKeyN] then sleeps that long and asks again,
	// as it polls.
	ReserveN(key string, n int, maxWait time.Duration) (Reservation, bool)

	// CancelReservation is [Reserver.CancelReservation] for key: it gives
	// back, in every rule, what a reservation took, and nothing for a
	// reservation made on another key, or on this key before the store
	// evicted it or Reset it. A reservation of a store that reserves
	// nothing ahead took nothing to give back: cancelling it returns false.
	CancelReservation(key string, r Reservation) bool

	// Reset makes key's state a fresh key's in every rule, for example to
	// lift a user's limit by hand after a support call: after Reset
	// returns, the key's next decision sees a full budget at its own
	// reading. A decision on key concurrent with Reset is ordered before
	// or after it (Reset is linearizable), never lost or counted twice. A
	// reservation made on key before Reset can no longer be cancelled
	// after it: its hold goes with the state. Reset of a key the store
	// does not hold does nothing.
	Reset(key string)

	// Limits returns the rules the store enforces for every key (a
	// [Store]'s one rule, as Limits of one rule).
	Limits() Limits

	// AllowNWhich is AllowN, and also returns the index in Limits of the
	// rule that bound the decision (see [Limits]). A new key denied for
	// want of room in a full store ([WithMaxKeys]) is bound by the first
	// rule with the smallest Limit, whose Limit the Decision reports (a
	// Store's one rule: index 0).
	AllowNWhich(key string, n int) (Decision, int)

	// Len returns the number of keys stored now. Under concurrent calls it
	// may not include all of the latest insertions and evictions.
	Len() int

	// Sweep evicts every key that is idle now (its state equivalent to a
	// fresh key's at the clock's reading minus a slack of 100ms, so that
	// eviction never changes a decision) and returns the number of keys it
	// evicted. It costs time in proportion to the keys stored. Calls need
	// not sweep (each new key examines a few keys for eviction): it is for
	// owners who want memory back while no new keys arrive, for example
	// from a time.Ticker in a goroutine of their own.
	Sweep() int

	// Stats reports the keys stored, the bound of [WithMaxKeys], and the
	// keys evicted and the requests for new keys a full store denied since
	// it was built. It costs time in proportion to the store's shards (it
	// reads Len), and is meant for a metrics scrape, not the decision path.
	Stats() StoreStats
}
