package bench

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// Keys returns n distinct keys shaped like client addresses ("10.0.3.17"): the
// same strings, in the same order, for every call with the same n.
func Keys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		// 10.0.0.0/8 holds 2^24 addresses; a key's bytes are its index.
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
		if i >= 1<<24 {
			keys[i] = fmt.Sprintf("k%d", i)
		}
	}
	return keys
}

// KeyLengths returns the mean, shortest and longest length in bytes of the
// n keys Keys(n) returns.
func KeyLengths(n int) (mean float64, shortest, longest int) {
	total, shortest := 0, int(^uint(0)>>1)
	for _, k := range Keys(n) {
		total += len(k)
		shortest, longest = min(shortest, len(k)), max(longest, len(k))
	}
	return float64(total) / float64(n), shortest, longest
}

// Distribution names how a workload picks keys.
type Distribution string

const (
	// Uniform picks every key with the same probability.
	Uniform Distribution = "uniform"
	// Zipf picks key i with probability proportional to 1/(i+1)^1.1: a few hot
	// clients and a long tail, as in real traffic.
	Zipf Distribution = "zipf"
)

// ZipfS is the exponent of the Zipf distribution.
const ZipfS = 1.1

// SeqLen is the length of a pre-generated sequence of key indices: at least
// as long as the largest key set, so a uniform sequence touches (almost) every
// key rather than a cache-friendly subset.
const SeqLen = 1 << 20

// Sequence returns SeqLen key indices in [0, n) drawn from dist with a fixed
// seed: every implementation sees exactly the same keys in the same order. The
// workloads generate the sequence before measuring, so picking a key costs a
// load, the same for every implementation.
func Sequence(n int, dist Distribution) []int32 {
	r := rand.New(rand.NewPCG(uint64(n), 0x5eed))
	seq := make([]int32, SeqLen)
	switch dist {
	case Uniform:
		for i := range seq {
			seq[i] = int32(r.IntN(n))
		}
	case Zipf:
		z := rand.NewZipf(r, ZipfS, 1, uint64(n-1))
		for i := range seq {
			seq[i] = int32(z.Uint64())
		}
	default:
		panic("bench: unknown distribution " + string(dist))
	}
	return seq
}

// Workload is a key set and a sequence of picks from it.
type Workload struct {
	Keys []string
	Seq  []int32
}

var workloads sync.Map // "n/dist" -> *Workload

// maxCached is the largest key set KeyedWorkload keeps for later callers:
// larger ones would stay in the live heap and slow every later benchmark's
// garbage collections.
const maxCached = 100_000

// KeyedWorkload returns the workload of n keys drawn from dist, shared with
// later callers when n <= maxCached.
func KeyedWorkload(n int, dist Distribution) *Workload {
	if n > maxCached {
		return &Workload{Keys: Keys(n), Seq: Sequence(n, dist)}
	}
	id := fmt.Sprint(n, "/", dist)
	if w, ok := workloads.Load(id); ok {
		return w.(*Workload)
	}
	w := &Workload{Seq: Sequence(n, dist)}
	if other, ok := workloads.Load(fmt.Sprint(n, "/", Uniform)); ok && dist != Uniform {
		w.Keys = other.(*Workload).Keys // the same n keys: share them
	} else {
		w.Keys = Keys(n)
	}
	v, _ := workloads.LoadOrStore(id, w)
	return v.(*Workload)
}

// KeyedWorkloads returns one workload per distribution over the same n keys.
func KeyedWorkloads(n int, dists ...Distribution) []*Workload {
	ws := make([]*Workload, len(dists))
	if n <= maxCached {
		for i, d := range dists {
			ws[i] = KeyedWorkload(n, d)
		}
		return ws
	}
	keys := Keys(n)
	for i, d := range dists {
		ws[i] = &Workload{Keys: keys, Seq: Sequence(n, d)}
	}
	return ws
}
