//go:build !admittest

package table

// pauseEnabled reports whether this build has the tests' pause point (see
// pause_on.go). In a normal build it does not: every use is guarded by this
// constant, so the calls load nothing and the checks compile away.
const pauseEnabled = false

// pausePoint is empty in a normal build.
type pausePoint struct{}

func (*pausePoint) armed() bool  { return false }
func (*pausePoint) take() func() { return nil }
