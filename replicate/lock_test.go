package replicate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdLock takes task.lock in dir through its own open file (as another
// process would) and writes pid into it as the holder.
func holdLock(t *testing.T, dir string, pid int) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "task.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// A live holder is refused at once, and the message names its pid.
func TestLockLiveHolderRefused(t *testing.T) {
	dir := t.TempDir()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	f := holdLock(t, dir, sleeper.Process.Pid)
	defer f.Close()
	began := time.Now()
	unlock, err := lockDir(dir, "t")
	if err == nil {
		unlock()
		t.Fatal("lock taken while a live process holds it")
	}
	if !strings.Contains(err.Error(), strconv.Itoa(sleeper.Process.Pid)) || !strings.Contains(err.Error(), "is locked") {
		t.Fatalf("error does not name the holder's pid %d: %v", sleeper.Process.Pid, err)
	}
	if d := time.Since(began); d > lockWait/2 {
		t.Fatalf("refusing a live holder took %s (must be at once)", d)
	}
}

// A holder whose recorded pid is dead (the kernel has not released its lock
// yet) is waited for; the start succeeds once the lock is free, and writes
// its own pid.
func TestLockDeadHolderWaited(t *testing.T) {
	dir := t.TempDir()
	f := holdLock(t, dir, deadPid(t))
	before := lockRetries.Load()
	type result struct {
		unlock func()
		err    error
	}
	done := make(chan result, 1)
	go func() {
		u, err := lockDir(dir, "t")
		done <- result{u, err}
	}()
	// Release only once the start has seen the lock held and retried.
	for lockRetries.Load() < before+3 {
		select {
		case r := <-done:
			t.Fatalf("lockDir returned while the lock was held: %v", r.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	f.Close()
	r := <-done
	if r.err != nil {
		t.Fatalf("lock after the dead holder's release: %v", r.err)
	}
	defer r.unlock()
	b, err := os.ReadFile(filepath.Join(dir, "task.lock"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("task.lock holds %q (%v), want this pid %d", b, err, os.Getpid())
	}
}

// A dead holder that never releases (cannot happen with flock, but a pid
// reused or a lock held by a child that inherited it) is refused after the
// bound, not waited for forever.
func TestLockWaitBounded(t *testing.T) {
	dir := t.TempDir()
	f := holdLock(t, dir, deadPid(t))
	defer f.Close()
	old := lockWait
	lockWait = 300 * time.Millisecond
	defer func() { lockWait = old }()
	began := time.Now()
	if unlock, err := lockDir(dir, "t"); err == nil {
		unlock()
		t.Fatal("lock taken while held")
	}
	if d := time.Since(began); d < lockWait {
		t.Fatalf("gave up after %s, before the bound %s", d, lockWait)
	}
}

// TestLockReentrantInProcess: migrate --mode all holds the task lock for
// the copy, and the replication it starts locks again in the same process;
// the lock is released only by the last holder.
func TestLockReentrantInProcess(t *testing.T) {
	dir := t.TempDir()
	u1, err := LockTask(dir, "t")
	if err != nil {
		t.Fatal(err)
	}
	u2, err := lockDir(dir, "t")
	if err != nil {
		t.Fatalf("second lock in the same process: %v", err)
	}
	free := func() bool {
		f, err := os.OpenFile(filepath.Join(dir, "task.lock"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
	}
	u2()
	if free() {
		t.Fatal("the lock was released while the copy still held it")
	}
	u1()
	if !free() {
		t.Fatal("the lock is still held after both released it")
	}
}
