package boltstore

import (
	"os"
	"syscall"
)

// openDirect opens the log for O_DIRECT|O_DSYNC writes: each write goes
// to the device and returns once it is durable (a FUA write or a cache
// flush), in one system call instead of a pwrite into the page cache and
// an fdatasync. tmpfs and some other file systems refuse O_DIRECT.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT|syscall.O_DSYNC, 0)
}
