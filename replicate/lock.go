package replicate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/private"
	"github.com/sluice-db/sluice/internal/procstat"
)

// lockWait bounds how long a start waits for a lock whose holder is dead or
// dying. The kernel drops a killed process's flock only once the process has
// finished exiting (all its threads), which can come after the kill returns:
// a restart at once would otherwise find the lock still held.
var lockWait = 10 * time.Second

// lockRetries counts the attempts that found the lock held by an exiting
// process; tests use it to see a start waiting.
var lockRetries atomic.Int64

// lockPoll is the interval between attempts while the holder exits.
const lockPoll = 20 * time.Millisecond

// lockDir takes an exclusive lock on dir/task.lock so two processes never
// run the same task; the kernel drops it when the process dies, even on
// kill -9. The holder's pid is written into the file so that a start can
// tell a live holder (refused at once, with its pid) from one that is dead
// or exiting (waited for, up to lockWait).
func lockDir(dir, name string) (func(), error) {
	key, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("replicate: %w", err)
	}
	heldMu.Lock()
	defer heldMu.Unlock()
	if h := held[key]; h != nil {
		// This process holds it already: migrate --mode all locks the
		// task for the copy, and the replication it starts locks again.
		h.n++
		return h.release, nil
	}
	f, err := lockFile(dir, name)
	if err != nil {
		return nil, err
	}
	h := &heldLock{f: f, n: 1}
	h.release = func() {
		heldMu.Lock()
		defer heldMu.Unlock()
		if h.n--; h.n == 0 {
			delete(held, key)
			h.f.Close()
		}
	}
	held[key] = h
	return h.release, nil
}

// held are the task locks this process holds, by absolute directory.
var (
	heldMu sync.Mutex
	held   = map[string]*heldLock{}
)

type heldLock struct {
	f       *os.File
	n       int
	release func()
}

// LockTask takes the task's lock in dir (made if missing) for a command
// that changes the task's state outside replication: the full copy, dump
// and load. Two processes never run one task at once; the second is
// refused with the first one's pid. The returned func releases it.
func LockTask(dir, name string) (func(), error) {
	return prepareDir(dir, name) // taskdir.go
}

func lockFile(dir, name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "task.lock"), os.O_CREATE|os.O_RDWR, private.FileMode)
	if err != nil {
		return nil, fmt.Errorf("replicate: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("replicate: lock %s: %w", f.Name(), err)
		}
		pid := lockHolder(f)
		if pid > 0 && !exiting(pid) || time.Now().After(deadline) {
			f.Close()
			who := "another sluice process"
			if pid > 0 {
				who = fmt.Sprintf("sluice process %d", pid)
			}
			return nil, &sluice.Error{Op: "start task " + name, Err: fmt.Errorf("%w: %s runs this task (%s is locked)", sluice.ErrConfig, who, f.Name()),
				Hint: "stop the other process first (sluice status --config shows its pid)"}
		}
		lockRetries.Add(1)
		time.Sleep(lockPoll)
	}
	// Best effort: the pid only helps a later start decide whether to wait.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockHolder reads the pid the lock's holder wrote; 0 when there is none
// (a holder that has just locked and not yet written, or an older version).
func lockHolder(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// exiting reports whether process pid is gone, a zombie, or has a SIGKILL
// pending (it is being torn down and will release its files). A pid that
// was reused by an unrelated live process looks alive: the start is then
// refused, which is the safe side.
func exiting(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	switch procstat.State(pid) {
	case "": // gone since the signal, or unreadable: as before, gone only if gone
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return errors.Is(err, os.ErrNotExist)
	case "Z", "X", "x":
		return true
	}
	// procfs does not parse the pending-signal masks: read them here.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err == nil && mask&(1<<(uint(syscall.SIGKILL)-1)) != 0 {
			return true
		}
	}
	return false
}

// Holder reports whether a process holds the task's lock in dir, and its
// pid when it wrote one (0: unknown).
func Holder(dir string) (pid int, running bool, err error) {
	f, err := os.Open(filepath.Join(dir, "task.lock"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return 0, false, nil
	}
	return lockHolder(f), true, nil
}
