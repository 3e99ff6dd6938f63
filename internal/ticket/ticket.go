// Package ticket numbers reservations: every token-bucket reservation that
// can be cancelled gets a ticket no other reservation of any limiter in the
// process ever gets, so that a cancellation can tell it from every other.
package ticket

import "sync/atomic"

var last atomic.Uint64

// Next returns a new ticket: never 0, never returned before. At a billion
// reservations a second, the 64-bit counter lasts 584 years.
func Next() uint64 { return last.Add(1) }
