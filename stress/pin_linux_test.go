package stress

import (
	"runtime"
	"syscall"
	"unsafe"
)

// cpuSet is the kernel's cpu_set_t: a bit per CPU, 1,024 CPUs.
type cpuSet [16]uint64

// pinThread locks the calling goroutine to its thread and the thread to
// the i-th CPU the process may run on (modulo their number), and returns
// the function that undoes both. Two goroutines pinned to CPUs 0 and 1
// run at once whenever the kernel gives each its CPU. Unpinned, a busy
// machine's scheduler may keep both threads on one CPU (two CPU-bound
// jobs on the other balance the load just as well), and then no two calls
// ever overlap. If the process may run on one CPU only, or a call fails,
// the thread is locked but not pinned.
func pinThread(i int) (unpin func()) {
	runtime.LockOSThread()
	var was cpuSet
	if sched(syscall.SYS_SCHED_GETAFFINITY, &was) != nil {
		return runtime.UnlockOSThread
	}
	var cpus []int
	for c := range len(was) * 64 {
		if was[c/64]&(1<<(c%64)) != 0 {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return runtime.UnlockOSThread
	}
	var one cpuSet
	c := cpus[i%len(cpus)]
	one[c/64] = 1 << (c % 64)
	if sched(syscall.SYS_SCHED_SETAFFINITY, &one) != nil {
		return runtime.UnlockOSThread
	}
	return func() {
		sched(syscall.SYS_SCHED_SETAFFINITY, &was)
		runtime.UnlockOSThread()
	}
}

// sched calls sched_getaffinity or sched_setaffinity on the calling thread.
func sched(trap uintptr, set *cpuSet) error {
	_, _, errno := syscall.RawSyscall(trap, 0, unsafe.Sizeof(*set), uintptr(unsafe.Pointer(set)))
	if errno != 0 {
		return errno
	}
	return nil
}
