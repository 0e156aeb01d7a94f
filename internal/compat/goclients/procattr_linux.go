package goclients

import "syscall"

// dieWithParent makes a broker process die with the test binary that
// started it (SIGKILL when its parent thread exits), so that a failed or
// interrupted test leaves no broker behind.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
