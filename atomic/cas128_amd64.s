#include "textflag.h"

// func cas128(addr *atomic.Uint64, old0, old1, new0, new1 uint64) (cur0, cur1 uint64, swapped bool)
TEXT ·cas128(SB), NOSPLIT, $0-57
	MOVQ	addr+0(FP), DI
	MOVQ	old0+8(FP), AX
	MOVQ	old1+16(FP), DX
	MOVQ	new0+24(FP), BX
	MOVQ	new1+32(FP), CX
	LOCK
	CMPXCHG16B	(DI)
	SETEQ	swapped+56(FP)
	MOVQ	AX, cur0+40(FP)
	MOVQ	DX, cur1+48(FP)
	RET

// func load128(addr *atomic.Uint64) (w0, w1 uint64)
TEXT ·load128(SB), NOSPLIT, $0-24
	MOVQ	addr+0(FP), DI
	CMPB	·movdqaAtomic(SB), $0
	JEQ	cmpxchg
	MOVOA	(DI), X0
	MOVQ	X0, AX
	PSRLO	$8, X0
	MOVQ	X0, DX
	MOVQ	AX, w0+8(FP)
	MOVQ	DX, w1+16(FP)
	RET
cmpxchg:
	// Expected and new values equal (zero): the memory is left as it is,
	// and DX:AX receives its value either way.
	XORQ	AX, AX
	XORQ	DX, DX
	XORQ	BX, BX
	XORQ	CX, CX
	LOCK
	CMPXCHG16B	(DI)
	MOVQ	AX, w0+8(FP)
	MOVQ	DX, w1+16(FP)
	RET

// func cpuid1() (ecx uint32)
TEXT ·cpuid1(SB), NOSPLIT, $0-4
	MOVL	$1, AX
	XORL	CX, CX
	CPUID
	MOVL	CX, ecx+0(FP)
	RET
