//go:build !linux

package signals

import "syscall"

// setParentDeathSignal does nothing where there is no parent-death signal: a
// SIGKILLed wrapper leaves its child running there (see the README's limits).
func setParentDeathSignal(*syscall.SysProcAttr) {}
