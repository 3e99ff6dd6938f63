package table

import (
	"hash/maphash"
	"math/bits"
)

// What a key is to the table: its seeded hash (shard, tag and probe
// sequence), its slot's key words, and the recKey the paths under a shard's
// mutex compare it by.

// hash returns key's seeded 64-bit hash, whose top bits choose its shard
// and whose whole is its tag, and its slot's key words (shortKey; 0 with
// hashed keys). A key of up to 15 bytes in a store of full keys is hashed
// from those words by mixKey; every other key by hash/maphash. Both are
// seeded per store, so clients cannot aim keys at one shard or one probe
// sequence.
func (t *Table) hash(key string) (h, k0, k1 uint64) {
	if !t.hashed {
		var short bool
		if k0, k1, short = shortKey(key); short {
			return t.mixKey(k0, k1), k0, k1
		}
	}
	return maphash.String(t.seed, key), k0, k1
}

// mixKey hashes a short key's two words: the multiply-mix (the high and low
// halves of a 128-bit product, folded) of the words xored with seeds, mixed
// again with a third seed: the construction of Go's runtime map hash for 9
// to 16 bytes on machines without AES (wyhash), on words shortKey has
// already read: under callgrind it saved 35 of the 67 instructions
// maphash.String took per keyed Allow. Its tags
// only need to spread keys: a table compares the key's words whenever two
// tags match. (With hashed keys, where the hash is the key's identity, the
// store uses maphash.)
func (t *Table) mixKey(k0, k1 uint64) uint64 {
	return mix(mix(k0^t.mix[0], k1^t.mix[1]), t.mix[2])
}

// mix folds the 128-bit product of a and b.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// recKeyOf returns what the store compares a key by, from its hash and key
// words (hash): its tag and key words (and the key itself for a long one);
// with hashed keys, whose words are 0, the tag alone.
func recKeyOf(h, k0, k1 uint64, key string) recKey {
	rk := recKey{tag: tagOf(h), k0: k0, k1: k1}
	if k1 == longMark {
		rk.long = key
	}
	return rk
}

// locate returns key's shard and recKey, for the calls that work under the
// shard's mutex (reservations, cancellations, Reset).
func (t *Table) locate(key string) (*shard, recKey) {
	h, k0, k1 := t.hash(key)
	return &t.shards[h>>t.shift], recKeyOf(h, k0, k1, key)
}
