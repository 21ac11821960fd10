package sandbox

import (
	"os"
	"strconv"
	"syscall"
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
