//go:build !amd64

package atomic

import satomic "sync/atomic"

// cas128OK is false on every architecture but amd64: no other has the
// two-word compare-and-swap here, and every composite takes the snapshot
// form, so the functions below are never called.
const cas128OK = false

func cas128(addr *satomic.Uint64, old0, old1, new0, new1 uint64) (cur0, cur1 uint64, swapped bool) {
	panic("atomic: no two-word compare-and-swap on this architecture")
}

func load128(addr *satomic.Uint64) (w0, w1 uint64) {
	panic("atomic: no two-word load on this architecture")
}
