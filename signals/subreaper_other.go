//go:build !linux

package signals

import "errors"

// becomeSubreaper is not available: orphans go to init, and only the
// child's process group can be stopped.
func becomeSubreaper() error { return errors.ErrUnsupported }
