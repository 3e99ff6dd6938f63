package admit

// UseFreshTimers makes the Wait functions sleep on a new timer pool until the
// returned function restores the old one. Tests inside a synctest bubble call
// it first: a timer made outside a bubble runs on real time.
func UseFreshTimers() (restore func()) {
	old := sleeper
	sleeper = new(timerPool)
	return func() { sleeper = old }
}
