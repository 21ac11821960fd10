package sandbox

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"time"
)

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own files with O_CLOEXEC, but descriptors this process
// inherited (a lock held by `flock cmd`, a pipe from a test harness) are
// passed on to mariadbd, which outlives us and would hold them for good: an
// orphaned server once kept a benchmark lock and queued every later run.
func closeInheritedOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		syscall.CloseOnExec(fd)
	}
}

// stopProcess stops a server process: SIGTERM, a wait of up to timeout
// for it to exit, then SIGKILL; then its pid file goes.
func stopProcess(ctx context.Context, pid int, timeout time.Duration, pidFile string) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			time.Sleep(200 * time.Millisecond)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	_ = os.Remove(pidFile)
	return nil
}

// killProcess sends SIGKILL (a crash) and waits until the process is gone.
func killProcess(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for alive(pid) {
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
