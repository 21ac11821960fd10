package apply_test

import (
	"context"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestDDLSetStatement: SET STATEMENT var=value[, ...] FOR <DDL> runs the
// DDL with those variables on the source, and a native replica runs the
// whole text. The Query event's status variables carry sql_mode and
// explicit_defaults_for_timestamp, not default_storage_engine or
// innodb_strict_mode: before the fix the target ran the inner DDL under
// its own settings, made an InnoDB table where the source has an Aria one
// (CREATE and ALTER), and refused the KEY_BLOCK_SIZE=3 that the source's
// innodb_strict_mode=0 let through (errno 140: the task stopped).
func TestDDLSetStatement(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "setstmt"
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE sst",
		"SET STATEMENT default_storage_engine=Aria FOR CREATE TABLE sst.a (id INT PRIMARY KEY, v INT)",
		"SET STATEMENT innodb_strict_mode=0, sql_mode='' FOR CREATE TABLE sst.r (id INT PRIMARY KEY, v VARCHAR(10)) KEY_BLOCK_SIZE=3",
		"CREATE TABLE sst.b (id INT PRIMARY KEY, v INT)",
		"SET STATEMENT default_storage_engine=Aria FOR ALTER TABLE sst.b ADD COLUMN w INT",
		"INSERT INTO sst.a VALUES (1, 1)", "INSERT INTO sst.r VALUES (1, 'x')", "INSERT INTO sst.b VALUES (1, 1, 1)")
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until}); err != nil {
		t.Fatal(err)
	}
	tables := []string{"sst.a", "sst.r", "sst.b"}
	sameDefinitions(t, src, dst, tables, nil)
	sameTables(t, src, dst, tables...)
	q := "SELECT GROUP_CONCAT(TABLE_NAME, ':', ENGINE, ':', ROW_FORMAT ORDER BY TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sst'"
	sameHex(t, src, dst, q, q)
}
