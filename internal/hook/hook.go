// Package hook widens race windows for the stress harness. Variants call
// [Between] at the points where a concurrent operation could slip in: between
// loading a state and publishing the next one (a CAS), and between finding a
// key's entry and using it. In a normal build Between does nothing and
// compiles away. Built with the tag admitstress, it calls the function the
// harness installed with Set, which typically yields the processor now and
// then, so that interleavings that a 2-core machine would rarely produce
// happen within seconds.
package hook

// Site names a point where Between is called.
type Site uint8

const (
	// BeforeCAS is after a state was loaded and decided on, before the CAS
	// that publishes the result.
	BeforeCAS Site = iota + 1
	// AfterLookup is after a key's entry was found in a keyed store, before it
	// is used.
	AfterLookup
	// BeforeLock is after the clock was read, before the lock that guards
	// the key's state is taken: the window in which a reading goes stale.
	BeforeLock
)
