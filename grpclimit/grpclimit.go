package grpclimit

import (
	"context"
	"slices"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/clientip"
	"github.com/admit-go/admit/internal/limitopt"
	"github.com/admit-go/admit/internal/ratehdr"
	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/policy"
)

// Interceptor rate-limits the calls a gRPC server receives: it derives each
// call's key, asks the limiter (or the Service) to admit it, and either
// passes the call to its handler or refuses it with
// codes.ResourceExhausted, a RetryInfo and a QuotaFailure (see the package
// doc, "Denials"). Build one with [New] over an [admit.KeyedLimiter] or
// [ForService] over a [policy.Service], and install
// [Interceptor.UnaryServerInterceptor] and
// [Interceptor.StreamServerInterceptor]; [Interceptor.Limit] makes it a
// Limiter of go-grpc-middleware's ratelimit package too. The zero
// Interceptor is not usable.
//
// An Interceptor is immutable and safe for concurrent use. Every method it
// intercepts shares its limiter: a call to any of them draws on the same
// budget for the same key.
type Interceptor struct{ core }

// Client rate-limits the calls a gRPC client sends: install
// [Client.UnaryClientInterceptor] and [Client.StreamClientInterceptor] on
// a connection, and a call its limiter denies fails at once with
// codes.ResourceExhausted, as a server's denial would, without being sent.
// Build one with [NewClient]; the zero Client is not usable. A Client is
// immutable and safe for concurrent use.
type Client struct{ core }

// core is what the server and client interceptors share: the key, the
// limiter or Service, the quotas and the instrument.
type core struct {
	cfg    config
	client bool // NewClient's: metadata is outgoing, and there is no peer

	dec limitopt.Decider // the limiter or Service, its quotas, the instrument

	key     KeyFunc
	parts   []KeyPart
	proxies *clientip.Proxies
}

// New returns an Interceptor that limits the calls a server receives with
// lim, one budget per key (the peer's IP address unless an option says
// otherwise). The quota is named "default" ([WithPolicyName] or
// [WithPolicy] name it otherwise); its rule, for the ratelimit-policy
// metadata and a denial's QuotaFailure, is the limiter's own when it has a
// Rule method (every store of packages atomic, locked and sharded has one)
// or Limits. Over a limiter of composite limits (an [admit.CompositeStore],
// or any KeyedLimiter with Limits and AllowNWhich) each rule is a policy of
// its own, named after the quota and the rule's text
// ("default:token-bucket,10,1s"), and a denial names the rule that denied,
// as httplimit does.
//
// A nil lim, a bad option, options that do not apply to a KeyedLimiter
// ([WithAPI]) and [WithPolicy] over a composite, whose one rule could not
// describe it, are errors wrapping [admit.ErrInvalidOption].
func New(lim admit.KeyedLimiter, opts ...Option) (*Interceptor, error) {
	i := &Interceptor{}
	if err := i.build("New", opts, false); err != nil {
		return nil, err
	}
	if err := i.limiter("New", lim); err != nil {
		return nil, err
	}
	return i, nil
}

// NewClient returns a Client that limits the calls a client sends with lim,
// one budget per key: by default the call's full method ([FullMethod]), so
// that each method has its own budget; [WithKey] and [WithKeyFrom] (with
// FullMethod and [Metadata] of the outgoing metadata) choose otherwise. The
// quota is named and described as for [New].
//
// A nil lim, a bad option and options that do not apply to outgoing calls
// ([PeerIP] and [WithTrustedProxies]: a call has no peer before it is
// sent; [WithAPI]; [WithAdmittedMetadata]) are errors wrapping
// [admit.ErrInvalidOption].
func NewClient(lim admit.KeyedLimiter, opts ...Option) (*Client, error) {
	c := &Client{core{client: true}}
	if err := c.build("NewClient", opts, true); err != nil {
		return nil, err
	}
	if err := c.limiter("NewClient", lim); err != nil {
		return nil, err
	}
	return c, nil
}

// ForService returns an Interceptor that limits the calls a server
// receives with svc: each call is checked as svc.CheckNWhich(key, api, 1),
// the key being the user (the peer's IP address unless an option says
// otherwise) and api the full method name, "/package.Service/Method"
// ([WithAPI] maps it otherwise). The quota named in the metadata and the
// QuotaFailure is the rule book's entry that applied, as
// [policy.Book.EntryFor] names it ("default", "api./pkg.Svc/Get",
// "user.vip-1"); an entry of composite limits is one policy per rule, and
// the rule that bound the decision is the one reported. The quotas of a
// book are rendered once, when the interceptor first sees the book (at
// ForService, and after each [policy.Service.Reload]).
//
// A nil svc, a bad option and options that do not apply to a Service
// ([WithPolicy], [WithPolicyName]) are errors wrapping
// [admit.ErrInvalidOption].
func ForService(svc *policy.Service, opts ...Option) (*Interceptor, error) {
	if svc == nil {
		return nil, invalid("ForService(nil, …); pass a *policy.Service from policy.NewService")
	}
	i := &Interceptor{}
	if err := i.build("ForService", opts, false); err != nil {
		return nil, err
	}
	i.dec.SetService(svc, i.cfg.Observer, "grpc")
	return i, nil
}

// methodAPI is the default API of a Service's call: the full method name.
func methodAPI(fullMethod string) string { return fullMethod }

