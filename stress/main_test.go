package stress

import (
	crand "crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"go.uber.org/goleak"

	"github.com/admit-go/admit/internal/hook"
)

var (
	seedFlag   = flag.Uint64("stress.seed", 0, "base seed of every random source (0: pick one and print it)")
	trialsFlag = flag.Int("stress.selftrials", 0, "trials per self-test before it gives up (0: the mode's default)")
	yieldFlag  = flag.Int("stress.yield", -1, "per-mille probability of a yield at a hook site (-1: the default, 250)")
)

// baseSeed is the seed of this run: -stress.seed, or one drawn at start-up.
var baseSeed uint64

// TestMain picks and prints the run's seed, then runs the tests under goleak:
// a goroutine that outlives its test (a sweeper, a worker stuck on a barrier)
// fails the package.
func TestMain(m *testing.M) {
	flag.Parse()
	baseSeed = *seedFlag
	if baseSeed == 0 {
		var b [8]byte
		_, _ = crand.Read(b[:])
		baseSeed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	fmt.Printf("stress: seed %d (rerun with -stress.seed=%d), yield hook compiled in: %v\n", baseSeed, baseSeed, hook.Enabled)
	goleak.VerifyTestMain(m)
}

// seedFor returns the seed of the test or subtest t: the run's seed mixed
// with t's full name, so that `-run` of one subtest with the same
// -stress.seed replays the same operation sequences.
func seedFor(t testing.TB) uint64 {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return mix64(baseSeed ^ h.Sum64())
}

// newRand returns a PCG source for seed and a stream.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, mix64(stream+0x9e3779b97f4a7c15)))
}

// mix64 is splitmix64's finalizer: a cheap, well-mixed hash of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// budget scales the iteration counts: full mode (the default, run by `make
// stress`) and short mode (-short, run by `make test`).
type budget struct {
	full, short int
}

func (b budget) get() int {
	if testing.Short() {
		return b.short
	}
	return b.full
}
