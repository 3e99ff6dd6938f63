// Package ratehdr renders the values of the RateLimit and RateLimit-Policy
// fields of draft-ietf-httpapi-ratelimit-headers-10 (structured-field lists,
// RFC 9651), and the draft's quota-exceeded problem body, for httplimit's
// HTTP headers and grpclimit's gRPC metadata, which carry the same text.
// Each package documents the fields for its users (the package doc of
// httplimit, "Headers" and "Composite limits").
//
// A [Quota] is rendered once, when a middleware is built or, for a
// policy.Service, once per entry of each book (package bookquota keeps
// those); what a decision adds (r and t) is appended into the caller's
// buffer, so that rendering a decision allocates nothing here.
package ratehdr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/clientip"
	"github.com/admit-go/admit/observe"
)

// ProblemType is the type of the problem body of a denial: the
// quota-exceeded problem type of draft-ietf-httpapi-ratelimit-headers-10,
// section 5.1. Its "violated-policies" member names the quota.
const ProblemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// problemEnd closes the problem body after the retry seconds.
const problemEnd = `s."}`

// Quota is one policy as the fields render it, built once: for a
// KeyedLimiter when the middleware is built, for a Service once per entry of
// each book. It is immutable.
//
// A composite (Limits of two or more rules) is one Quota whose Parts are the
// quotas of its rules, in order, each named after the composite and its
// rule: "default:token-bucket,10,1s". RateLimit-Policy lists every part; the
// RateLimit item, the retry delay and the problem body are the part of the
// rule that bound the decision (see [Quota.Part]).
type Quota struct {
	// Name is the policy's name as given: "default", "api./login",
	// "default:fixed-window,1000,1h" for a composite's part.
	Name string
	// Policy is the whole RateLimit-Policy value, such as `"default";q=100;w=60`
	// (for a composite, every part's item, joined by ", "), or "" when the
	// window is unknown (a limiter that does not say its rule).
	Policy string
	// Item is the start of the RateLimit value: `"default";r=`.
	Item string
	// Problem is the problem body (RFC 9457, in JSON) of a denial, up to the
	// retry seconds; see [Quota.AppendProblem].
	Problem string
	// Limits is what a Service's quota describes, compared with the limits
	// the Service decided under; the zero Limits for a KeyedLimiter's.
	Limits admit.Limits
	// Parts is a composite's quotas, one per rule of its Limits; nil for a
	// single rule.
	Parts []*Quota
	// Rule is the rule of the quota: a single rule's when known (the zero
	// Rule when not), a composite's part's own. A composite's own quota has
	// the zero Rule.
	Rule admit.Rule

	// part reports a composite's part, whose t is bounded by untilWhole.
	part bool
}

// PartSeparator joins a composite's name and a rule's text in the name of
// the rule's part: "default" and "fixed-window,1000,1h" make
// "default:fixed-window,1000,1h".
const PartSeparator = ":"

// NewQuota renders the quota named name; rule is nil when the window is not
// known, which leaves Policy empty.
func NewQuota(name string, rule *admit.Rule) *Quota {
	sf := string(AppendSFString(nil, name))
	q := &Quota{Name: name, Item: sf + ";r="}
	if rule != nil {
		q.Rule = *rule
		b := append([]byte(sf), ";q="...)
		b = strconv.AppendInt(b, int64(rule.Limit), 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, WindowSeconds(rule.Window), 10)
		q.Policy = string(b)
	}
	// A structured-field string of printable ASCII, which AppendSFString
	// guarantees, is also a valid JSON string: both escape only '"' and '\'.
	q.Problem = `{"type":"` + ProblemType + `","title":"Quota Exceeded","status":429,` +
		`"violated-policies":[` + sf + `],"detail":"Too many requests; retry in `
	return q
}

// NewLimitsQuota renders the quota named name for limits, which must be
// valid: for one rule exactly NewQuota's, for a composite one part per rule.
// A part is named name, PartSeparator and the rule's canonical text, a name
// that differs between the parts of one composite since [admit.NewLimits]
// refuses a repeated rule, and that stays the same as long as the rule does.
// The composite's own Item and Problem, under name, serve only an index no
// part has (see [Quota.Part]).
func NewLimitsQuota(name string, limits admit.Limits) *Quota {
	if limits.Len() == 1 {
		r := limits.At(0)
		q := NewQuota(name, &r)
		q.Limits = limits
		return q
	}
	q := NewQuota(name, nil)
	q.Limits = limits
	q.Parts = make([]*Quota, limits.Len())
	var b strings.Builder
	for i := range q.Parts {
		r := limits.At(i)
		p := NewQuota(name+PartSeparator+r.String(), &r)
		p.part = true
		q.Parts[i] = p
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Policy)
	}
	q.Policy = b.String()
	return q
}

