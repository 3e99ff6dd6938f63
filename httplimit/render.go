package httplimit

import (
	"net/http"
	"strconv"
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
// KeyedLimiter when the Middleware is built, for a Service once per rule of
// each book. It is immutable.
type quota struct {
	// name is the policy's name as given: "default", "api./login".
	name string
	// policy is the whole RateLimit-Policy value, such as `"default";q=100;w=60`,
	// or "" when the window is unknown (New without WithPolicy).
	policy string
	// item is the start of the RateLimit value: `"default";r=`.
	item string
	// problem is the 429 problem body up to the retry seconds.
	problem string
}

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

// resetSeconds is the t parameter (and X-RateLimit-Reset) of a decision: when
// denied, the wait until this request would pass; when admitted, the wait
// until the quota is whole again.
func resetSeconds(d admit.Decision) int64 {
	if d.Allowed {
		return ceilSeconds(d.ResetAfter)
	}
	return retrySeconds(d)
}

// Which optional fields setHeaders writes.
const (
	withRetry   = 1 << iota // Retry-After: an enforced denial
	withProblem             // Content-Type and nosniff of a problem body
)

// setHeaders sets the rate-limit fields for d under q on h, with the extra
// fields of flags.
//
// Every dynamic value is rendered into one stack buffer and converted to a
// single string, which the values then share as substrings; every field gets
// a one-element slice of a single []string. So an admitted request costs two
// allocations here, whatever the options (three if the values outgrow the
// 256-byte buffer, which takes a quota name of some 200 bytes). Each slice
// has capacity one, so appending to one field copies it rather than
// overwriting the next (as [http.Header.Clone] shares one backing array).
func (m *Middleware) setHeaders(h http.Header, q *quota, d admit.Decision, flags int) {
	reset := resetSeconds(d)
	var buf [256]byte
	b := append(buf[:0], q.item...)
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

// writeProblem writes the 429 response of an enforced denial under q; the
// headers are already set.
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
