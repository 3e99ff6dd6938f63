package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/clock"
	"github.com/admit-go/admit/internal/conformance"
	"github.com/admit-go/admit/internal/kernel"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/internal/redistest"
	"github.com/admit-go/admit/internal/reservation"
	"github.com/admit-go/admit/locked"
	"github.com/admit-go/admit/redisstore"
)

// newReserver returns a KeyedReserver of rule on c, reading fake, under a
// prefix of its own unless opts give one, failing closed with a long
// timeout and every error reported to t.
func newReserver(t testing.TB, c redis.Scripter, rule admit.Rule, fake *clock.Fake, opts ...redisstore.Option) *redisstore.KeyedReserver {
	t.Helper()
	l, err := redisstore.New(c, rule, append([]redisstore.Option{freshPrefix("reserve"), redisstore.WithTestClock(fake)}, opts...)...)
	require.NoError(t, err)
	r, err := redisstore.NewKeyedReserver(l, redisstore.Policy{
		Mode:    redisstore.FailClosed,
		Timeout: time.Minute,
		OnError: func(key string, err error) { t.Errorf("key %q: %v", key, err) },
	})
	require.NoError(t, err)
	return r
}

// TestReserverConformance runs the suite every local variant passes
// against KeyedReservers on a real server, with the suite's fake clock
// passed as time: the token bucket's decisions, and its reservation checks
// (ReserveN with maxWait 0 decides as AllowN; a cancellation at most once,
// only on its key, never at a stale reading; due times spaced as the
// tokens require). Options are mapped as runConformance maps them, except
// that the keyed-store options are ignored when a clock is given with
// them, as the reservation checks give WithShards(1) (and at times
// WithMaxKeys(2)) to every variant: a Redis store has no shards and bounds
// no keys, and those checks compare two limiters of this variant, so the
// options change nothing on either side. Given alone, as the StoreOptions
// check gives them, they are refused.
func TestReserverConformance(t *testing.T) {
	client := newClient(t, redistest.Start(t))
	newKeyed := func(rule admit.Rule, opts ...admit.Option) (admit.KeyedLimiter, error) {
		s, err := plumb.ResolveLimiter("redisstore", opts)
		if err != nil {
			return nil, err
		}
		if names := s.StoreOptions(); names != "" && s.Clock == clock.System() {
			return nil, fmt.Errorf("%w: %s: a Redis store keeps no keys in this process", admit.ErrUnsupported, names)
		}
		ropts := []redisstore.Option{freshPrefix("reserve-conformance")}
		if s.Clock != clock.System() {
			ropts = append(ropts, redisstore.WithTestClock(s.Clock))
		}
		l, err := redisstore.New(client, rule, ropts...)
		if err != nil {
			return nil, err
		}
		return redisstore.NewKeyedReserver(l, redisstore.Policy{
			Mode:    redisstore.FailClosed,
			Timeout: time.Minute,
			OnError: func(key string, err error) { t.Errorf("key %q: %v", key, err) },
		})
	}
	conformance.Run(t, conformance.Variant{
		Name:     "redisstore-reserver",
		New:      newKeyed,
		Supports: func(a admit.Algorithm) bool { return a == admit.TokenBucket },
		Remote:   true,
	})
}

