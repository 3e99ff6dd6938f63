package httplimit

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/admit-go/admit"
)

// Header keys in the canonical form net/http stores them in, so that the
// middleware can assign them to an [http.Header] directly.
const (
	hdrPolicy      = "Ratelimit-Policy"
	hdrRateLimit   = "Ratelimit"
	hdrRetryAfter  = "Retry-After"
	hdrLimit       = "X-Ratelimit-Limit"
	hdrRemaining   = "X-Ratelimit-Remaining"
	hdrReset       = "X-Ratelimit-Reset"
	hdrContentType = "Content-Type"
	hdrNoSniff     = "X-Content-Type-Options"
)

// ProblemType is the type of the problem body of a 429 response: the
// quota-exceeded problem type of draft-ietf-httpapi-ratelimit-headers-10,
// section 5.1. Its "violated-policies" member names the quota.
const ProblemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// problemContentType is the media type of RFC 9457 problem bodies in JSON.
const problemContentType = "application/problem+json"

// badRequestBody is the problem body of a request without a key (see
// [WithUnknownKey]): the status says everything, so the type is about:blank.
const badRequestBody = `{"type":"about:blank","title":"Bad Request","status":400,` +
	`"detail":"The server cannot tell which client sent this request, so it cannot apply its rate limit."}`

// problemEnd closes the problem body after the retry seconds.
const problemEnd = `s."}`

// quota is one policy as the middleware renders it, built once: for a
// KeyedLimiter when the Middleware is built, for a Service once per entry of
// each book. It is immutable.
//
// A composite (Limits of two or more rules) is one quota whose parts are the
// quotas of its rules, in order, each named after the composite and its
// rule: "default:token-bucket,10,1s". RateLimit-Policy lists every part; the
// RateLimit item, Retry-After and the problem body are the part of the rule
// that bound the decision (see [quota.part]).
type quota struct {
	// name is the policy's name as given: "default", "api./login",
	// "default:fixed-window,1000,1h" for a composite's part.
	name string
	// policy is the whole RateLimit-Policy value, such as `"default";q=100;w=60`
	// (for a composite, every part's item, joined by ", "), or "" when the
	// window is unknown (New without WithPolicy over a limiter that does not
	// say its rule).
	policy string
	// item is the start of the RateLimit value: `"default";r=`.
	item string
	// problem is the 429 problem body up to the retry seconds.
	problem string
	// limits is what a Service's quota describes, compared with the limits
	// the Service decided under; the zero Limits for New's quota.
	limits admit.Limits
	// parts is a composite's quotas, one per rule of its Limits; nil for a
	// single rule.
	parts []*quota
	// rule is the rule of a composite's part, which its t needs; the zero
	// Rule for a quota that is not a part.
	rule admit.Rule
}

// partSeparator joins a composite's name and a rule's text in the name of
// the rule's part: "default" and "fixed-window,1000,1h" make
// "default:fixed-window,1000,1h".
const partSeparator = ":"

// newQuota renders the quota named name; rule is nil when the window is not
// known, which leaves out the RateLimit-Policy field.
func newQuota(name string, rule *admit.Rule) *quota {
	sf := string(appendSFString(nil, name))
	q := &quota{name: name, item: sf + ";r="}
	if rule != nil {
		b := append([]byte(sf), ";q="...)
		b = strconv.AppendInt(b, int64(rule.Limit), 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, windowSeconds(rule.Window), 10)
		q.policy = string(b)
	}
	// A structured-field string of printable ASCII, which appendSFString
	// guarantees, is also a valid JSON string: both escape only '"' and '\'.
	q.problem = `{"type":"` + ProblemType + `","title":"Quota Exceeded","status":429,` +
		`"violated-policies":[` + sf + `],"detail":"Too many requests; retry in `
	return q
}

// newLimitsQuota renders the quota named name for limits, which must be
// valid: for one rule exactly newQuota's, for a composite one part per rule.
// A part is named name, partSeparator and the rule's canonical text, a name
// that differs between the parts of one composite since [admit.NewLimits]
// refuses a repeated rule, and that stays the same as long as the rule does.
// The composite's own item and problem, under name, serve only an index no
// part has (see part).
func newLimitsQuota(name string, limits admit.Limits) *quota {
	if limits.Len() == 1 {
		r := limits.At(0)
		q := newQuota(name, &r)
		q.limits = limits
		return q
	}
	q := newQuota(name, nil)
	q.limits = limits
	q.parts = make([]*quota, limits.Len())
	var b strings.Builder
	for i := range q.parts {
		r := limits.At(i)
		p := newQuota(name+partSeparator+r.String(), &r)
		p.rule = r
		q.parts[i] = p
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.policy)
	}
	q.policy = b.String()
	return q
}

// part returns the quota a response reports for a decision that the rule
// which bound: q itself for a single rule, else that rule's part. An index
// out of range (from a CompositeStore of someone else's) reports under q,
// whose name no RateLimit-Policy item carries, rather than fail the request.
func (q *quota) part(which int) *quota {
	if q.parts == nil || which < 0 || which >= len(q.parts) {
		return q
	}
	return q.parts[which]
}

