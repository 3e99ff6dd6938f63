package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	admitatomic "github.com/admit-go/admit/atomic"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/policy"
	"github.com/admit-go/admit/sharded"
)

// checkUntilDenied checks (user, api) until the first denial and returns
// how many passed, at most 1000.
func checkUntilDenied(s *policy.Service, user, api string) int {
	for i := range 1000 {
		if !s.Check(user, api).Allowed {
			return i
		}
	}
	return 1000
}

// variants are the keyed stores a Service builds its limiters from (atomic
// has no keyed composite: its composites are sharded's).
var variants = []struct {
	name   string
	f      func(admit.Rule, ...admit.Option) (admit.Store, error)
	limits func(admit.Limits, ...admit.Option) (admit.CompositeStore, error)
}{
	{"sharded", sharded.New, sharded.NewLimits},
	{"locked", locked.New, locked.NewLimits},
	{"atomic", admitatomic.New, sharded.NewLimits},
}

// TestReloadFlipFlop is issue 25's scenario: on a frozen clock, a pair
// spends its 10 per hour, the limit goes to 5 and back to 10, five times
// over. No rule in force ever allowed more than 10 in the hour, and with
// CarryConsumed and CarryProportional no more than 10 pass, in every
// store and for every algorithm. (Carrying "at most the new Limit", each
// raise handed 5 back: 35 passed.)
func TestReloadFlipFlop(t *testing.T) {
	for _, v := range variants {
		for _, alg := range []string{"token-bucket", "fixed-window", "sliding-log", "sliding-counter"} {
			if v.name == "atomic" && alg == "sliding-log" {
				continue // atomic has no sliding log (locked's is the one to use)
			}
			for _, c := range []policy.Carry{policy.CarryConsumed, policy.CarryProportional} {
				what := fmt.Sprintf("%s %s carry %v", v.name, alg, c)
				book := func(limit int) *policy.Book {
					return parse(t, fmt.Sprintf("default = %s,%d,1h\n", alg, limit))
				}
				s := service(t, book(10), admit.WithClock(clock.NewFake()), policy.WithFactory(v.f), policy.WithLimitsFactory(v.limits))
				total := checkUntilDenied(s, "u", "/x")
				for cycle := range 5 {
					require.NoError(t, s.Reload(book(5), policy.WithCarry(c)), what)
					total += checkUntilDenied(s, "u", "/x")
					require.Equal(t, 0, remaining(s, "u", "/x"), "%s: cycle %d, lowered", what, cycle)
					require.NoError(t, s.Reload(book(10), policy.WithCarry(c)), what)
					total += checkUntilDenied(s, "u", "/x")
				}
				require.Equal(t, 10, total, "%s: admitted in five cycles of 10 -> 5 -> 10 per hour on a frozen clock", what)
			}
		}
	}
}

// drawBookLimits draws a default entry's limits for TestReloadChainBound:
// one or two rules of small limits over a few windows.
func drawBookLimits(t *rapid.T, label string, logs bool) (string, admit.Limits) {
	algs := []string{"token-bucket", "fixed-window", "sliding-counter"}
	if logs {
		algs = append(algs, "sliding-log")
	}
	var rules []string
	seen := map[string]bool{}
	for i := range rapid.IntRange(1, 2).Draw(t, label+"Parts") {
		alg := rapid.SampledFrom(algs).Draw(t, fmt.Sprintf("%sAlg%d", label, i))
		window := rapid.SampledFrom([]string{"1s", "1m", "1h"}).Draw(t, fmt.Sprintf("%sWindow%d", label, i))
		if seen[alg+window] {
			continue
		}
		seen[alg+window] = true
		rules = append(rules, fmt.Sprintf("%s,%d,%s", alg, rapid.IntRange(1, 20).Draw(t, fmt.Sprintf("%sLimit%d", label, i)), window))
	}
	text := strings.Join(rules, " + ")
	l, err := admit.ParseLimits(text)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return text, l
}

// TestReloadChainBound is Reload's promise over generated sequences of
// books on a frozen clock: a pair is admitted at most the largest Limit
// (a composite's smallest rule's) of the limits it was under with
// CarryConsumed, and at most the largest Limit of any rule it was under
// with CarryProportional (the same for one-rule limits: see policy.Carry).
func TestReloadChainBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := variants[rapid.IntRange(0, len(variants)-1).Draw(t, "variant")]
		c := rapid.SampledFrom([]policy.Carry{policy.CarryConsumed, policy.CarryProportional}).Draw(t, "carry")
		logs := v.name != "atomic"
		text, l := drawBookLimits(t, "book0", logs)
		s, err := policy.NewService(parseBook(t, "default = "+text+"\n"), admit.WithClock(clock.NewFake()), policy.WithFactory(v.f), policy.WithLimitsFactory(v.limits))
		require.NoError(t, err)
		pairs := []string{"a", "b", "c"}
		admitted := map[string]int{}
		bound := 0
		for step := range rapid.IntRange(1, 10).Draw(t, "books") {
			if step > 0 {
				text, l = drawBookLimits(t, fmt.Sprintf("book%d", step), logs)
				require.NoError(t, s.Reload(parseBook(t, "default = "+text+"\n"), policy.WithCarry(c)))
			}
			bound = max(bound, bookBound(l, c))
			for range rapid.IntRange(0, 25).Draw(t, "checks") {
				user := rapid.SampledFrom(pairs).Draw(t, "user")
				n := rapid.IntRange(0, 4).Draw(t, "n")
				if s.CheckN(user, "/x", n).Allowed {
					admitted[user] += n
				}
			}
			for _, u := range pairs {
				if admitted[u] > bound {
					t.Fatalf("%s, carry %v: user %s admitted %d after book %d (%s), more than %d, the largest limit in force", v.name, c, u, admitted[u], step, text, bound)
				}
			}
		}
	})
}

// parseBook is parse for a rapid.T.
func parseBook(t require.TestingT, text string) *policy.Book {
	b, err := policy.Parse(strings.NewReader(text))
	require.NoError(t, err)
	return b
}

// bookBound is what one book adds to TestReloadChainBound's bound.
func bookBound(l admit.Limits, c policy.Carry) int {
	if c == policy.CarryConsumed {
		return l.Limit()
	}
	m := 0
	for i := range l.Len() {
		m = max(m, l.At(i).Limit)
	}
	return m
}
