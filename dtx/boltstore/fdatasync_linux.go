package boltstore

import (
	"os"
	"syscall"
)

// fdatasync flushes the log's data and its length, not its timestamps.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
