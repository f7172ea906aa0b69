//go:build !linux

package signals

import "errors"

// Processes is not implemented where there is no /proc: callers fall back
// to the process group.
func Processes() ([]Process, error) { return nil, errors.ErrUnsupported }
