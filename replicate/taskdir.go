package replicate

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/private"
)

// prepareDir makes the task's dir and takes its lock, and turns the
// failures a user can fix into one line with the fix: dir: names a file,
// or the dir (or a parent) is not writable by this user or sits on a
// read-only file system.
func prepareDir(dir, name string) (func(), error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, dirError(dir, name, syscall.ENOTDIR)
	}
	if err := private.MkdirAll(dir); err != nil {
		return nil, dirError(dir, name, err)
	}
	unlock, err := lockDir(dir, name)
	if err != nil {
		var se *sluice.Error
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, dirError(dir, name, err)
	}
	return unlock, nil
}

func dirError(dir, name string, err error) error {
	op := "task " + name + " dir " + dir
	switch {
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EEXIST):
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: dir: names a file (or a path through one), not a directory", sluice.ErrConfig),
			Hint: "set dir: in the task file to a directory path (sluice creates it), or move the file away"}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: the task's dir is not writable: %v", sluice.ErrConfig, err),
			Hint: "make it writable by the user sluice runs as (chown/chmod, or remount read-write; chattr -i if it is immutable), or set dir: to a writable directory"}
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: %v", sluice.ErrDiskFull, err), Hint: "free space on the task dir's file system, or set dir: elsewhere"}
	}
	return fmt.Errorf("%s: %w", op, err)
}
