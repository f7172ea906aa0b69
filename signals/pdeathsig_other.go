//go:build !linux

package signals

import "syscall"

// setParentDeathSignal does nothing where there is no parent-death signal: a
// SIGKILLed wrapper leaves its child running there (see the limits in
// docs/guarantees.md).
func setParentDeathSignal(*syscall.SysProcAttr) {}