// TestNewKeyedReserverErrors: only a limiter of one token bucket has
// reservations; the policy is checked as NewKeyed checks it.
func TestNewKeyedReserverErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c.Close()
	policy := redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Second}
	_, err := redisstore.NewKeyedReserver(nil, policy)
	assert.ErrorIs(t, err, admit.ErrInvalidOption)
	for _, alg := range algorithms[1:] {
		l, err := redisstore.New(c, admit.Rule{Algorithm: alg, Limit: 5, Window: time.Second})
		require.NoError(t, err)
		_, err = redisstore.NewKeyedReserver(l, policy)
		assert.ErrorIs(t, err, admit.ErrUnsupported, "%v", alg)
		assert.ErrorContains(t, err, "NewKeyed", "the error names the alternative")
	}
	tb := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Second}
	limits, err := admit.NewLimits(tb, admit.Rule{Algorithm: admit.TokenBucket, Limit: 50, Window: time.Minute})
	require.NoError(t, err)
	comp, err := redisstore.NewLimits(c, limits)
	require.NoError(t, err)
	_, err = redisstore.NewKeyedReserver(comp, policy)
	assert.ErrorIs(t, err, admit.ErrUnsupported, "a composite")
	l, err := redisstore.New(c, tb)
	require.NoError(t, err)
	_, err = redisstore.NewKeyedReserver(l, redisstore.Policy{Mode: redisstore.FailClosed})
	assert.ErrorIs(t, err, admit.ErrInvalidOption, "no Timeout")
	r, err := redisstore.NewKeyedReserver(l, policy)
	require.NoError(t, err)
	assert.Same(t, l, r.Limiter())
	assert.Equal(t, l.Limits(), r.Limits())
	var _ interface {
		admit.KeyedLimiter
		ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool)
		CancelReservation(key string, r admit.Reservation) bool
	} = r // what admit.WaitKeyN paces by reservation
}

// TestReserveDifferential compares a KeyedReserver, and a Limiter of the
// same rule and prefix deciding on the same keys, with the kernel over
// generated sequences: the kernel's Allow and ReserveHold, CancelHold and
// Show, as the local stores call them, with the clock moving forwards and
// backwards. The Limiter's decisions are the kernel's Allow without Show
// (they do not show the hold their readings; see CancelReservation), and
// after every step a probe through the Limiter finds each key's bucket as
// the kernel has it: so a change to the token bucket's script or state
// encoding that the reservation script does not follow is caught here.
func TestReserveDifferential(t *testing.T) {
	client := newClient(t, redistest.Start(t))
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 10).Draw(rt, "limit")
		window := time.Duration(rapid.Int64Range(int64(limit), int64(time.Second)).Draw(rt, "window"))
		rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: limit, Window: window}
		k := kernel.NewTokenBucket(rule)
		fake := clock.NewFake()
		fake.Set(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "start")))
		prefix := freshPrefix("reserve-diff")
		res := newReserver(t, client, rule, fake, prefix)
		plain, err := redisstore.New(client, rule, prefix, redisstore.WithTestClock(fake))
		require.NoError(rt, err)

		keys := []string{"a", "b"}
		states := map[string]*kernel.TokenBucketState{"a": {}, "b": {}}
		holds := map[string]*kernel.Hold{"a": {}, "b": {}}
		type made struct {
			key    string
			r      admit.Reservation
			ticket uint64        // the kernel's
			at     time.Duration // the reading it was made at
		}
		var reservations []made
		ctx := context.Background()
		for i := range rapid.IntRange(1, 50).Draw(rt, "ops") {
			now := fake.Now()
			key := keys[rapid.IntRange(0, 3).Draw(rt, "key")/3] // mostly "a"
			s, h := states[key], holds[key]
			n := rapid.IntRange(1, limit).Draw(rt, "n")
			if rapid.IntRange(0, 9).Draw(rt, "edge") == 0 {
				n = rapid.SampledFrom([]int{-1, 0, limit + 1}).Draw(rt, "n edge")
			}
			slot := window / time.Duration(limit)
			switch op := rapid.IntRange(0, 11).Draw(rt, "op"); op {
			case 0:
				fake.Advance(time.Duration(rapid.Int64Range(0, int64(2*window)).Draw(rt, "advance")))
			case 10:
				fake.Advance(time.Duration(rapid.Int64Range(0, int64(2*slot)).Draw(rt, "nudge")))
			case 1:
				fake.Set(now - time.Duration(rapid.Int64Range(0, int64(window)).Draw(rt, "back")))
			case 2:
				want := k.Allow(s, now, n)
				k.Show(h, *s, now)
				if got := res.AllowN(key, n); got != want {
					rt.Fatalf("op %d: reserver AllowN(t=%v, %q, %d) = %+v, want %+v", i, now, key, n, got, want)
				}
			case 3:
				want := k.Allow(s, now, n)
				got, err := plain.AllowN(ctx, key, n)
				require.NoError(rt, err)
				if got != want {
					rt.Fatalf("op %d: Limiter AllowN(t=%v, %q, %d) = %+v, want %+v", i, now, key, n, got, want)
				}
			case 4, 5, 6:
				maxWait := rapid.SampledFrom([]time.Duration{admit.Never, admit.Never, 0, -1, window / 2, window, 3 * window}).Draw(rt, "maxWait")
				wantD, wantOK, ticket := k.ReserveHold(s, h, now, n, maxWait)
				r, ok := res.ReserveN(key, n, maxWait)
				if r.Delay != wantD || ok != wantOK || r.N() != n || (reservation.Ticket(r) != 0) != (ticket != 0) {
					rt.Fatalf("op %d: ReserveN(t=%v, %q, %d, %v) = %v, %v, ticket %d; want %v, %v, held %v", i, now, key, n, maxWait, r.Delay, ok, reservation.Ticket(r), wantD, wantOK, ticket != 0)
				}
				reservations = append(reservations, made{key, r, ticket, now})
			case 7, 8, 11:
				if len(reservations) == 0 {
					continue
				}
				m := reservations[len(reservations)-1-rapid.IntRange(0, min(3, len(reservations)-1)).Draw(rt, "reservation")] // mostly recent ones
				if op == 11 && m.r.Delay != admit.Never {
					// at the edge of its due reading, after a reading at
					// or past it, or none
					due := m.at + m.r.Delay
					if rapid.Bool().Draw(rt, "seen") {
						seen := due + time.Duration(rapid.IntRange(-1, 1).Draw(rt, "seen at"))
						want := k.Allow(s, seen, 0)
						k.Show(h, *s, seen)
						fake.Set(seen)
						if got := res.AllowN(key, 0); got != want {
							rt.Fatalf("op %d: reserver probe(t=%v, %q) = %+v, want %+v", i, seen, key, got, want)
						}
					}
					now = due + time.Duration(rapid.IntRange(-2, 1).Draw(rt, "edge"))
					fake.Set(now)
				}
				var want, drop bool
				if m.ticket != 0 {
					want, drop = k.CancelHold(s, h, m.ticket, now)
					if drop {
						*h = kernel.Hold{}
					}
				}
				if got := res.CancelReservation(key, m.r); got != want {
					rt.Fatalf("op %d: CancelReservation(t=%v, %q, reservation of %q with Delay %v) = %v, want %v", i, now, key, m.key, m.r.Delay, got, want)
				}
			case 9:
				want := k.Allow(s, now, 0)
				k.Show(h, *s, now)
				if got := res.AllowN(key, 0); got != want {
					rt.Fatalf("op %d: reserver probe(t=%v, %q) = %+v, want %+v", i, now, key, got, want)
				}
			}
			for _, key := range keys {
				s := *states[key]
				want := k.Allow(&s, fake.Now(), 0)
				got, err := plain.AllowN(ctx, key, 0)
				require.NoError(rt, err)
				if got != want {
					rt.Fatalf("op %d: a probe of %q through the Limiter at t=%v = %+v, the kernel's %+v", i, key, fake.Now(), got, want)
				}
			}
		}
	})
}

