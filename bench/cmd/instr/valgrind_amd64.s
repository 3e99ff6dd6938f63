#include "textflag.h"

// func valgrindRequest(args *[6]uint64) uint64
//
// Valgrind's client request for amd64 (valgrind.h,
// VALGRIND_DO_CLIENT_REQUEST_EXPR): the four rotations of DI (by 128 bits in
// all, so DI is unchanged when no valgrind runs) that valgrind recognises,
// then xchgq %rbx,%rbx, which asks valgrind for "DX = request(AX)". Written
// as bytes so that the encoding is exactly the one valgrind matches. Outside
// valgrind it is a no-op and returns 0.
TEXT ·valgrindRequest(SB), NOSPLIT, $0-16
	MOVQ args+0(FP), AX
	XORQ DX, DX
	BYTE $0x48; BYTE $0xc1; BYTE $0xc7; BYTE $0x03 // rolq $3, %rdi
	BYTE $0x48; BYTE $0xc1; BYTE $0xc7; BYTE $0x0d // rolq $13, %rdi
	BYTE $0x48; BYTE $0xc1; BYTE $0xc7; BYTE $0x3d // rolq $61, %rdi
	BYTE $0x48; BYTE $0xc1; BYTE $0xc7; BYTE $0x33 // rolq $51, %rdi
	BYTE $0x48; BYTE $0x87; BYTE $0xdb             // xchgq %rbx, %rbx
	MOVQ DX, ret+8(FP)
	RET
