//go:build !linux

package stress

import "runtime"

// pinThread locks the calling goroutine to its thread; pinning the thread
// to a CPU is done on Linux only (pin_linux_test.go).
func pinThread(int) (unpin func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
