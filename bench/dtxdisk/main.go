// Command dtxdisk asks whether the disk under a file completes overlapping
// O_DIRECT|O_DSYNC 4 KiB writes sooner than the same writes one after the
// other: the question that decides whether pipelined group commits (the
// next batch's synced write starting while the previous one is in flight)
// could shorten the wait of sluice dtx's store. It prints, per mode, the
// mean, p50 and p90 of:
//
//   - pair: two writes to neighbouring blocks, issued together or in turn;
//   - arrival: a second write that arrives -delay into the first one,
//     issued at once (pipelined) or once the first returned (serialized),
//     timed from its arrival to both being durable.
//
// Usage: go run ./bench/dtxdisk -file /path/on/the/disk/probe (64 MiB, removed after).
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	path := flag.String("file", "dtxdisk.probe", "scratch file on the disk to measure (64 MiB, removed after)")
	n := flag.Int("n", 400, "samples per mode and round")
	rounds := flag.Int("rounds", 3, "rounds (the modes alternate within each)")
	delay := flag.Duration("delay", 200*time.Microsecond, "arrival: how far into the first write the second arrives")
	flag.Parse()
	if err := run(*path, *n, *rounds, *delay); err != nil {
		fmt.Fprintln(os.Stderr, "dtxdisk:", err)
		os.Exit(1)
	}
}

func run(path string, n, rounds int, delay time.Duration) error {
	const size = 64 << 20
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%w (fix: name a file that does not exist yet)", err)
	}
	defer os.Remove(path)
	// Written zeros, as the store preallocates its log: no extent changes later.
	if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	f.Close()
	d, err := os.OpenFile(path, os.O_RDWR|syscall.O_DIRECT|syscall.O_DSYNC, 0)
	if err != nil {
		return fmt.Errorf("O_DIRECT|O_DSYNC: %w", err)
	}
	defer d.Close()
	b1, b2 := aligned(), aligned()
	off := int64(0)
	next := func() int64 { o := off; off = (off + 8192) % (size - 8192); return o }
	write := func(b []byte, o int64) {
		if _, err := d.WriteAt(b, o); err != nil {
			fmt.Fprintln(os.Stderr, "dtxdisk:", err)
			os.Exit(1)
		}
	}
	modes := []string{"one write", "pair in turn", "pair together", "arrival serialized", "arrival pipelined"}
	res := make([][]time.Duration, len(modes))
	for r := 0; r < rounds; r++ {
		for m := range modes {
			for i := 0; i < n; i++ {
				o := next()
				var el time.Duration
				switch m {
				case 0:
					t := time.Now()
					write(b1, o)
					el = time.Since(t)
				case 1:
					t := time.Now()
					write(b1, o)
					write(b2, o+4096)
					el = time.Since(t)
				case 2:
					t := time.Now()
					var wg sync.WaitGroup
					wg.Add(1)
					go func() { write(b2, o+4096); wg.Done() }()
					write(b1, o)
					wg.Wait()
					el = time.Since(t)
				case 3, 4:
					done := make(chan struct{})
					go func() { write(b1, o); close(done) }()
					time.Sleep(delay)
					t := time.Now()
					if m == 3 {
						<-done
						write(b2, o+4096)
					} else {
						write(b2, o+4096)
						<-done
					}
					el = time.Since(t)
				}
				res[m] = append(res[m], el)
			}
		}
	}
	for m, x := range res {
		sort.Slice(x, func(i, j int) bool { return x[i] < x[j] })
		var sum time.Duration
		for _, v := range x {
			sum += v
		}
		fmt.Printf("%-19s mean %7.3f ms  p50 %7.3f ms  p90 %7.3f ms\n", modes[m],
			ms(sum/time.Duration(len(x))), ms(x[len(x)/2]), ms(x[len(x)*9/10]))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// aligned is a 4 KiB block at a 4 KiB-aligned address, as O_DIRECT wants.
func aligned() []byte {
	b := make([]byte, 8192)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 4095)
	return b[skip : skip+4096]
}
