package atomic

import satomic "sync/atomic"

// The two-word compare-and-swap of the pair form (composite_pair.go), in
// cas128_amd64.s: LOCK CMPXCHG16B, which x86-64 processors have had since
// the first few generations (CPUID.01H:ECX.CX16) and which needs its 16
// bytes aligned to 16.

// cas128 compares the two words at addr, which must be 16-byte aligned,
// with old0 and old1 and, if both are equal, replaces them with new0 and
// new1, as one atomic operation with the ordering of a CompareAndSwap.
// cur0 and cur1 are the words it found, read in the same atomic operation:
// old0 and old1 when it swapped.
//
//go:noescape
func cas128(addr *satomic.Uint64, old0, old1, new0, new1 uint64) (cur0, cur1 uint64, swapped bool)

// load128 returns the two words at addr, which must be 16-byte aligned,
// read at one instant: by one aligned 16-byte SSE load (MOVDQA) when
// movdqaAtomic is set, else by a LOCK CMPXCHG16B that expects and writes
// the same value (zero), which reads the 16 bytes atomically but takes
// the cache line for writing.
//
// Intel (Software Developer's Manual, volume 3A, 9.1.1) and AMD
// (Architecture Programmer's Manual, volume 2, 7.3.2) guarantee that
// processors which report AVX (CPUID.01H:ECX.AVX) carry out aligned 16-byte
// loads such as MOVDQA atomically, on cacheable memory (all Go memory is);
// GCC's and LLVM's 16-byte atomic loads rely on the same guarantee. Either
// load is ordered as Go's atomic loads are on x86-64, which are plain
// loads: the writers (cas128, and Go's atomic stores) are locked
// instructions, which order everything around them.
//
//go:noescape
func load128(addr *satomic.Uint64) (w0, w1 uint64)

// cpuid1 returns ECX of CPUID leaf 1: the processor's feature flags.
func cpuid1() (ecx uint32)

var (
	// cas128OK reports whether the processor has CMPXCHG16B; without it,
	// no composite takes the pair form.
	cas128OK = cpuid1()&(1<<13) != 0
	// movdqaAtomic reports whether aligned 16-byte SSE loads are atomic
	// (the processor reports AVX); load128 reads it.
	movdqaAtomic = cpuid1()&(1<<28) != 0
)
