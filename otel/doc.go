// Package otel exports the decisions of admit's limiters as OpenTelemetry
// metrics: an [Observer] is an admit.Observer that counts in a tally.Tally
// and reports the Tally through asynchronous instruments, read in one
// callback when a reader collects. It is a module of its own,
// github.com/admit-go/admit/otel, so that the core module does not depend on
// OpenTelemetry.
//
//	obs, err := otel.New(otel.WithMeterProvider(mp)) // mp: an sdkmetric.MeterProvider
//	if err != nil { … }
//	defer obs.Unregister()
//	svc, err := policy.NewService(book, policy.WithObserver(obs))
//	// each collection of mp's readers now reports svc's decisions
//
// Without [WithMeterProvider] the Observer uses the global provider
// (go.opentelemetry.io/otel.GetMeterProvider()). The package is named otel,
// as the module is: a file that also imports go.opentelemetry.io/otel
// renames one of them, for example admitotel.
//
// # Instruments
//
// The Meter is named [ScopeName]. Every attribute names a limiter, never a
// key: admit.source ("policy", "http", "grpc", "redis"), admit.name (the
// API, policy name or key prefix), admit.scope ("default", "api" or "user";
// a policy.Service's only), admit.limits (the limits, as Limits.String
// writes them; absent when the limiter has none it can tell), and, for
// decisions, admit.outcome (admitted, denied, shadow_denied, errored,
// timed_out, fell_back).
//
//	name                              kind                          unit         attributes
//	admit.decisions                   Int64ObservableCounter        {decision}   source, name, scope, limits, outcome
//	admit.decision.duration           Float64Histogram              s            source, name, scope, limits, outcome (WithLatency only)
//	admit.store.keys                  Int64ObservableUpDownCounter  {key}        source, name, limits
//	admit.store.max_keys              Int64ObservableUpDownCounter  {key}        source, name, limits (stores with a bound only)
//	admit.store.evictions             Int64ObservableCounter        {key}        source, name, limits
//	admit.store.full_denials          Int64ObservableCounter        {request}    source, name, limits
//	admit.observer.folds              Int64ObservableCounter        {fold}       none
//
// admit.decisions reports the admitted and denied decisions of every series,
// zeros included, and each other outcome once it has been counted. The
// store instruments report each keyed store that reports statistics
// (Stats: the admit.Store of packages atomic, locked and sharded),
// once per (source, name, limits) even when the store serves several
// scopes, and nothing for a limiter without one (a Redis store). The keys
// of a store and its bound are UpDownCounters, not Gauges: summed over
// stores they are the keys held in the process and the room for them, as
// OpenTelemetry's conventions report a pool's size and its limit
// (db.client.connection.count and .max). A store rebuilt under the same
// attributes starts its evictions and full denials from zero, which a
// backend reads as a counter reset.
//
// # Cost
//
// A decision costs what the Tally's counting costs: an add to a striped
// counter, no allocation, no lock and nothing of OpenTelemetry's. Reading
// happens at collection: one snapshot of the Tally, each store's Stats, and
// attribute sets computed once per series and store, then cached.
//
// OpenTelemetry has no asynchronous histogram, so the latency histogram of
// [WithLatency] is synchronous: each decision reads the clock twice and
// records one value in admit.decision.duration, with an attribute set
// computed when the limiter was built. A Tally with a latency histogram of
// its own, given with [WithTally], is counted but its histogram is not
// exported here.
//
// # Series
//
// A series is one (source, name, scope, limits). Names come from requests
// (a policy.Service's APIs), so the series are bounded: by
// tally.DefaultMaxSeries (1000), or [WithMaxSeries]. Past the bound, a new
// set of labels is counted under the name "_other" (tally.OtherName), and
// admit.observer.folds counts how many times that happened.
package otel