// recorder is a KeyedReserver that records the Delay of every reservation
// it hands out.
type recorder struct {
	*redisstore.KeyedReserver
	mu     sync.Mutex
	delays []time.Duration
}

func (r *recorder) ReserveN(key string, n int, maxWait time.Duration) (admit.Reservation, bool) {
	res, ok := r.KeyedReserver.ReserveN(key, n, maxWait)
	r.mu.Lock()
	r.delays = append(r.delays, res.Delay)
	r.mu.Unlock()
	return res, ok
}

// slots returns the Delays of count waiters of one token behind a bucket
// of rule emptied at a frozen reading: slot k is due ceil(k·Window/Limit)
// after it, each a token's interval after the last (to the nanosecond).
func slots(rule admit.Rule, count int) []time.Duration {
	var want []time.Duration
	for k := 1; k <= count; k++ {
		units := int64(k) * int64(rule.Window)
		want = append(want, time.Duration((units+int64(rule.Limit)-1)/int64(rule.Limit)))
	}
	return want
}

// TestWaitKeyPaces: admit.WaitKey paces waiters through a KeyedReserver.
// Goroutines on separate connections wait on one key behind an empty
// bucket with the clock frozen: each is handed a slot of its own, the
// first ones a token's interval apart, and no two are admitted for one
// token (the bucket is left owing exactly their tokens).
func TestWaitKeyPaces(t *testing.T) {
	srv := redistest.Start(t)
	for _, text := range []string{"token-bucket,1000,1s", "token-bucket,3,10ms"} {
		t.Run("rule="+text, func(t *testing.T) {
			rule, err := admit.ParseRule(text)
			require.NoError(t, err)
			fake := clock.NewFake()
			fake.Set(time.Hour)
			prefix := freshPrefix("paces")
			const waiters = 16
			first := newReserver(t, newClient(t, srv), rule, fake, prefix)
			require.True(t, first.AllowN("k", rule.Limit).Allowed, "empty the bucket")
			var (
				wg  sync.WaitGroup
				mu  sync.Mutex
				all []time.Duration
			)
			for range waiters {
				rec := &recorder{KeyedReserver: newReserver(t, newClient(t, srv), rule, fake, prefix)}
				wg.Go(func() {
					assert.NoError(t, admit.WaitKey(context.Background(), rec, "k"))
					mu.Lock()
					all = append(all, rec.delays...)
					mu.Unlock()
				})
			}
			wg.Wait()
			slices.Sort(all)
			assert.Equal(t, slots(rule, waiters), all, "one slot per waiter")
			d := first.AllowN("k", 0)
			assert.Zero(t, d.Remaining, "the bucket owes the waiters' tokens")
			assert.Equal(t, slots(rule, waiters+rule.Limit)[waiters+rule.Limit-1], d.ResetAfter, "and no more")
		})
	}
}

