//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package casstore

import "os"

// fileLocking reports whether this platform has the flock(2) the file store
// needs for cross-process compare-and-swap. Without it NewFile refuses.
const fileLocking = false

func flock(*os.File, bool) error { return ErrUnsupported }