// build applies opts and checks what every interceptor needs; ctor names
// the constructor, New, NewClient or ForService, whose options differ.
func (c *core) build(ctor string, opts []Option, client bool) error {
	for i, opt := range opts {
		if opt == nil {
			return invalid("option %d is nil", i)
		}
		if err := opt(&c.cfg); err != nil {
			return err
		}
	}
	cfg := &c.cfg
	c.proxies, c.parts = cfg.Proxies, cfg.Parts
	if client {
		switch {
		case cfg.Proxies != nil:
			return invalid("WithTrustedProxies applies to a server's calls; an outgoing call has no peer address to key by")
		case hasIP(cfg.Parts):
			return invalid("NewClient: PeerIP() is the address of a server's caller, which an outgoing call does not have; key by FullMethod() or Metadata(…)")
		case cfg.api != nil:
			return invalid("WithAPI applies to ForService; a KeyedLimiter has one budget per key, whatever the API")
		case cfg.admittedMD:
			return invalid("WithAdmittedMetadata applies to a server's interceptors, which send metadata to the caller; a Client's caller gets the numbers in the error of a denial")
		}
	}
	switch {
	case ctor == "New" && cfg.api != nil:
		return invalid("WithAPI applies to ForService; a KeyedLimiter has one budget per key, whatever the API")
	case ctor == "ForService" && cfg.PolicyName != "":
		return invalid("%s applies to New and NewClient; a Service's quotas are the entries of its rule book", cfg.PolicyOpt)
	case ctor == "ForService" && cfg.api == nil:
		cfg.api = methodAPI
	}
	switch {
	case cfg.Key != nil:
		if cfg.Proxies != nil {
			return invalid("WithTrustedProxies configures the peer address, which WithKey's function does not use; leave one out")
		}
		c.key = cfg.Key
	case cfg.Parts != nil:
		if cfg.Proxies != nil && !hasIP(cfg.Parts) {
			return invalid("WithTrustedProxies configures the peer address, which WithKeyFrom's parts do not include; add PeerIP() or leave it out")
		}
		c.key = c.partsKey
	case client:
		c.parts = []KeyPart{FullMethod()}
		c.key = c.partsKey
	default:
		c.parts = []KeyPart{PeerIP()}
		c.key = c.partsKey
	}
	return nil
}

func hasIP(parts []KeyPart) bool {
	return slices.ContainsFunc(parts, func(p KeyPart) bool { return p.p.Kind == limitopt.PartIP })
}

// limiter sets lim as the limiter of New or NewClient, with its quota and
// instrument.
func (c *core) limiter(ctor string, lim admit.KeyedLimiter) error {
	if lim == nil {
		return invalid("%s(nil, …); pass a KeyedLimiter, such as the one sharded.New(rule) returns", ctor)
	}
	return c.dec.SetLimiter(pkg, lim, c.cfg.PolicyName, c.cfg.PolicyRule, c.cfg.Observer, "grpc")
}

// outcome is what the interceptors do with a call.
type outcome uint8

const (
	pass   outcome = iota // admitted, exempt, or let through by shadow mode
	deny                  // denied by the limiter: ResourceExhausted
	refuse                // without a key: InvalidArgument
)

// verdict is the decision about one call, and what the response needs to
// describe it. It is returned by value: no allocation.
type verdict struct {
	out     outcome
	decided bool // the limiter decided (not exempt, not unkeyed)
	d       admit.Decision
	q, p    *ratehdr.Quota // the quota, and its part that bound d
	key     string
	api     string
}

// decide decides one call to method: exemption, key, decision, shadow
// mode and the hook, and the observation.
func (c *core) decide(ctx context.Context, method string) verdict {
	cfg := &c.cfg
	if cfg.exempt != nil && cfg.exempt(ctx, method) {
		return verdict{out: pass}
	}
	var start time.Time
	if c.dec.Timed {
		start = time.Now()
	}
	key, ok := c.key(ctx, method)
	if !ok || key == "" || len(key) > MaxKeyBytes {
		if cfg.UnknownKey == "" {
			if cfg.shadow {
				if c.dec.Inst != nil {
					c.dec.Observe(observe.ShadowDenied, start)
				}
				if cfg.hook != nil {
					cfg.hook(ctx, Denial{FullMethod: method, Unkeyed: true})
				}
				return verdict{out: pass}
			}
			if c.dec.Inst != nil {
				c.dec.Observe(observe.Errored, start)
			}
			return verdict{out: refuse}
		}
		key = cfg.UnknownKey
	}

	v := verdict{decided: true, key: key}
	if c.dec.Service() {
		v.api = cfg.api(method)
	}
	v.q, v.p = c.dec.Decide(key, v.api, &v.d)
	switch {
	case v.d.Allowed:
		if c.dec.Inst != nil {
			c.dec.Observe(observe.Admitted, start)
		}
	case cfg.shadow:
		if c.dec.Inst != nil {
			c.dec.Observe(observe.ShadowDenied, start)
		}
		if cfg.hook != nil {
			cfg.hook(ctx, Denial{Key: key, API: v.api, FullMethod: method, Policy: v.p.Name, Decision: v.d})
		}
	default:
		if c.dec.Inst != nil {
			c.dec.Observe(observe.Denied, start)
		}
		v.out = deny
	}
	return v
}
