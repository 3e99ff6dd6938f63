package table

import (
	"encoding/binary"
	"math/bits"
	"strings"
	"sync/atomic"
	"unsafe"
)

// This file is one shard's open-addressing table: its slot layout, its
// probe sequence and its sizing. docs/keyed-stores.md ("The lock-free
// table") has the protocols that use it and their linearization points.
//
// A slot is four 64-bit words (32 bytes, two to a 64-byte cache line), or
// two with hashed keys (16 bytes, four to a line):
//
//	word 0  tag: the key's seeded 64-bit hash (a hash of 0 is stored as 1);
//	        0 while the slot is empty
//	word 1  state: the key's packed state, or a sentinel of the store
//	        (tombstone, held)
//	word 2  full keys only: a short key's bytes 0..7, little-endian; for a
//	        long key, its length
//	word 3  full keys only: a short key's bytes 8..14 and its length in the
//	        top byte; for a long key, longMark, the key itself being in
//	        the table's longs at the slot's index
//
// A key of up to 15 bytes lives inside its slot, so that a lookup that hits
// reads one cache line. The table holds no Go pointer (longs apart), so the
// garbage collector never scans it, whatever its size.
//
// The tag and the key words of a slot are written once, under the shard's
// mutex, before the tag is published by an atomic store; a slot is never
// emptied or given to another key while the table is in use (a tombstone
// keeps its key, and only a rebuild drops it). So a lookup that loads a
// non-zero tag may read the key words without a lock, and a slot that
// matched a key stays that key's slot for the table's whole life.

// longMark in word 3 marks a key of more than 15 bytes, kept out of line.
// A short key's word 3 has its length (at most 15) in the top byte.
const longMark = 0xff << 56

// Sizing: a table holds at most maxLoadNum/maxLoadDen of its slots in use
// (keys and tombstones); a rebuild gives the keys fillNum/fillDen of the new
// table's slots (size).
const (
	minSlots   = 8
	maxLoadNum = 7 // a table is rebuilt before more than 7/8 of its
	maxLoadDen = 8 // slots hold a tag
	// After a rebuild the keys fill 7/10 of the new table, so the load of a
	// growing table moves between 0.7 and 0.875: 36.6 to 45.7 bytes of
	// slots per key with full keys, 18.3 to 22.9 with hashed keys.
	fillNum = 7
	fillDen = 10
)

// tab is one shard's table. Its words are shared lock-free; its counts and
// longs are written only under the shard's mutex.
type tab struct {
	w      []atomic.Uint64 // slots × (1 << stride) words
	n      uint64          // slots
	stride uint            // log2 of the words in a slot: 2 (full keys) or 1 (hashed)
	used   int             // slots with a tag (keys and tombstones); guarded by the shard's mutex
	live   int             // slots whose key is stored (not a tombstone); guarded by the shard's mutex
	max    int             // the most slots with a tag before a rebuild

	// longs holds the keys of more than 15 bytes, at their slots' indexes,
	// allocated with the first of them. The pointer is published before the
	// tag of the slot that needs it, and each entry before its slot's tag.
	longs atomic.Pointer[[]atomic.Pointer[string]]
}

// size returns the slots of a table for keys keys: keys/0.7, at least
// minSlots.
func size(keys int) uint64 {
	return max(minSlots, (uint64(keys)*fillDen+fillNum-1)/fillNum)
}

func newTab(slots uint64, stride uint) *tab {
	return &tab{
		w:      make([]atomic.Uint64, slots<<stride),
		n:      slots,
		stride: stride,
		max:    int(slots * maxLoadNum / maxLoadDen),
	}
}

// slot returns slot i's words 0 and 1: its tag and its state word.
func (t *tab) slot(i uint64) *[2]atomic.Uint64 {
	return (*[2]atomic.Uint64)(unsafe.Pointer(&t.w[i<<t.stride]))
}

// key returns slot i's words 2 and 3, its key; only a table of full keys
// has them.
func (t *tab) key(i uint64) *[2]atomic.Uint64 {
	return (*[2]atomic.Uint64)(unsafe.Pointer(&t.w[i<<t.stride+2]))
}

// start returns the first slot of the probe sequence of hash h, whose top
// sbits bits chose the shard: the remaining bits scaled to [0, n) by a
// multiply-high (fastrange), so that any number of slots is as cheap as a
// power of two.
func (t *tab) start(h uint64, sbits uint) uint64 {
	hi, _ := bits.Mul64(h<<sbits, t.n)
	return hi
}

