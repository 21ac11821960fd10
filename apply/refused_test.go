package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// N14: a row change the target refuses with Duplicate entry, Unknown
// column or a failed CHECK constraint (4025) stops the task with one line
// naming the table, the key, the source transaction and a fix.
func TestTargetRefusedRowNamed(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	for _, c := range []struct {
		name, behind string
		changes      []string
		want         []string
	}{
		{"dup", "INSERT INTO %s VALUES (2, 2, 'b')", []string{"INSERT INTO %s VALUES (2, 2, 'b')"},
			[]string{"Duplicate entry '2' for key 'PRIMARY'", "1062"}},
		{"dupmerged", "INSERT INTO %s VALUES (5, 5, 'e')", []string{"INSERT INTO %s VALUES (3, 3, 'c'), (4, 4, 'd'), (5, 5, 'e'), (6, 6, 'f')"},
			[]string{"Duplicate entry '5' for key 'PRIMARY'", "one of the 4 rows"}},
		{"dupupdate", "INSERT INTO %s VALUES (7, 7, 'g')", []string{"UPDATE %s SET id=7 WHERE id=1"},
			[]string{"Duplicate entry '7' for key 'PRIMARY'"}},
		{"unknowncol", "ALTER TABLE %s DROP COLUMN s", []string{"INSERT INTO %s VALUES (8, 8, 'h')"},
			[]string{"Unknown column", "add the missing column"}},
		// No CHECK case: the applier does not re-check CHECK constraints,
		// as a native replica does not (N13, TestCheckConstraintsNotRechecked).
	} {
		t.Run(c.name, func(t *testing.T) {
			schemaName := "tr_" + c.name
			tbl := schemaName + ".t"
			task := "refused_" + c.name
			seed(t, task, src)
			sandboxtest.MustExec(t, src, "CREATE DATABASE "+schemaName, "CREATE TABLE "+tbl+" (id INT PRIMARY KEY, d INT, s VARCHAR(10))",
				"CREATE TABLE "+schemaName+".side (id INT PRIMARY KEY)", "INSERT INTO "+tbl+" VALUES (1, 1, 'a')")
			synced := sourcePos(t, src)
			if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: synced}); err != nil {
				t.Fatal(err)
			}
			sandboxtest.MustExec(t, dst, fmt.Sprintf(c.behind, tbl))
			tx, err := src.Begin()
			if err != nil {
				t.Fatal(err)
			}
			qs := []string{"INSERT INTO " + schemaName + ".side VALUES (1)"}
			for _, q := range c.changes {
				qs = append(qs, fmt.Sprintf(q, tbl))
			}
			for _, q := range qs {
				if _, err := tx.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			gtid := gtidPos(t, src)
			_, err = replicate(context.Background(), srcInst, runOpts{task: task, until: sourcePos(t, src)})
			if !errors.Is(err, apply.ErrTargetRefused) {
				t.Fatalf("got %v, want ErrTargetRefused", err)
			}
			msg := err.Error()
			t.Logf("error shown to the user: %s", msg)
			for _, want := range append([]string{"`" + schemaName + "`.`t`", gtid, "(fix: ", "sluice skip --config TASK --gtid " + gtid}, c.want...) {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not name %q", want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line")
			}
			if n := count(t, dst, "SELECT COUNT(*) FROM "+schemaName+".side"); n != 0 {
				t.Errorf("the failed transaction's other row was committed")
			}
			if p := checkpointOf(t, task); !samePos(p, synced) {
				t.Fatalf("checkpoint %v, want %v", p, synced)
			}
		})
	}
}
