package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"time"
)

var sbLine = regexp.MustCompile(`transactions:\s+(\d+)\s+\(([\d.]+) per sec`)

// sysbench runs oltp_write_only; its figures come from the same counters.
func (b *bench) sysbench(ctx context.Context) (measurement, error) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		return measurement{}, errors.New("sysbench is not installed (make deps)")
	}
	if _, err := b.db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS sbtest"); err != nil {
		return measurement{}, err
	}
	args := []string{"oltp_write_only", "--mysql-host=127.0.0.1", fmt.Sprintf("--mysql-port=%d", b.inst.Port), "--mysql-user=root",
		"--mysql-db=sbtest", fmt.Sprintf("--tables=%d", b.o.sbTables), fmt.Sprintf("--table-size=%d", b.o.sbSize),
		fmt.Sprintf("--threads=%d", b.o.threads)}
	var exists int
	_ = b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='sbtest'").Scan(&exists)
	if exists < b.o.sbTables {
		if out, err := exec.CommandContext(ctx, "sysbench", append(args, "prepare")...).CombinedOutput(); err != nil {
			return measurement{}, fmt.Errorf("sysbench prepare: %v\n%s", err, out)
		}
	}
	c0, err := b.counters(ctx)
	if err != nil {
		return measurement{}, err
	}
	start := time.Now()
	out, err := exec.CommandContext(ctx, "sysbench", append(args, fmt.Sprintf("--time=%d", int(b.o.duration.Seconds())), "--percentile=99", "run")...).CombinedOutput()
	if err != nil {
		return measurement{}, fmt.Errorf("sysbench run: %v\n%s", err, out)
	}
	el := time.Since(start).Seconds()
	c1, err := b.counters(ctx)
	if err != nil {
		return measurement{}, err
	}
	m := measurement{}
	m.addCounters(c0, c1, el)
	if sm := sbLine.FindSubmatch(out); sm == nil {
		return m, fmt.Errorf("sysbench output without a transactions line:\n%s", out)
	}
	return m, nil
}
