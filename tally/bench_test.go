package tally_test

import (
	"sync/atomic"
	"testing"

	"github.com/admit-go/admit/observe"
	"github.com/admit-go/admit/tally"
)

// BenchmarkObserve measures one count from every goroutine of -cpu at once:
// impl=tally is a series' Observe, impl=atomic one shared atomic counter,
// the cost a plain counter would have.
func BenchmarkObserve(b *testing.B) {
	b.Run("impl=tally", func(b *testing.B) {
		tl, err := tally.New()
		if err != nil {
			b.Fatal(err)
		}
		in := tl.Instrument(labels("/a"))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				in.Observe(observe.Admitted, 1, 0)
			}
		})
	})
	b.Run("impl=atomic", func(b *testing.B) {
		var n atomic.Uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
}