// EntryQuota renders the quota of a book entry's limits, if valid (the
// limits of a Service's decision always are), else a quota without Policy.
func EntryQuota(name string, limits admit.Limits) *Quota {
	if limits.Validate() != nil {
		return NewQuota(name, nil)
	}
	return NewLimitsQuota(name, limits)
}

// Part returns the quota a response reports for a decision that the rule
// at index which bound: q itself for a single rule, else that rule's part.
// An index out of range (from a composite limiter of someone else's)
// reports under q, whose name no RateLimit-Policy item carries, rather than
// fail the request.
func (q *Quota) Part(which int) *Quota {
	if q.Parts == nil || which < 0 || which >= len(q.Parts) {
		return q
	}
	return q.Parts[which]
}

// AppendRateLimit appends the RateLimit value of a decision reported under
// q (a part, for a composite: see [Quota.Part]) to b: the item, r=remaining
// (at least 0) and t=reset, as from [Quota.ResetSeconds]:
// `"default";r=50;t=30`.
func (q *Quota) AppendRateLimit(b []byte, remaining int, reset int64) []byte {
	b = append(b, q.Item...)
	b = strconv.AppendInt(b, int64(max(0, remaining)), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, reset, 10)
}

// AppendProblem appends the problem body of denial d under q (a part, for a
// composite) to b: the quota-exceeded problem naming q, whose detail says
// to retry in [RetrySeconds] of d.
func (q *Quota) AppendProblem(b []byte, d admit.Decision) []byte {
	b = append(b, q.Problem...)
	b = strconv.AppendInt(b, RetrySeconds(d), 10)
	return append(b, problemEnd...)
}

