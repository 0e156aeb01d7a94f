package goclients

import "syscall"

// dieWithParent makes a broker process die with the test binary that
// started it (SIGKILL when its parent thread exits), so that a failed or
// interrupted test leaves no broker behind. The signal follows the OS
// thread that started it, not the process (golang/go#27505): a thread
// Go ends (one a goroutine locked and never unlocked) would kill its
// brokers early. Nothing in these tests locks threads.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
