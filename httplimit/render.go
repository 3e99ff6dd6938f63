package httplimit

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/ratehdr"
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
const ProblemType = ratehdr.ProblemType

// problemContentType is the media type of RFC 9457 problem bodies in JSON.
const problemContentType = "application/problem+json"

// badRequestBody is the problem body of a request without a key (see
// [WithUnknownKey]): the status says everything, so the type is about:blank.
const badRequestBody = `{"type":"about:blank","title":"Bad Request","status":400,` +
	`"detail":"The server cannot tell which client sent this request, so it cannot apply its rate limit."}`

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
func (m *Middleware) setHeaders(h http.Header, q, p *ratehdr.Quota, d admit.Decision, flags int) {
	reset := p.ResetSeconds(d)
	var buf [256]byte
	b := p.AppendRateLimit(buf[:0], d.Remaining, reset)
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
		b = strconv.AppendInt(b, ratehdr.RetrySeconds(d), 10)
	}
	s := string(b)

	n := 1
	if q.Policy != "" {
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
	if q.Policy != "" {
		f.add(hdrPolicy, q.Policy)
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
func writeProblem(w http.ResponseWriter, q *ratehdr.Quota, d admit.Decision) {
	bp := bodyPool.Get().(*[]byte)
	b := q.AppendProblem((*bp)[:0], d)
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(b) //nolint:errcheck // the client went away; nothing to do
	*bp = b
	bodyPool.Put(bp)
}
