//go:build linux

package signals

import "syscall"

// setParentDeathSignal makes the kernel SIGKILL the child if the wrapper dies
// without stopping it (for example when the wrapper itself is SIGKILLed).
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