// TestWaitKeyTwoProcesses: two processes, each with four goroutines on
// connections of their own, wait with admit.WaitKey on one key behind an
// empty bucket, their clocks frozen at the same reading (passed to both):
// the union of their reservations is one slot per waiter, spaced by the
// rule's interval, never two waiters on one token.
func TestWaitKeyTwoProcesses(t *testing.T) {
	srv := redistest.Start(t)
	rule, err := admit.ParseRule("token-bucket,3,10ms")
	require.NoError(t, err)
	const (
		procs   = 2
		workers = 4
		each    = 5
		frozen  = time.Hour + 7
	)
	const prefix = "procs-reserve:"
	fake := clock.NewFake()
	fake.Set(frozen)
	first := newReserver(t, newClient(t, srv), rule, fake, redisstore.WithPrefix(prefix))

	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		lines *bufio.Scanner
	}
	var ps []proc
	for range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWaitKeyHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "ADMIT_REDIS_RESERVE_HELPER="+strings.Join([]string{
			srv.Addr, prefix, rule.String(), strconv.FormatInt(int64(frozen), 10), strconv.Itoa(workers), strconv.Itoa(each)}, "|"))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		ps = append(ps, proc{cmd, stdin, bufio.NewScanner(stdout)})
	}
	readLine := func(p proc, prefix string) string {
		for p.lines.Scan() {
			if line := p.lines.Text(); strings.HasPrefix(line, prefix) {
				return strings.TrimPrefix(line, prefix)
			}
		}
		t.Fatalf("a helper process ended before printing %q", prefix)
		return ""
	}
	for _, p := range ps {
		readLine(p, "ready")
	}
	// Emptied once both processes are ready (the key, written on a fake
	// clock, lives a day: see WithTestClock).
	require.True(t, first.AllowN("k", rule.Limit).Allowed, "empty the bucket")
	for _, p := range ps {
		_, err := io.WriteString(p.stdin, "go\n")
		require.NoError(t, err)
	}
	var all []time.Duration
	for i, p := range ps {
		var mine []time.Duration
		for _, f := range strings.Fields(readLine(p, "delays=")) {
			d, err := strconv.ParseInt(f, 10, 64)
			require.NoError(t, err)
			mine = append(mine, time.Duration(d))
		}
		for p.lines.Scan() { // drain, so that Wait may close the pipe
		}
		require.NoError(t, p.cmd.Wait(), "process %d", i)
		assert.Len(t, mine, workers*each, "process %d's reservations", i)
		all = append(all, mine...)
	}
	slices.Sort(all)
	assert.Equal(t, slots(rule, procs*workers*each), all, "one slot per waiter, across both processes")
}