// appendSFString appends name as a structured-field String (RFC 9651,
// section 3.3.3) to b: quoted, with '"' and '\' escaped by a backslash. A
// String holds only printable ASCII, so any other byte (a UTF-8 sequence of
// a policy name such as "user.jörg") is written percent-encoded, as in a URL:
// "user.j%C3%B6rg".
func appendSFString(b []byte, name string) []byte {
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

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0. It cannot
// overflow: admit.Never is 9223372037 seconds.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// retrySeconds is the Retry-After of a denial: RetryAfter rounded up, and at
// least 1, since "Retry-After: 0" would invite an immediate retry that fails.
func retrySeconds(d admit.Decision) int64 { return max(1, ceilSeconds(d.RetryAfter)) }

// windowSeconds is the w parameter of a window: whole seconds rounded up,
// at least 1 (the draft wants a positive integer).
func windowSeconds(w time.Duration) int64 { return max(1, ceilSeconds(w)) }

// resetSeconds is the t parameter (and X-RateLimit-Reset) of a decision
// reported under q: when denied, the wait until this request would pass;
// when admitted, the wait until the quota is whole again, which for a
// composite's part is untilWhole's.
func (q *quota) resetSeconds(d admit.Decision) int64 {
	if !d.Allowed {
		return retrySeconds(d)
	}
	if q.rule.Limit > 0 {
		return ceilSeconds(untilWhole(q.rule, d))
	}
	return ceilSeconds(d.ResetAfter)
}

// untilWhole returns the wait until rule is whole again (a full bucket, an
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
func untilWhole(rule admit.Rule, d admit.Decision) time.Duration {
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

// Which optional fields setHeaders writes.
const (
	withRetry   = 1 << iota // Retry-After: an enforced denial
	withProblem             // Content-Type and nosniff of a problem body
)

// setHeaders sets the rate-limit fields for d under q on h, with the extra
// fields of flags: RateLimit-Policy lists q (every part of a composite), and
// RateLimit reports d under p, q's part that bound d (q itself for a single
// rule).
//
// Every dynamic value is rendered into one stack buffer and converted to a
// single string, which the values then share as substrings; every field gets
// a one-element slice of a single []string. So an admitted request costs two
// allocations here, whatever the options (three if the values outgrow the
// 256-byte buffer, which takes a quota name of some 200 bytes). Each slice
// has capacity one, so appending to one field copies it rather than
// overwriting the next (as [http.Header.Clone] shares one backing array).
func (m *Middleware) setHeaders(h http.Header, q, p *quota, d admit.Decision, flags int) {
	reset := p.resetSeconds(d)
	var buf [256]byte
	b := append(buf[:0], p.item...)
	b = strconv.AppendInt(b, int64(max(0, d.Remaining)), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, reset, 10)
	endRL := len(b)
	var endLimit, endRemaining, endReset int
	if m.cfg.legacy {
		b = strconv.AppendInt(b, int64(max(0, d.Limit)), 10)
		endLimit = len(b)
		b = strconv.AppendInt(b, int64(max(0, d.Remaining)), 10)
		endRemaining = len(b)
		b = strconv.AppendInt(b, reset, 10)
		endReset = len(b)
	}
	startRetry := len(b)
	if flags&withRetry != 0 {
		b = strconv.AppendInt(b, retrySeconds(d), 10)
	}
	s := string(b)

	n := 1
	if q.policy != "" {
		n++
	}
	if m.cfg.legacy {
		n += 3
	}
	if flags&withRetry != 0 {
		n++
	}
	if flags&withProblem != 0 {
		n += 2
	}
	f := fields{h: h, vals: make([]string, n)}
	if q.policy != "" {
		f.add(hdrPolicy, q.policy)
	}
	f.add(hdrRateLimit, s[:endRL])
	if m.cfg.legacy {
		f.set(hdrLimit, s[endRL:endLimit])
		f.set(hdrRemaining, s[endLimit:endRemaining])
		f.set(hdrReset, s[endRemaining:endReset])
	}
	if flags&withRetry != 0 {
		f.set(hdrRetryAfter, s[startRetry:])
	}
	if flags&withProblem != 0 {
		f.set(hdrContentType, problemContentType)
		f.set(hdrNoSniff, "nosniff")
	}
}

// fields sets header fields whose values share one backing array, vals,
// which has room for every field set.
type fields struct {
	h    http.Header
	vals []string
	next int
}

// set sets the field key to the single value v, replacing any other.
func (f *fields) set(key, v string) {
	f.vals[f.next] = v
	f.h[key] = f.vals[f.next : f.next+1 : f.next+1]
	f.next++
}

// add adds v to the list field key: as its only value if the field is not
// set yet, else as one more field line after those already there (which the
// structured-field list syntax joins into one list).
func (f *fields) add(key, v string) {
	if old := f.h[key]; len(old) > 0 {
		f.h[key] = append(old, v)
		f.next++
		return
	}
	f.set(key, v)
}

// bodyPool recycles the buffers of problem bodies, so that a denial renders
// its body without allocating. Pointers to slices, so that Put does not
// allocate either.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeProblem writes the 429 response of an enforced denial under q (for a
// composite, the part that denied); the headers are already set.
func writeProblem(w http.ResponseWriter, q *quota, d admit.Decision) {
	bp := bodyPool.Get().(*[]byte)
	b := append((*bp)[:0], q.problem...)
	b = strconv.AppendInt(b, retrySeconds(d), 10)
	b = append(b, problemEnd...)
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(b) //nolint:errcheck // the client went away; nothing to do
	*bp = b
	bodyPool.Put(bp)
}
