package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/task"
)

// refuseUnmatchedEarly runs checkSelected for a copy alone (--mode full)
// before anything is written to the target: the same check after the dump
// opened came after load.Open had made sluice_meta and its tables there,
// so a refused copy left them behind (issue 30's bad-input table). It looks
// at every table the source lists, of any type: what the dump then refuses
// (a sequence, say) is still refused by the later checks.
func refuseUnmatchedEarly(ctx context.Context, cfg *task.Config, out io.Writer) error {
	db, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES")
	if err != nil {
		return dbconn.Classify(err, "source", cfg.Source)
	}
	defer rows.Close()
	var tables []*dump.TablePlan
	for rows.Next() {
		var ref sluice.TableRef
		if err := rows.Scan(&ref.Schema, &ref.Name); err != nil {
			return dbconn.Classify(err, "source", cfg.Source)
		}
		if cfg.Selected(ref) {
			tables = append(tables, &dump.TablePlan{Table: &sluice.Table{Ref: ref}})
		}
	}
	if err := rows.Err(); err != nil {
		return dbconn.Classify(err, "source", cfg.Source)
	}
	return checkSelected(ctx, cfg, tables, false, out)
}

// checkCopyFlags refuses the copy flags that a negative value silently
// turned into the default, as loadTask does for --threads (issue 30).
func checkCopyFlags(f *fullFlags) error {
	if f.bulkMaxChunks < 0 {
		return sluice.Errorf(sluice.ErrConfig, "--bulk-max-chunks", "give a positive number, or leave the flag out for the default", "--bulk-max-chunks %d is negative", f.bulkMaxChunks)
	}
	if f.progressEvery < 0 {
		return sluice.Errorf(sluice.ErrConfig, "--progress-every", "give a positive interval such as 10s, or leave the flag out for the default", "--progress-every %s is negative", f.progressEvery)
	}
	return nil
}

// checkMetricsAddr refuses an incremental.metrics-addr that no listen can
// take before the run starts: it was found only when replication began,
// after --mode all had copied every table (issue 30).
func checkMetricsAddr(cfg *task.Config) error {
	a := cfg.Incremental.MetricsAddr
	if a == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(a)
	if err == nil {
		var n int
		if n, err = strconv.Atoi(port); err == nil && (n < 0 || n > 65535) {
			err = fmt.Errorf("port %d out of range", n)
		}
	}
	if err != nil {
		return sluice.Errorf(sluice.ErrConfig, "task file", "set incremental.metrics-addr to a loopback address such as 127.0.0.1:9358, or 127.0.0.1:0 for any port", "incremental.metrics-addr %q: %v", a, err)
	}
	return nil
}