// TestWaitKeyHelperProcess is one of TestWaitKeyTwoProcesses's processes;
// it does nothing when run as a test.
func TestWaitKeyHelperProcess(t *testing.T) {
	spec := os.Getenv("ADMIT_REDIS_RESERVE_HELPER")
	if spec == "" {
		t.Skip("run by TestWaitKeyTwoProcesses")
	}
	parts := strings.Split(spec, "|")
	require.Len(t, parts, 6)
	rule, err := admit.ParseRule(parts[2])
	require.NoError(t, err)
	reading, err := strconv.ParseInt(parts[3], 10, 64)
	require.NoError(t, err)
	workers, err := strconv.Atoi(parts[4])
	require.NoError(t, err)
	each, err := strconv.Atoi(parts[5])
	require.NoError(t, err)
	fake := clock.NewFake()
	fake.Set(time.Duration(reading))
	var recs []*recorder
	for range workers {
		c := redis.NewClient(&redis.Options{Addr: parts[0], PoolSize: 1, ContextTimeoutEnabled: true})
		defer c.Close()
		require.NoError(t, c.Ping(context.Background()).Err())
		recs = append(recs, &recorder{KeyedReserver: newReserver(t, c, rule, fake, redisstore.WithPrefix(parts[1]))})
	}
	fmt.Println("ready")
	_, err = bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, err)
	var wg sync.WaitGroup
	for _, rec := range recs {
		wg.Go(func() {
			for range each {
				assert.NoError(t, admit.WaitKey(context.Background(), rec, "k"))
			}
		})
	}
	wg.Wait()
	var out []string
	for _, rec := range recs {
		for _, d := range rec.delays {
			out = append(out, strconv.FormatInt(int64(d), 10))
		}
	}
	fmt.Printf("delays=%s\n", strings.Join(out, " "))
}

