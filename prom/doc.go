// Package prom exports the decisions of admit's limiters to Prometheus. A
// [Collector] is an [observe.Observer] that counts decisions in a
// [tally.Tally], and a [prometheus.Collector] that reports the Tally's
// counts, and the statistics of the keyed stores behind them, when its
// registry is scraped. It is the module github.com/admit-go/admit/prom, of
// its own, so that admit itself does not depend on client_golang.
//
//	registry := prometheus.NewRegistry()
//	c, err := prom.New()
//	registry.MustRegister(c)
//	svc, err := policy.NewService(book, policy.WithObserver(c))
//	http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
//
// The Collector registers itself nowhere: register it on the registry the
// application serves. The same Collector can observe several sources at
// once: pass it to httplimit.WithObserver and redisstore.WithObserver too.
// To export one Tally both here and through admit/otel, build the Tally
// with tally.New, attach it, and pass it to prom.New with [WithTally].
//
// A decision costs what the Tally's counting costs (one add to a striped
// counter; see package tally), and nothing more: the Collector works only
// when scraped.
//
// With the default namespace "admit" ([WithNamespace] changes the prefix)
// the metrics are
//
//	admit_decisions_total             counter    source, name, scope, limits, outcome
//	admit_decision_duration_seconds   histogram  source, name, scope, limits (WithLatency only)
//	admit_store_keys                  gauge      source, name, limits
//	admit_store_max_keys              gauge      source, name, limits (stores with a bound only)
//	admit_store_evictions_total       counter    source, name, limits
//	admit_store_full_denials_total    counter    source, name, limits
//	admit_observer_folds_total        counter    (none)
//
// Their labels name a limiter, never a key: its source ("policy", "http",
// "grpc", "redis"), its name (an API, a policy name, a key prefix), the
// scope of the book entry that decided (a policy.Service's only), its
// limits, and the outcome. Names come from requests, so the series are
// bounded by the Tally's bound ([WithMaxSeries]; 1000 by default): past
// it, a new set of labels is counted under name="_other". No decision
// series disappears once reported.
//
// docs/observability.md has the whole story: what each metric and label
// holds, when the store metrics are reported, the bound on series, and
// queries to start a dashboard with.
package prom
