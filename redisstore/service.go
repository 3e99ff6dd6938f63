package redisstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/plumb"
	"github.com/admit-go/admit/policy"
)

// NewService returns a policy.Service that applies book with limiters in the
// Redis behind client: every process whose Service uses the same server,
// base prefix and book shares one budget per (user, API) pair, and two APIs
// never share one, whatever their rules.
//
// Each (limits, API) limiter of the Service is a [Keyed] limiter behind p
// over a [NewLimits] limiter of those limits, built with opts and with the
// API's own prefix: the base prefix ([WithPrefix]'s, or [DefaultPrefix]),
// then the API name with each ':', '{', '}' and '%' escaped as %3A, %7B, %7D
// and %25, then ':' (so "/orders" is "admit:/orders:", and the pair (u,
// "/orders") lives at "admit:/orders:{u}"). No API name can move a key's
// Cluster hash tag or reach another API's keys; a pair's key is the same
// under every rule, so the rules' tag in its state says which it was
// written under.
//
// A change of limits converts each pair's state in Redis on the pair's
// first decision under the new limits, as [WithCarry] does: with the
// strategy of the Service's latest Reload (policy.WithCarry's, by default
// policy.CarryConsumed), and with policy.CarryConsumed from NewService, so a
// process started with a changed book carries what its users spent under
// the old one. A Reload returns at once (it moves nothing; see
// policy.WithLimiterFactory), and a rolling deploy of a changed book, old
// and new processes sharing the keys, converts a key each time the other
// side touches it (docs/redis.md, "Changing a rule", bounds what that
// admits). So opts may not hold WithCarry: NewService returns an error
// wrapping [admit.ErrInvalidOption] for it, as for a
// policy.WithLimiterFactory among the options of [WithServiceOptions].
//
// p is the failure policy of every limiter: FailClosed or FailOpen. Its
// OnError is given errors that name the API. FailLocal is an error wrapping
// [admit.ErrUnsupported]: Policy.Local is one limiter, and a Service has a
// limiter per (limits, API). The options of policy.NewService (such as
// policy.WithObserver) are given with [WithServiceOptions]; [WithObserver]
// in opts observes each limiter under the labels of [Limiter]'s (Source
// "redis", Name its prefix).
//
// The Service's Reset returns an error wrapping [admit.ErrUnsupported], as
// Keyed has no Reset, whose failure would be silent: reset a pair with
// [Limiter.Reset] of a Limiter of the pair's prefix, which returns its
// error. NewService does not contact the server; an invalid book, option
// or rule (one that [NewLimits] refuses) is an error.
func NewService(client redis.Scripter, book *policy.Book, p Policy, opts ...Option) (*policy.Service, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: redisstore.NewService: the client is nil", admit.ErrInvalidOption)
	}
	if p.Mode == FailLocal {
		return nil, fmt.Errorf("%w: redisstore.NewService: Policy FailLocal asks one Local limiter, and a Service has a limiter for each (limits, API); choose FailClosed or FailOpen", admit.ErrUnsupported)
	}
	cfg := config{prefix: DefaultPrefix}
	var lopts []Option // opts less WithServiceOptions
	var svc []admit.Option
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: redisstore option %d is nil", admit.ErrInvalidOption, i)
		}
		var so *serviceOptions
		switch err := opt(&cfg); {
		case errors.As(err, &so):
			svc = append(svc, so.opts...)
		case err != nil:
			return nil, err
		default:
			lopts = append(lopts, opt)
		}
	}
	if set, err := plumb.Resolve(svc); err == nil && set.LimiterFactory != nil {
		// The Service's limiters are this function's; a factory of the
		// caller's would replace them, and Redis with them.
		return nil, fmt.Errorf("%w: redisstore.NewService: WithServiceOptions(policy.WithLimiterFactory(…)): NewService builds the Service's limiters in Redis itself; leave the factory out, or call policy.NewService with it", admit.ErrInvalidOption)
	}
	if cfg.carry != 0 {
		return nil, fmt.Errorf("%w: redisstore.NewService: WithCarry(%v): the Service gives each limiter the strategy of its latest Reload (policy.WithCarry, policy.CarryConsumed by default); leave WithCarry out", admit.ErrInvalidOption, cfg.carry)
	}
	base := cfg.prefix
	// A proof's limiter is discarded: it gets no WithObserver, whose
	// Instrument would be a series of no API.
	var quiet []Option
	for _, o := range lopts {
		var c config
		_ = o(&c) // each returned nil above
		if c.observer == nil {
			quiet = append(quiet, o)
		}
	}
	factory := func(t policy.Target) (admit.KeyedLimiter, error) {
		o := lopts
		if t.Proof {
			o = quiet
		}
		o = append(slices.Clip(o), WithPrefix(servicePrefix(base, t.API)), WithCarry(t.Carry))
		l, err := NewLimits(client, t.Limits, o...)
		if err != nil {
			return nil, err
		}
		kp := p
		if p.OnError != nil {
			api := t.API
			kp.OnError = func(key string, err error) { p.OnError(key, fmt.Errorf("API %q: %w", api, err)) }
		}
		return NewKeyed(l, kp)
	}
	return policy.NewService(book, append(svc, policy.WithLimiterFactory(factory))...)
}

// WithServiceOptions passes opts to policy.NewService when [NewService]
// builds its Service: policy.WithObserver, say. Options that configure the
// limiters of this process (policy.WithFactory, admit.WithShards,
// admit.WithClock) are refused there, as policy.WithLimiterFactory says:
// give the limiters' clock with [WithClock]. It is an option of NewService
// only: [New] and [NewLimits] refuse it with an error wrapping
// [admit.ErrUnsupported].
func WithServiceOptions(opts ...admit.Option) Option {
	opts = slices.Clone(opts)
	// The Option cannot set a field of config, which the limiters read; it
	// reports itself instead, as an error that NewService recognises and
	// that New and NewLimits return as it is.
	return func(*config) error { return &serviceOptions{opts: opts} }
}

// serviceOptions is how a WithServiceOptions Option reaches NewService: the
// error it returns when applied, which carries its options.
type serviceOptions struct{ opts []admit.Option }

func (*serviceOptions) Error() string {
	return admit.ErrUnsupported.Error() + ": redisstore.WithServiceOptions configures a policy.Service; pass it to redisstore.NewService, not to New or NewLimits"
}

func (*serviceOptions) Unwrap() error { return admit.ErrUnsupported }

// servicePrefix returns the key prefix of api's limiters under the base
// prefix: base, then api with ':', '{', '}' and '%' escaped as %XX, then
// ':'. The escaped name holds no ':', so the first ':' after base ends it,
// and distinct APIs get distinct prefixes, none a prefix of another's keys.
func servicePrefix(base, api string) string {
	var b strings.Builder
	b.Grow(len(base) + len(api) + 1)
	b.WriteString(base)
	for i := range len(api) {
		switch c := api[i]; c {
		case ':', '{', '}', '%':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(':')
	return b.String()
}
