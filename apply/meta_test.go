package apply_test

import (
	"context"
	"testing"

	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestCheckpointTablesOfAnEarlierVersion: the checkpoint tables are found
// in one query (apply.metaState); a checkpoint table that an earlier
// version created, without the done column and without apply_schema
// beside it, still yields its checkpoint and is brought up to date, and a
// target without the tables gets none until the task is seeded.
func TestCheckpointTablesOfAnEarlierVersion(t *testing.T) {
	ctx := context.Background()
	dst := sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, dst, "DROP DATABASE IF EXISTS meta_old", "DROP DATABASE IF EXISTS meta_none",
		"CREATE DATABASE meta_old", `CREATE TABLE meta_old.apply_checkpoint (
			task VARCHAR(128) NOT NULL, worker INT NOT NULL, seq BIGINT UNSIGNED NOT NULL,
			binlog_file VARCHAR(512) NOT NULL, binlog_pos BIGINT UNSIGNED NOT NULL, gtid_set TEXT NOT NULL,
			flavor VARCHAR(16) NOT NULL, ddl_pending TEXT NULL,
			updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
			PRIMARY KEY (task, worker)) ENGINE=InnoDB`,
		"INSERT INTO meta_old.apply_checkpoint (task,worker,seq,binlog_file,binlog_pos,gtid_set,flavor) VALUES ('old',-1,7,'mysql-bin.000003',1234,'0-1-99','mariadb')")
	db, err := apply.OpenTarget(ctx, dstInst.Endpoint(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	open := func(meta, task string) *apply.Applier {
		cfg := apply.DefaultConfig()
		cfg.Task, cfg.MetaSchema = task, meta
		a, err := apply.New(cfg, db)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	pos, ok, err := open("meta_old", "old").Checkpoint(ctx)
	if err != nil || !ok || pos.File != "mysql-bin.000003" || pos.Pos != 1234 || pos.GTIDSet != "0-1-99" {
		t.Fatalf("checkpoint in an earlier version's table: %v %v %v, want mysql-bin.000003:1234 0-1-99", pos, ok, err)
	}
	var n int
	if err := dst.QueryRow(`SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='meta_old'
		AND (TABLE_NAME='apply_checkpoint' AND COLUMN_NAME IN ('done','nontx_pending') OR TABLE_NAME='apply_schema' AND COLUMN_NAME='state')`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("after reading the checkpoint: %d of the done, nontx_pending and state columns (%v), want all 3", n, err)
	}
	if _, ok, err := open("meta_none", "none").Checkpoint(ctx); err != nil || ok {
		t.Fatalf("checkpoint without the tables: %v %v, want none", ok, err)
	}
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME='meta_none'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("looking for a checkpoint created %d schemas (%v), want none", n, err)
	}
}