// AppendSFString appends name as a structured-field String (RFC 9651,
// section 3.3.3) to b: quoted, with '"' and '\' escaped by a backslash. A
// String holds only printable ASCII, so any other byte (a UTF-8 sequence of
// a policy name such as "user.jörg") is written percent-encoded, as in a URL:
// "user.j%C3%B6rg".
func AppendSFString(b []byte, name string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '%', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// CeilSeconds returns d in whole seconds, rounded up; 0 for d <= 0. It cannot
// overflow: admit.Never is 9223372037 seconds.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// RetrySeconds is the retry delay of a denial (HTTP's Retry-After, gRPC's
// RetryInfo): RetryAfter in whole seconds, rounded up, and at least 1,
// since a delay of 0 would invite an immediate retry that fails.
func RetrySeconds(d admit.Decision) int64 { return max(1, CeilSeconds(d.RetryAfter)) }

// WindowSeconds is the w parameter of a window: whole seconds rounded up,
// at least 1 (the draft wants a positive integer).
func WindowSeconds(w time.Duration) int64 { return max(1, CeilSeconds(w)) }

// ResetSeconds is the t parameter of a decision reported under q: when
// denied, the wait until this request would pass ([RetrySeconds]); when
// admitted, the wait until the quota is whole again, which for a
// composite's part is [UntilWhole]'s.
func (q *Quota) ResetSeconds(d admit.Decision) int64 {
	if !d.Allowed {
		return RetrySeconds(d)
	}
	if q.part {
		return CeilSeconds(UntilWhole(q.Rule, d))
	}
	return CeilSeconds(d.ResetAfter)
}

// UntilWhole returns the wait until rule is whole again (a full bucket, an
// empty window) after an admission d of a composite that rule bound, as
// closely as d tells it. d carries the binding rule's Remaining but the
// composite's ResetAfter, the wait until every rule is whole, which is the
// binding rule's own only when that rule is the last to become whole (a
// long window bound by it, typically). So the wait is the smaller of that
// and what the rule's algorithm bounds its own wait by:
//
//   - a token bucket with Remaining r holds at least r whole tokens, so it
//     lacks at most Limit−r, each refilled in Window/Limit: the bound is
//     within one token's refill of the bucket's exact wait;
//   - a fixed window ends, and every entry of a sliding log expires, within
//     Window;
//   - a sliding counter's current window weighs on the next one too:
//     2×Window.
//
// Both are upper bounds of the exact wait, never below it, so a client that
// waits t seconds finds the limit whole. TestUntilWholeBound checks that
// against the kernels.
func UntilWhole(rule admit.Rule, d admit.Decision) time.Duration {
	bound := rule.Window
	switch rule.Algorithm {
	case admit.TokenBucket:
		// lack×Window <= Limit×Window <= admit.MaxLimitTimesWindow: no overflow.
		lack := int64(min(max(rule.Limit-d.Remaining, 0), rule.Limit))
		units, l := lack*int64(rule.Window), int64(rule.Limit)
		bound = time.Duration(units / l)
		if units%l != 0 {
			bound++
		}
	case admit.SlidingCounter:
		bound = time.Duration(min(uint64(rule.Window)*2, math.MaxInt64))
	}
	return min(d.ResetAfter, bound)
}

// Composite is what a middleware asks of a limiter of composite limits:
// the methods of admit.CompositeStore it uses, which a remote store without
// Len and Sweep (redisstore's Keyed) has too.
type Composite interface {
	Limits() admit.Limits
	AllowNWhich(key string, n int) (admit.Decision, int)
}

// LimiterQuota returns the quota of a middleware (httplimit's New,
// grpclimit's New and NewClient) that limits with lim under the quota name
// ("default" when empty) and the rule WithPolicy gave (nil for none). Over
// a limiter of composite limits (a Composite of two or more rules) it is a
// quota with a part per rule, and comp is lim; otherwise it is the quota of
// rule, or of lim's own rule (its Rule method, or its Limits of one rule),
// and comp is nil. limits are the limits the quota describes, the zero
// Limits when no rule is known. conflict, when not empty, says why the
// options cannot describe lim (WithPolicy's one rule over a composite):
// the caller returns it as its error, and the other results are nil.
func LimiterQuota(name string, rule *admit.Rule, lim admit.KeyedLimiter) (q *Quota, comp Composite, limits admit.Limits, conflict string) {
	if name == "" {
		name = "default"
	}
	if cs, ok := lim.(Composite); ok && cs.Limits().Len() > 1 {
		limits = cs.Limits()
		if rule != nil {
			n := clientip.Quote(name)
			return nil, nil, admit.Limits{}, fmt.Sprintf("WithPolicy(%s, %v) gives one rule, but the limiter enforces the composite %q, whose rules it reports itself; leave WithPolicy out, or name the quota with WithPolicyName(%s)",
				n, *rule, limits, n)
		}
		return NewLimitsQuota(name, limits), cs, limits, ""
	}
	if rule == nil {
		if r, ok := lim.(interface{ Rule() admit.Rule }); ok {
			rr := r.Rule()
			rule = &rr
		} else if cs, ok := lim.(Composite); ok && cs.Limits().Len() == 1 {
			rr := cs.Limits().At(0)
			rule = &rr
		}
	}
	if rule != nil {
		if l, err := admit.NewLimits(*rule); err == nil {
			limits = l
		}
	}
	return NewQuota(name, rule), nil, limits, ""
}

// statsReporter is a limiter that reports statistics: every admit.Store and
// admit.CompositeStore. A middleware limits any admit.KeyedLimiter its
// caller passes (a Redis store's has no Stats), so Labels asks for Stats
// through this interface.
type statsReporter interface{ Stats() admit.StoreStats }

// Labels returns the labels of a middleware's decisions: Source source
// ("http", "grpc"), Name the quota's name, Limits limits, and Store lim
// when it reports its statistics.
func Labels(source, name string, limits admit.Limits, lim admit.KeyedLimiter) observe.Labels {
	l := observe.Labels{Source: source, Name: name, Limits: limits}
	if sr, ok := lim.(statsReporter); ok {
		l.Store = sr
	}
	return l
}

// QuotaNameError returns why name cannot name a quota, given by the option
// opt (WithPolicyName, WithPolicy), or "" when it can: a quota's name is 1
// to 64 printable ASCII characters.
func QuotaNameError(opt, name string) string {
	if name == "" || len(name) > 64 || strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
		return fmt.Sprintf("%s(%s): a quota name is 1 to 64 printable ASCII characters, such as \"default\" or \"per-minute\"", opt, clientip.Quote(name))
	}
	return ""
}
