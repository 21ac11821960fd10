package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-db/sluice/internal/procstat"
)

// catchupCmd reads a finished stretch of binlog (what the sysbench part
// wrote) from each endpoint in turn, as fast as the consumer takes it: the
// live rows measure whether a reader keeps up with the source, this
// measures how fast each server can serve. One reader at a time, so they
// do not share the CPU; rounds alternate the order, so neither always
// reads second from a warmer page cache.
func catchupCmd(args []string) error {
	fs := flag.NewFlagSet("catchup", flag.ExitOnError)
	var consumers multi
	fs.Var(&consumers, "consumer", "name=user:password@host:port of an endpoint to read (repeat)")
	from := fs.String("from", "", "start, file:pos")
	to := fs.String("to", "", "end, file:pos (the end of the last event to read)")
	rounds := fs.Int("rounds", 2, "reads per endpoint, the order alternating")
	pid := fs.Int("pid", 0, "sluice's pid, for its CPU and peak RSS")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on one read after this long")
	out := fs.String("json", "", "append the records to this file (JSON lines)")
	_ = fs.Parse(args)
	fp, err := parsePos(*from)
	if err != nil {
		return err
	}
	tp, err := parsePos(*to)
	if err != nil {
		return err
	}
	eps := make([]endpoint, len(consumers))
	for i, s := range consumers {
		if eps[i], err = parseEndpoint(s); err != nil {
			return err
		}
	}
	if len(eps) == 0 {
		return errors.New("need at least one -consumer")
	}
	var f *os.File
	if *out != "" {
		if f, err = os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return err
		}
		defer f.Close()
	}
	for r := 0; r < *rounds; r++ {
		for k := range eps {
			i := k
			if r%2 == 1 {
				i = len(eps) - 1 - k
			}
			rec, err := catchupOne(eps[i], uint32(61000+i), fp, tp, *pid, *timeout)
			if err != nil {
				return err
			}
			rec.Round = r + 1
			c := rec.Consumers[0]
			fmt.Printf("  round %d %-8s %8.0f TPS %9.0f EPS %7.2f MB/s in %.1f s; sluice CPU %.1f s, peak RSS %.0f MB\n",
				r+1, c.Name, c.TPS, c.EPS, c.BPS/1e6, c.Secs, rec.SluiceCPU, rec.SluiceRSS)
			if f != nil {
				line, _ := json.Marshal(rec)
				if _, err := f.Write(append(line, '\n')); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func catchupOne(ep endpoint, serverID uint32, from, to mysql.Position, pid int, timeout time.Duration) (record, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newConsumer(ep, serverID, 0, 0)
	c.from, c.until = &from, &to
	cpu0 := procCPU(pid)
	rss := procstat.StartPeakRSS(pid)
	var wg sync.WaitGroup
	ready := make(chan error, 1)
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- c.run(ctx, ready)
	}()
	defer wg.Wait()
	defer cancel()
	if err := <-ready; err != nil {
		rss.Stop()
		return record{}, err
	}
	select {
	case <-c.done:
	case err := <-errc:
		rss.Stop()
		if err == nil {
			err = errors.New("stream ended")
		}
		return record{}, fmt.Errorf("catch-up read of %s: %w", ep.Name, err)
	case <-time.After(timeout):
		rss.Stop()
		return record{}, fmt.Errorf("catch-up read of %s did not reach %s within %s", ep.Name, to, timeout)
	}
	rec := record{Part: "catchup", When: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	rec.SluiceCPU = procCPU(pid) - cpu0
	rec.SluiceRSS = rss.Stop()
	res := c.result(time.Now(), time.Time{})
	rec.Consumers = []result{res}
	rec.WindowSec = res.Secs
	return rec, nil
}

func parsePos(s string) (mysql.Position, error) {
	file, pos, ok := strings.Cut(s, ":")
	p, err := strconv.ParseUint(pos, 10, 32)
	if !ok || err != nil || file == "" {
		return mysql.Position{}, fmt.Errorf("position %q: want file:pos", s)
	}
	return mysql.Position{Name: file, Pos: uint32(p)}, nil
}
