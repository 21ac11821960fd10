// Command lockholder holds a task's task.lock the way a sluice process does
// (flock, its pid in the file) while owning a large amount of touched
// memory, so that after kill -9 the kernel takes a while (freeing the memory
// comes before closing the files) to release the lock. Tests use it to hit
// the window a restart right after a kill falls into.
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

func main() {
	mb, _ := strconv.Atoi(os.Args[2])
	f, err := os.OpenFile(os.Args[1], os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		panic(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		panic(err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	mem := make([]byte, mb<<20)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	fmt.Println("ready")
	_, _ = os.Stdin.Read(make([]byte, 1))
	fmt.Println(mem[len(mem)-4096])
}