// TestCancelReservation walks through the rules of a cancellation across
// clients: it gives back only the latest reservation's tokens, at most
// once, only on its key, from any KeyedReserver of the same prefix and
// rule, never after an admission (through a plain Limiter or another
// reserver) or another reservation, never once a reading found the tokens
// due, and never after the key was reset.
func TestCancelReservation(t *testing.T) {
	srv := redistest.Start(t)
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: 2 * time.Second} // a token a second
	ctx := context.Background()
	setup := func(t *testing.T) (a, b *redisstore.KeyedReserver, plain *redisstore.Limiter, fake *clock.Fake, r admit.Reservation) {
		fake = clock.NewFake()
		fake.Set(time.Hour)
		prefix := freshPrefix("cancel")
		a = newReserver(t, newClient(t, srv), rule, fake, prefix)
		b = newReserver(t, newClient(t, srv), rule, fake, prefix)
		plain = b.Limiter()
		require.True(t, a.AllowN("k", 2).Allowed)
		r, ok := a.ReserveN("k", 1, admit.Never)
		require.True(t, ok)
		require.Equal(t, time.Second, r.Delay)
		return a, b, plain, fake, r
	}
	t.Run("FromAnotherClient", func(t *testing.T) {
		a, b, _, _, r := setup(t)
		assert.False(t, a.CancelReservation("other", r), "not on another key")
		assert.True(t, b.CancelReservation("k", r), "any reserver of the prefix")
		assert.False(t, a.CancelReservation("k", r), "at most once")
		r2, ok := a.ReserveN("k", 1, admit.Never)
		require.True(t, ok)
		assert.Equal(t, time.Second, r2.Delay, "the token was given back")
		assert.False(t, a.CancelReservation("k", r), "the first, again, does not cancel the second")
		assert.True(t, a.CancelReservation("k", r2))
	})
	t.Run("AfterAnAdmission", func(t *testing.T) {
		for _, by := range []string{"limiter", "reserver"} {
			a, b, plain, fake, r := setup(t)
			fake.Advance(2 * time.Second) // both tokens back: 1 s after r is due
			if by == "limiter" {
				d, err := plain.AllowN(ctx, "k", 1)
				require.NoError(t, err)
				require.True(t, d.Allowed)
			} else {
				require.True(t, b.AllowN("k", 1).Allowed)
			}
			fake.Set(time.Hour) // a stale reading, before r is due
			assert.False(t, a.CancelReservation("k", r), "an admission by a %s came since", by)
		}
	})
	t.Run("AfterAnotherReservation", func(t *testing.T) {
		a, b, _, _, r := setup(t)
		r2, ok := b.ReserveN("k", 1, admit.Never)
		require.True(t, ok)
		assert.Equal(t, 2*time.Second, r2.Delay)
		assert.False(t, a.CancelReservation("k", r), "its token is promised to the later slot")
		assert.True(t, a.CancelReservation("k", r2), "the latest may be cancelled")
		assert.False(t, a.CancelReservation("k", r), "and the first still not")
	})
	t.Run("StaleReading", func(t *testing.T) {
		for _, n := range []int{0, 1} {
			a, b, _, fake, r := setup(t)
			fake.Set(time.Hour + r.Delay + 100*time.Millisecond)
			require.Equal(t, n == 0, b.AllowN("k", n).Allowed, "a probe, or a denial, that sees the token due")
			fake.Set(time.Hour + r.Delay/2)
			assert.False(t, a.CancelReservation("k", r), "AllowN(%d) saw the token due: a cancellation at an older reading is stale", n)
		}
	})
	t.Run("Due", func(t *testing.T) {
		a, _, _, fake, r := setup(t)
		fake.Advance(r.Delay)
		assert.False(t, a.CancelReservation("k", r), "due: spent")
		fake.Set(time.Hour)
		assert.False(t, a.CancelReservation("k", r), "and the hold is gone")
	})
	t.Run("AfterReset", func(t *testing.T) {
		a, _, plain, _, r := setup(t)
		require.NoError(t, plain.Reset(ctx, "k"))
		n, err := newClient(t, srv).Exists(ctx, plain.Key("k"), plain.Key("k")+":hold").Result()
		require.NoError(t, err)
		assert.Zero(t, n, "Reset deletes the state and the hold")
		assert.False(t, a.CancelReservation("k", r))
		assert.True(t, a.AllowN("k", 2).Allowed, "a fresh bucket")
	})
	t.Run("AfterResetSameState", func(t *testing.T) {
		// After the reset a plain Limiter admits two at the reading the
		// reservation is due, which writes the very state the reservation
		// left (due at 1h+3s); a cancellation presented at an older reading,
		// which plain decisions do not show the hold, would give a token of
		// theirs back if the hold had outlived the reset.
		a, _, plain, fake, r := setup(t)
		require.NoError(t, plain.Reset(ctx, "k"))
		fake.Set(time.Hour + r.Delay)
		d, err := plain.AllowN(ctx, "k", 2)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		fake.Set(time.Hour + r.Delay/2)
		assert.False(t, a.CancelReservation("k", r), "a reservation made before the reset")
		d, err = plain.AllowN(ctx, "k", 0)
		require.NoError(t, err)
		assert.Zero(t, d.Remaining, "the two admitted after the reset are still charged")
	})
	t.Run("NotHeld", func(t *testing.T) {
		a, _, _, _, _ := setup(t)
		fake := clock.NewFake()
		c := newReserver(t, newClient(t, srv), rule, fake)
		now, ok := c.ReserveN("k", 1, admit.Never)
		require.True(t, ok)
		assert.Zero(t, now.Delay)
		assert.False(t, c.CancelReservation("k", now), "a reservation due at once is not cancelled")
		refused, ok := a.ReserveN("k", 1, time.Second/2)
		assert.False(t, ok)
		assert.Equal(t, 2*time.Second, refused.Delay, "the wait it would need")
		assert.False(t, a.CancelReservation("k", refused))
		assert.False(t, a.CancelReservation("k", admit.Reservation{}))
	})
}

