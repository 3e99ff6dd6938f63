//go:build admitstress

package hook

import "sync/atomic"

// Enabled reports whether this build calls the harness's hook.
const Enabled = true

var fn atomic.Pointer[func(Site)]

// Between calls the hook installed by Set, if any.
func Between(s Site) {
	if f := fn.Load(); f != nil {
		(*f)(s)
	}
}

// Set installs f as the hook (nil removes it).
func Set(f func(Site)) {
	if f == nil {
		fn.Store(nil)
		return
	}
	fn.Store(&f)
}
