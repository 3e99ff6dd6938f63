// Package otel exports the decisions of admit's limiters as OpenTelemetry
// metrics: an [Observer] is an observe.Observer that counts in a tally.Tally
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
// The Meter is named [ScopeName]. Its instruments are
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
// Every attribute (admit.source, admit.name, admit.scope, admit.limits,
// admit.outcome) names a limiter, never a key. Names come from requests
// (a policy.Service's APIs), so the series are bounded: by
// tally.DefaultMaxSeries (1000), or [WithMaxSeries]. Past the bound, a new
// set of labels is counted under the name "_other" (tally.OtherName), and
// admit.observer.folds counts how many times that happened.
//
// A decision costs what the Tally's counting costs: an add to a striped
// counter, no allocation, no lock and nothing of OpenTelemetry's; reading
// happens at collection. OpenTelemetry has no asynchronous histogram, so
// with [WithLatency] each decision reads the clock twice and records one
// value in a synchronous histogram.
//
// docs/observability.md has the whole story: what each attribute and
// instrument holds, which stores are reported, and the measured costs.
package otel
