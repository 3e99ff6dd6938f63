// Package observe is the vocabulary of observing a limiter's decisions:
// what a limiter reports ([Instrument], [Outcome]), under which names
// ([Labels]), and to whom ([Observer]). A policy.Service, httplimit's
// middleware, grpclimit's interceptors and redisstore's limiters accept an
// Observer (their WithObserver options); package tally implements it, and
// the modules admit/prom and admit/otel export a tally to Prometheus and
// OpenTelemetry. docs/observability.md has the metrics and their costs.
package observe

import (
	"strconv"
	"time"

	"github.com/admit-go/admit"
)

// Observer receives the decisions of limiters by name, never by key: a
// policy.Service reports each (limits, API) it serves, httplimit and
// grpclimit each middleware or interceptor, redisstore each limiter. Attach
// one with policy.WithObserver, httplimit.WithObserver,
// redisstore.WithObserver; package tally implements it, and the modules
// admit/prom and admit/otel export a tally to Prometheus and OpenTelemetry.
//
// The work is split so that observing costs nothing on the decision path
// but the counting itself: Instrument is called once per set of labels,
// when the limiter behind them is built (a Service's for an API on its
// first request, or at NewService and Reload for the APIs a book names; a
// middleware's or a Redis limiter's when it is constructed), never per
// decision, and the Instrument it returns is kept and called for every
// decision. No key ever reaches an Observer, so the number of label sets is
// bounded by the number of limiters built, not by the number of users.
//
// Implementations must be safe for concurrent use.
type Observer interface {
	// Instrument returns the Instrument that counts the decisions made under
	// labels, or nil to count none of them (the caller then records
	// nothing, at the cost of one nil check per decision).
	Instrument(labels Labels) Instrument
}

// Releaser is implemented by an [Observer] that keeps the Store of the
// labels it is given, to report its statistics (package tally does, and
// the exporters built on it). A policy.Service calls Release with the
// labels of each limiter it drops, when a Reload takes their limits out of
// the book, so that the observer lets the store go, and with it every state
// the store still holds: an observer that kept it would keep it for the
// life of the process. The counts are kept; only the Store is let go, and
// only if it is still the one the observer holds for those labels.
type Releaser interface {
	Release(labels Labels)
}

// Labels name what an [Instrument] counts. Every field is fixed when the
// Instrument is resolved; none is ever a key.
type Labels struct {
	// Source names the caller: "policy" (a policy.Service), "http"
	// (httplimit), "grpc" (grpclimit) or "redis" (redisstore).
	Source string

	// Name is what the decisions are about: the API for a policy.Service,
	// the policy name for httplimit and grpclimit, the key prefix for
	// redisstore.
	Name string

	// Scope is the kind of book entry whose limits decide, for a
	// policy.Service: "default", "api" or "user"; empty elsewhere.
	Scope string

	// Limits are the limits the decisions are made under (the zero Limits
	// when the caller does not know them, as for a middleware over a
	// limiter without Rule or Limits).
	Limits admit.Limits

	// Store reports the keyed store behind the decisions, or is nil: the
	// keyed stores of packages atomic, locked and sharded implement
	// [StatsReporter]. An exporter reads it when it is scraped, never on
	// the decision path.
	Store StatsReporter
}

// Outcome is what became of one observed decision.
type Outcome uint8

// The outcomes an [Instrument] counts.
const (
	// Admitted: the requests were admitted.
	Admitted Outcome = iota + 1
	// Denied: the requests were denied (for a middleware, answered 429 or
	// ResourceExhausted).
	Denied
	// ShadowDenied: a middleware in shadow mode let through requests its
	// limiter denied.
	ShadowDenied
	// Errored: the limiter could not decide and the caller got an error or
	// a failure (redisstore: a Redis error other than a timeout; a
	// middleware: a request it could not key and refused).
	Errored
	// TimedOut: as Errored, the failure being a deadline (the context's,
	// or the network's).
	TimedOut
	// FellBack: Redis failed and redisstore's failure policy decided
	// instead (fail open, fail closed, or the local limiter); counted
	// beside the Errored or TimedOut of the failure.
	FellBack
)

// NumOutcomes is one more than the largest [Outcome], for arrays indexed by
// outcome.
const NumOutcomes = int(FellBack) + 1

// String returns the outcome's name as exporters label it: "admitted",
// "denied", "shadow_denied", "errored", "timed_out", "fell_back".
func (o Outcome) String() string {
	switch o {
	case Admitted:
		return "admitted"
	case Denied:
		return "denied"
	case ShadowDenied:
		return "shadow_denied"
	case Errored:
		return "errored"
	case TimedOut:
		return "timed_out"
	case FellBack:
		return "fell_back"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Instrument counts decisions under one set of [Labels]. Observe is on the
// decision path: it must be safe for concurrent use, must not allocate and
// should cost a few nanoseconds (package tally's adds to a striped counter).
type Instrument interface {
	// Observe counts one decision about n requests (n as passed to AllowN,
	// so 0 for a probe) with outcome o. latency is the time the decision
	// took when Timed returned true, and 0 otherwise.
	Observe(o Outcome, n int, latency time.Duration)

	// Timed reports whether Observe wants latencies. It is called once,
	// when the instrument is resolved: callers of an untimed instrument read
	// no clock for it.
	Timed() bool
}

// StatsReporter is a keyed store that reports [admit.StoreStats]: every
// [admit.Store] and [admit.CompositeStore]. Stats costs time in proportion
// to the store's shards (it reads Len), and is meant for a metrics scrape,
// not for the decision path.
type StatsReporter interface {
	Stats() admit.StoreStats
}
