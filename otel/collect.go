package otel

import (
	"context"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/observe"
)

// The attributes' keys. Values that would be empty (the scope outside a
// policy.Service, the limits a middleware does not know) are left out
// rather than reported as "".
const (
	keySource  = attribute.Key("admit.source")
	keyName    = attribute.Key("admit.name")
	keyScope   = attribute.Key("admit.scope")
	keyLimits  = attribute.Key("admit.limits")
	keyOutcome = attribute.Key("admit.outcome")
)

// seriesKey identifies a series of the Tally, as the Tally does: its
// labels less the Store.
type seriesKey struct {
	source, name, scope string
	limits              admit.Limits
}

// storeKey identifies a store: the labels less the Store and the scope, as
// one limiter of a policy.Service serves every scope that decides through
// it, and is reported under each of their series.
type storeKey struct {
	source, name string
	limits       admit.Limits
}

// seriesAttrs are the options that carry a series' attributes, one per
// outcome, computed when the series is first collected.
type seriesAttrs struct {
	byOutcome [observe.NumOutcomes][]metric.ObserveOption
}

// storeAttrs are the options that carry a store's attributes; gen is the
// collection that last reported the store.
type storeAttrs struct {
	opts []metric.ObserveOption
	gen  uint64
}

// labelAttrs returns the attributes of labels l, less the outcome; scope
// is left out when scoped is false.
func labelAttrs(l observe.Labels, scoped bool) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 5)
	kv = append(kv, keySource.String(l.Source), keyName.String(l.Name))
	if scoped && l.Scope != "" {
		kv = append(kv, keyScope.String(l.Scope))
	}
	if s := l.Limits.String(); s != "" {
		kv = append(kv, keyLimits.String(s))
	}
	return kv
}

// outcomeSet returns the attribute set of labels l with outcome oc.
func outcomeSet(l observe.Labels, oc observe.Outcome) attribute.Set {
	kv := labelAttrs(l, true)
	return attribute.NewSet(append(kv, keyOutcome.String(oc.String()))...)
}

// collect is the callback the Observer registers: it reads a snapshot of
// the Tally and reports, for every series, its decisions of each outcome
// (admitted and denied always, the other outcomes once counted), for every
// distinct store its statistics, and the Tally's folds. A
// store is reported once per (source, name, limits), from the first series
// in the snapshot that holds one: a policy.Service's limiter serves every
// scope under one store, and keeps it across a Reload that keeps its
// limits. It allocates the snapshot, and attribute sets only for series
// and stores it has not reported before.
func (o *Observer) collect(_ context.Context, obs metric.Observer) error {
	snap := o.tally.Snapshot()
	folded := o.tally.Folded()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gen++
	for i := range snap {
		s := &snap[i]
		l := s.Labels
		a := o.seriesAttrs(l)
		for oc := observe.Admitted; int(oc) < observe.NumOutcomes; oc++ {
			n := s.Decisions[oc]
			if n == 0 && oc != observe.Admitted && oc != observe.Denied {
				continue
			}
			obs.ObserveInt64(o.decisions, clamp(n), a.byOutcome[oc]...)
		}
		if l.Store == nil {
			continue
		}
		sa := o.storeAttrs(l)
		if sa.gen == o.gen {
			continue // reported under another scope already
		}
		sa.gen = o.gen
		st := l.Store.Stats()
		obs.ObserveInt64(o.keys, int64(st.Keys), sa.opts...)
		if st.MaxKeys > 0 {
			obs.ObserveInt64(o.maxKeys, int64(st.MaxKeys), sa.opts...)
		}
		obs.ObserveInt64(o.evictions, clamp(st.Evictions), sa.opts...)
		obs.ObserveInt64(o.fullDenials, clamp(st.FullDenials), sa.opts...)
	}
	obs.ObserveInt64(o.folded, int64(folded))
	return nil
}

// seriesAttrs returns the cached attributes of l's series, computing them
// on first use. It requires that o.mu is held.
func (o *Observer) seriesAttrs(l observe.Labels) *seriesAttrs {
	k := seriesKey{l.Source, l.Name, l.Scope, l.Limits}
	a := o.series[k]
	if a == nil {
		a = &seriesAttrs{}
		for oc := observe.Admitted; int(oc) < observe.NumOutcomes; oc++ {
			a.byOutcome[oc] = []metric.ObserveOption{metric.WithAttributeSet(outcomeSet(l, oc))}
		}
		o.series[k] = a
	}
	return a
}

// storeAttrs returns the cached attributes of l's store, computing them on
// first use. It requires that o.mu is held.
func (o *Observer) storeAttrs(l observe.Labels) *storeAttrs {
	k := storeKey{l.Source, l.Name, l.Limits}
	a := o.stores[k]
	if a == nil {
		set := attribute.NewSet(labelAttrs(l, false)...)
		a = &storeAttrs{opts: []metric.ObserveOption{metric.WithAttributeSet(set)}}
		o.stores[k] = a
	}
	return a
}

// clamp converts a count to the int64 an Int64 instrument reports,
// saturating at math.MaxInt64 (a count that would take centuries to reach).
func clamp(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}
