package kernel

import "sync/atomic"

// lastTicket is the last ticket nextTicket returned.
var lastTicket atomic.Uint64

// nextTicket returns a new reservation ticket: never 0, never returned
// before. Every token-bucket reservation that can be cancelled (ReserveHold,
// Composite.ReserveHold) gets one that no other reservation of any limiter
// in the process ever gets, so that a cancellation can tell it from every
// other. At a billion reservations a second, the 64-bit counter lasts 584
// years.
func nextTicket() uint64 { return lastTicket.Add(1) }
