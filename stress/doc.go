// Package stress will hold admit's stress harness, run as
//
//	go test -race ./stress
//
// It hammers every variant and algorithm from many goroutines and checks exact
// oracles (admitted weight under a frozen clock, conservation under a phased
// clock, linearizability of recorded histories), and it proves it can fail by
// catching deliberately broken limiters. Until it lands, the concurrency checks
// live in each variant's own tests (internal/conformance).
package stress
