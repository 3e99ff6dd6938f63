//go:build unix

package redistest

import "syscall"

// Freeze stops the server's process (SIGSTOP), as a machine that hangs or a
// process stalled by its host would: connections stay open and new ones are
// accepted by the kernel, but nothing is answered until [Server.Thaw].
// Stop kills a frozen server too.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw lets a frozen server's process run again (SIGCONT).
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: server on %s is not running", s.Addr)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v to redis-server on %s: %v", sig, s.Addr, err)
	}
}