// TestReserveHoldKey: a reservation that must wait leaves a hold next to
// the state, in the same hash tag, expiring with it; a cancellation, and
// any decision that finds it dead, deletes it.
func TestReserveHoldKey(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	fake := clock.NewFake()
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 1, Window: 10 * time.Second}
	r := newReserver(t, c, rule, fake, redisstore.WithPrefix("hold:"))
	ctx := context.Background()
	hold := "hold:{k}:hold"
	require.Equal(t, "hold:{k}", r.Limiter().Key("k"))
	require.True(t, r.Allow("k").Allowed)
	assert.Zero(t, c.Exists(ctx, hold).Val(), "no hold without a reservation that waits")
	serverTime := func() time.Duration {
		now, err := c.Time(ctx).Result()
		require.NoError(t, err)
		return time.Duration(now.UnixMilli()) * time.Millisecond
	}
	before := serverTime()
	res, ok := r.ReserveN("k", 1, admit.Never)
	require.True(t, ok)
	after := serverTime()
	assert.Equal(t, int64(1), c.Exists(ctx, hold).Val())
	assert.Greater(t, c.PTTL(ctx, hold).Val(), 10*time.Second, "the hold lives as long as the state needs")
	// The two expiry times (PEXPIRETIME, in the server's milliseconds),
	// which the script set one after the other with the same time to live:
	// the hold's is not before the state's, and at most the call's time on
	// the server's clock after it (the server's clock may run on within the
	// script, however long a busy machine makes it take).
	at, stateAt := c.PExpireTime(ctx, hold).Val(), c.PExpireTime(ctx, "hold:{k}").Val()
	assert.Positive(t, at)
	assert.True(t, stateAt <= at && at-stateAt <= after-before,
		"the hold expires with the state: at %v, the state at %v, the call took [%v, %v] on the server's clock", at, stateAt, before, after)
	require.True(t, r.CancelReservation("k", res))
	assert.Zero(t, c.Exists(ctx, hold).Val(), "a cancellation deletes the hold")

	_, ok = r.ReserveN("k", 1, admit.Never)
	require.True(t, ok)
	fake.Advance(10 * time.Second)
	r.AllowN("k", 0)
	assert.Zero(t, c.Exists(ctx, hold).Val(), "a probe that finds the tokens due deletes the hold")
}

// TestReserveFailures: when Redis is down, ReserveN decides as each Policy
// says, CancelReservation gives nothing back, and OnError hears of every
// failure; a reservation Policy.Local made is cancelled by Policy.Local.
func TestReserveFailures(t *testing.T) {
	rule := admit.Rule{Algorithm: admit.TokenBucket, Limit: 5, Window: time.Hour}
	for _, mode := range []redisstore.Mode{redisstore.FailClosed, redisstore.FailOpen, redisstore.FailLocal} {
		t.Run("mode="+mode.String(), func(t *testing.T) {
			srv := redistest.Start(t)
			fake := clock.NewFake()
			var (
				local admit.KeyedLimiter
				err   error
			)
			if mode == redisstore.FailLocal {
				local, err = locked.New(admit.Rule{Algorithm: admit.TokenBucket, Limit: 2, Window: time.Hour}, admit.WithClock(fake))
				require.NoError(t, err)
			}
			errs := new(errorLog)
			breakerClock := clock.NewFake()
			c := newClient(t, srv)
			l, err := redisstore.New(c, rule, redisstore.WithTestClock(fake))
			require.NoError(t, err)
			r, err := redisstore.NewKeyedReserver(l, redisstore.Policy{Mode: mode, Timeout: upTimeout, Local: local, OnError: errs.record, Clock: breakerClock})
			require.NoError(t, err)
			require.True(t, r.AllowN("k", 5).Allowed)
			held, ok := r.ReserveN("k", 1, admit.Never)
			require.True(t, ok)
			require.Equal(t, 12*time.Minute, held.Delay)
			require.Empty(t, errs.take())

			srv.Stop()
			assert.False(t, r.CancelReservation("k", held), "nothing is given back while Redis is down")
			got, ok := r.ReserveN("k", 1, admit.Never)
			probe, probeOK := r.ReserveN("k", 0, admit.Never)
			never, neverOK := r.ReserveN("k", 6, admit.Never)
			assert.Equal(t, admit.Never, never.Delay)
			assert.False(t, neverOK, "n > Limit never passes")
			assert.Zero(t, probe.Delay)
			assert.True(t, probeOK, "a probe passes")
			switch mode {
			case redisstore.FailClosed:
				assert.False(t, ok)
				assert.Equal(t, 12*time.Minute, got.Delay, "one token's interval: admit.WaitKey asks again then")
			case redisstore.FailOpen:
				assert.True(t, ok)
				assert.Zero(t, got.Delay, "an immediate reservation")
				assert.False(t, r.CancelReservation("k", got), "that took nothing")
			case redisstore.FailLocal:
				assert.True(t, ok)
				assert.Zero(t, got.Delay, "the local bucket's first token")
				_, ok = r.ReserveN("k", 1, admit.Never)
				require.True(t, ok)
				third, ok := r.ReserveN("k", 1, admit.Never)
				require.True(t, ok)
				assert.Equal(t, 30*time.Minute, third.Delay, "the local bucket's reservation")
				assert.True(t, r.CancelReservation("k", third), "cancelled by the local bucket")
				assert.False(t, r.CancelReservation("k", third), "once")
			}
			down := errs.take()
			require.NotEmpty(t, down, "every failure reaches OnError")
			for _, err := range down {
				assert.ErrorContains(t, err, `key "k"`)
			}

			srv.Start()
			redistest.Await(t, "the client reconnects", func() bool { return c.Ping(context.Background()).Err() == nil })
			breakerClock.Advance(redisstore.DefaultBackoff)
			errs.take()
			again, ok := r.ReserveN("k", 1, admit.Never)
			assert.Empty(t, errs.take(), "the probe after the backoff")
			assert.True(t, ok)
			assert.Zero(t, again.Delay, "from Redis again, which restarted empty")
		})
	}
}

