//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package casstore

import (
	"os"
	"syscall"
)

// fileLocking reports whether this platform has the flock(2) the file store
// needs for cross-process compare-and-swap.
const fileLocking = true

// flock takes (exclusive) or releases an exclusive advisory lock on lf,
// blocking until it is granted. Locks belong to the open file description,
// so two File values in one process exclude each other as two processes do.
func flock(lf *os.File, exclusive bool) error {
	how := syscall.LOCK_UN
	if exclusive {
		how = syscall.LOCK_EX
	}
	return syscall.Flock(int(lf.Fd()), how)
}
