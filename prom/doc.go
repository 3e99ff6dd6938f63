// Package prom exports the decisions of admit's limiters to Prometheus. A
// [Collector] is an [observe.Observer] that counts decisions in a
// [tally.Tally], and a [prometheus.Collector] that reports the Tally's
// counts, and the statistics of the keyed stores behind them, when its
// registry is scraped. It is the module github.com/admit-go/admit/prom, of
// its own, so that admit itself does not depend on client_golang.
//
// # Quick start
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
// # Cost
//
// A decision costs what the Tally's counting costs (one add to a striped
// counter; see package tally), and nothing more: the Collector works only
// when scraped. A scrape reads the Tally's snapshot and calls Stats once
// per distinct store, which takes time in proportion to the store's shards.
//
// # Metrics
//
// With the default namespace "admit" ([WithNamespace] changes the prefix):
//
//	metric                            type       labels                               value
//	admit_decisions_total             counter    source, name, scope, limits, outcome decisions (a decision about n requests counts once)
//	admit_decision_duration_seconds   histogram  source, name, scope, limits          time to decide; only with WithLatency
//	admit_store_keys                  gauge      source, name, limits                 keys the store holds
//	admit_store_max_keys              gauge      source, name, limits                 the store's WithMaxKeys bound; absent when it has none
//	admit_store_evictions_total       counter    source, name, limits                 keys evicted (idle keys dropped by insertions, Sweep, the full-store policy)
//	admit_store_full_denials_total    counter    source, name, limits                 requests for new keys denied because the store was full
//	admit_observer_folds_total        counter    (none)                               times a set of labels was counted under name="_other" (see WithMaxSeries)
//
// The labels are those of [observe.Labels], never a key:
//
//   - source: "policy" (a policy.Service), "http" (httplimit), "grpc"
//     (grpclimit) or "redis" (redisstore);
//   - name: the API for a policy.Service, the policy name for httplimit and
//     grpclimit, the key prefix for redisstore, or "_other" for the label
//     sets past the bound of series;
//   - scope: "default", "api" or "user" (the kind of book entry whose limits
//     decide) for a policy.Service, empty elsewhere;
//   - limits: the limits in the book's syntax, such as
//     "fixed-window,100,1m" or "token-bucket,10,1s + fixed-window,1000,1h",
//     empty when the source does not know them;
//   - outcome: admitted, denied, shadow_denied, errored, timed_out or
//     fell_back ([observe.Outcome]).
//
// Every series of decisions reports admitted and denied, at 0 until
// counted, so that rate() sees the first of each; the rarer outcomes
// (shadow_denied, errored, timed_out, fell_back) appear from their first
// count on. No series disappears once reported: a Tally keeps its series
// and its counts only grow.
//
// The store metrics report the [admit.StoreStats] of the store behind a
// limiter (Labels.Store), once per (source, name, limits): the limiter of a
// policy.Service's (limits, API) serves every scope whose entry gives those
// limits, and its store is reported once, without the scope label. A series
// whose store reports no statistics has no store metrics, nor has the
// "_other" series. (When a Reload has rebuilt a limiter, a scope that has
// not decided through the new one yet still names the old store; the store
// of the series the Tally created last is the one reported.)
//
// The duration histogram's buckets have the bounds of WithLatency,
// converted to seconds; its sum is in seconds.
//
// # Bound on series
//
// Names come from requests (a policy.Service's API names), so the series
// are bounded by the Tally's bound of series ([WithMaxSeries], or the
// Tally's own with [WithTally]; 1000 by default): past it, a new label set is counted under name="_other", with
// its source, scope and limits. So admit_decisions_total has at most
// (WithMaxSeries + one "_other" per (source, scope, limits)) × 6 outcomes
// series, in practice × 2 (admitted and denied) for a policy.Service;
// admit_decision_duration_seconds one histogram per label set; and the
// store metrics one of each per (source, name, limits) at most.
//
// # Queries
//
// Denied requests per API per minute, for a policy.Service, all scopes and
// limits together (the 5m range smooths the rate, ×60 makes it per minute):
//
//	sum by (name) (rate(admit_decisions_total{source="policy",outcome="denied"}[5m])) * 60
//
// The share of decisions denied, per API:
//
//	sum by (name) (rate(admit_decisions_total{source="policy",outcome="denied"}[5m]))
//	  / sum by (name) (rate(admit_decisions_total{source="policy",outcome=~"admitted|denied"}[5m]))
//
// How full each bounded store is (stores without a bound drop out, having
// no admit_store_max_keys):
//
//	admit_store_keys / admit_store_max_keys
//
// The 99th percentile of decision time per source, with WithLatency:
//
//	histogram_quantile(0.99, sum by (source, le) (rate(admit_decision_duration_seconds_bucket[5m])))
package prom