// BenchmarkReserver measures a KeyedReserver's calls, serially, on a
// redis-server started for the run on loopback, server time, over 1,000
// keys: Allow beside Keyed's Allow (which a KeyedReserver's pays for
// showing the key's hold its reading), and a reservation that must wait
// with its cancellation, the path of an admit.WaitKey whose context ends
// (two round trips). redis-ns/op is the time the server spent in scripts
// per operation:
//
//	cd redisstore && go test -run '^$' -bench BenchmarkReserver -benchtime 10000x -count 3 .
func BenchmarkReserver(b *testing.B) {
	srv := redistest.Start(b)
	client := newClient(b, srv)
	ctx := context.Background()
	const keys = 1000
	names := make([]string, keys)
	for i := range names {
		names[i] = "user:" + strconv.Itoa(i)
	}
	policy := redisstore.Policy{Mode: redisstore.FailClosed, Timeout: time.Second, OnError: func(key string, err error) { b.Fatalf("key %q: %v", key, err) }}
	newLimiter := func(limit int) *redisstore.Limiter {
		l, err := redisstore.New(client, admit.Rule{Algorithm: admit.TokenBucket, Limit: limit, Window: time.Hour}, freshPrefix("bench-reserve"))
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	run := func(b *testing.B, op func(key string)) {
		for _, k := range names[:10] { // load the script before the clock starts
			op(k)
		}
		if err := client.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			op(names[i%keys])
		}
		b.StopTimer()
		reportRedisTime(b, client)
	}
	b.Run("impl=keyed/op=allow", func(b *testing.B) {
		k, err := redisstore.NewKeyed(newLimiter(1_000_000), policy)
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(key string) { k.Allow(key) })
	})
	b.Run("impl=reserver/op=allow", func(b *testing.B) {
		r, err := redisstore.NewKeyedReserver(newLimiter(1_000_000), policy)
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(key string) { r.Allow(key) })
	})
	b.Run("impl=reserver/op=reserve-cancel", func(b *testing.B) {
		r, err := redisstore.NewKeyedReserver(newLimiter(1), policy)
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range names {
			r.Allow(k) // empty every bucket: each reservation must wait
		}
		run(b, func(key string) {
			res, ok := r.ReserveN(key, 1, admit.Never)
			if !ok || res.Delay <= 0 || !r.CancelReservation(key, res) {
				b.Fatalf("key %q: a reservation that waits, cancelled before it is due: %v, %v", key, res.Delay, ok)
			}
		})
	})
}
