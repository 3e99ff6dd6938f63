// Package atomic will hold admit's lock-free variant: each key's state swapped
// by compare-and-swap, either as an immutable snapshot behind an atomic.Pointer
// or packed into a single atomic word, for the hottest keys. It is not released
// yet and exports nothing; use package locked meanwhile.
//
// The name collides with sync/atomic; import it under an alias:
//
//	import admitatomic "github.com/admit-go/admit/atomic"
package atomic
