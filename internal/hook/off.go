//go:build !admitstress

package hook

// Enabled reports whether this build calls the harness's hook.
const Enabled = false

// Between does nothing in a normal build.
func Between(Site) {}

// Set is a no-op in a normal build.
func Set(func(Site)) {}
