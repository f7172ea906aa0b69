//go:build !linux

package signals

import "errors"

// Undumpable is not available: the process is left as it is.
func Undumpable() error { return errors.ErrUnsupported }
