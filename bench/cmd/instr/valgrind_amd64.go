package main

// valgrindRequest makes a valgrind client request: args[0] is the request,
// args[1:] its arguments. It returns 0 when the program does not run under
// valgrind. See valgrind_amd64.s.
//
//go:noescape
func valgrindRequest(args *[6]uint64) uint64

// canStartInstrumentation reports whether startInstrumentation works on this
// architecture.
const canStartInstrumentation = true

// startInstrumentation asks callgrind to start instrumenting (and simulating
// the caches) from here on: CALLGRIND_START_INSTRUMENTATION of callgrind.h.
// Under --instr-atstart=no, everything before it runs at valgrind's minimal
// slowdown.
func startInstrumentation() {
	args := [6]uint64{callgrindStartInstrumentation}
	valgrindRequest(&args)
}

// callgrindStartInstrumentation is VG_USERREQ__START_INSTRUMENTATION of
// callgrind.h: VG_USERREQ_TOOL_BASE('C','T') + 4.
const callgrindStartInstrumentation = 'C'<<24 | 'T'<<16 + 4