// tagOf returns the tag of hash h: h, with 0 stored as 1 (0 marks an empty
// slot).
func tagOf(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// shortKey returns the words 2 and 3 of key, and ok false if the key is
// longer than 15 bytes (its words are then its length and longMark). It
// reads the key with overlapping loads, never past its end, and no copy.
func shortKey(key string) (k0, k1 uint64, ok bool) {
	n := len(key)
	if n > 15 {
		return uint64(n), longMark, false
	}
	b := unsafe.Slice(unsafe.StringData(key), n)
	switch {
	case n >= 8:
		// Bytes 8..n-1 are the top n-8 bytes of the last eight.
		k0 = binary.LittleEndian.Uint64(b)
		k1 = binary.LittleEndian.Uint64(b[n-8:]) >> (8 * (16 - n))
	case n >= 4:
		// Two overlapping 4-byte loads; the bytes they share agree.
		k0 = uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<(8*(n-4))
	case n > 0:
		k0 = uint64(b[0]) | uint64(b[n/2])<<(8*(n/2)) | uint64(b[n-1])<<(8*(n-1))
	}
	return k0, k1 | uint64(n)<<56, true
}

// find returns the slot of the key whose tag is tag and whose words 2 and 3
// are k0 and k1 (key itself for a long one; ignored with hashed keys), or,
// with ok false, the empty slot at which the probe sequence ended: where
// the key would be inserted. It takes no
// lock: every slot it reads was published by its tag (see the top of this
// file), and a table always has an empty slot, so the probe ends.
func (t *tab) find(tag, k0, k1 uint64, key string, hashed bool, sbits uint) (i uint64, ok bool) {
	i = t.start(tag, sbits)
	w := unsafe.Pointer(unsafe.SliceData(t.w)) // slot i is at i<<(stride+3) bytes
	if hashed {
		for {
			s := (*[2]atomic.Uint64)(unsafe.Add(w, i<<4))
			switch s[0].Load() {
			case 0:
				return i, false
			case tag:
				return i, true
			}
			if i++; i == t.n {
				i = 0
			}
		}
	}
	for {
		s := (*[4]atomic.Uint64)(unsafe.Add(w, i<<5))
		switch s[0].Load() {
		case 0:
			return i, false
		case tag:
			if s[2].Load() == k0 && s[3].Load() == k1 && (k1 != longMark || t.long(i) == key) {
				return i, true
			}
		}
		if i++; i == t.n {
			i = 0
		}
	}
}

// first returns the slot of a short key in a table of full keys if it is
// the first of its probe sequence, the common case, in a check small enough
// to inline into the caller; ok false says nothing: the caller then calls
// find. firstHashed is the same for a table of hashed keys.
func (t *tab) first(tag, k0, k1 uint64, sbits uint) (i uint64, ok bool) {
	i = t.start(tag, sbits)
	s := (*[4]atomic.Uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.w)), i<<5))
	return i, s[0].Load() == tag && s[2].Load() == k0 && s[3].Load() == k1 && k1 != longMark
}

func (t *tab) firstHashed(tag uint64, sbits uint) (i uint64, ok bool) {
	i = t.start(tag, sbits)
	s := (*[2]atomic.Uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.w)), i<<4))
	return i, s[0].Load() == tag
}

// long returns the long key of slot i.
func (t *tab) long(i uint64) string {
	return *(*t.longs.Load())[i].Load()
}

// claim writes a new key into the first empty slot of tag's probe sequence,
// with state word w, and publishes it; it returns the slot. owned says
// whether a long key's bytes are already the table's own (setLong). The table must
// have room (used < max) and must not hold the key. It requires the shard's
// mutex.
func (t *tab) claim(tag, k0, k1 uint64, key string, owned bool, w uint64, hashed bool, sbits uint) uint64 {
	i := t.start(tag, sbits)
	for t.slot(i)[0].Load() != 0 {
		if i++; i == t.n {
			i = 0
		}
	}
	t.claimAt(i, tag, k0, k1, key, owned, w, hashed)
	return i
}

// claimAt writes a new key into the empty slot i, with state word w, and
// publishes it by an atomic store of its tag. No other goroutine reads an
// empty slot's other words (a lookup stops at its zero tag; everything else
// holds the shard's mutex), so they are written with plain stores, which
// the tag's store orders before any read of them: a locked instruction
// saved per word, on every insertion and every copy of a rebuild. It
// requires the shard's mutex, and room (used < max).
func (t *tab) claimAt(i, tag, k0, k1 uint64, key string, owned bool, w uint64, hashed bool) {
	s := t.slot(i)
	plain(&s[1], w)
	if !hashed {
		if k1 == longMark {
			t.setLong(i, key, owned)
		}
		kw := t.key(i)
		plain(&kw[0], k0)
		plain(&kw[1], k1)
	}
	s[0].Store(tag) // publishes the slot: everything above happens before
	t.used++
	t.live++
}

// plain stores v into the word p without an atomic instruction; see
// claimAt for when that is safe.
func plain(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }

// setLong stores a long key for slot i: our own copy, or key itself if it
// is already ours (owned: a rebuild moving it). It requires the
// shard's mutex.
func (t *tab) setLong(i uint64, key string, owned bool) {
	lp := t.longs.Load()
	if lp == nil {
		l := make([]atomic.Pointer[string], t.n)
		lp = &l
		t.longs.Store(lp)
	}
	k := key
	if !owned {
		k = strings.Clone(key) // the caller may reuse the key's memory
	}
	(*lp)[i].Store(&k)
}
