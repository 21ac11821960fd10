package apply_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestSchemaChangesWithRowsInFlight runs ALTER TABLE ADD/DROP/MODIFY/CHANGE
// COLUMN, CREATE/DROP/RENAME TABLE on a source that logs only minimal row
// metadata (no column names), while another connection keeps writing rows.
// Every row event must be decoded with the schema of its moment, which only
// the schema tracker knows. The source schema "sc" is routed to "sc_t" on
// the target, and table sc.skip is filtered out.
func TestSchemaChangesWithRowsInFlight(t *testing.T) {
	minimal := sandboxtest.Start(t, "srcmin", "binlog_row_metadata=MINIMAL")
	src := sandboxtest.MustOpen(t, minimal, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "schema", src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE sc",
		"CREATE TABLE sc.t (id INT PRIMARY KEY, a VARCHAR(20), b INT UNSIGNED, c INT)",
		"CREATE TABLE sc.skip (id INT PRIMARY KEY)",
		"CREATE TABLE sc.gone (id INT PRIMARY KEY)",
		"INSERT INTO sc.gone VALUES (1)",
	)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var werr error
	var done atomic.Int64
	var failed atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer failed.Store(true) // also on a normal stop: the wait below ends
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Columns by name only where every schema version has them.
			if _, err := src.Exec(fmt.Sprintf("INSERT INTO sc.t (id) VALUES (%d)", i)); err != nil {
				werr = err
				return
			}
			if _, err := src.Exec(fmt.Sprintf("UPDATE sc.t SET id=id+1000000 WHERE id=%d", i-1)); err != nil {
				werr = err
				return
			}
			if _, err := src.Exec(fmt.Sprintf("INSERT INTO sc.skip VALUES (%d)", i)); err != nil {
				werr = err
				return
			}
			done.Add(1)
		}
	}()
	alters := []string{
		"ALTER TABLE sc.t ADD COLUMN d VARCHAR(10) DEFAULT 'new' AFTER a",
		"UPDATE sc.t SET b = 4294967295, a = 'max' WHERE id % 3 = 0",
		"ALTER TABLE sc.t DROP COLUMN c",
		"ALTER TABLE sc.t MODIFY COLUMN b BIGINT UNSIGNED",
		"UPDATE sc.t SET b = 18446744073709551615 WHERE id % 5 = 0",
		"ALTER TABLE sc.t CHANGE COLUMN a a2 VARCHAR(40), ADD COLUMN e MEDIUMINT UNSIGNED FIRST",
		"UPDATE sc.t SET e = 16777215 WHERE id % 2 = 0",
		"CREATE TABLE sc.n (x INT NOT NULL, y TINYINT UNSIGNED, UNIQUE KEY (x))",
		"INSERT INTO sc.n VALUES (1, 255), (2, 0)",
		"RENAME TABLE sc.n TO sc.n2",
		"UPDATE sc.n2 SET y = 200 WHERE x = 2",
		"DROP TABLE sc.gone",
		"ALTER TABLE sc.t ADD COLUMN z INT NOT NULL DEFAULT 7",
	}
	for _, q := range alters {
		// Let rows of the current schema version interleave with the DDL.
		for n := done.Load() + 5; done.Load() < n && !failed.Load(); {
			time.Sleep(time.Millisecond)
		}
		sandboxtest.MustExec(t, src, q)
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	until := sourcePos(t, src)
	keep := func(r sluice.TableRef) bool {
		return strings.EqualFold(r.Schema, "sc") && !strings.EqualFold(r.Name, "skip")
	}
	route := func(r sluice.TableRef) sluice.TableRef { r.Schema = "sc_t"; return r }
	st, err := replicate(context.Background(), minimal, runOpts{task: "schema", workers: 4, until: until, keep: keep, route: route})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("applied %d txns, %d rows, %d DDL in %d target commits", st.Txns, st.Rows, st.DDL, st.Commits)
	if st.Rows < 100 {
		t.Fatalf("only %d rows replicated; the writer did not overlap the DDL", st.Rows)
	}
	for _, tbl := range []string{"t", "n2"} {
		a, b := dump(t, src, "sc."+tbl), dump(t, dst, "sc_t."+tbl)
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Fatalf("sc.%s differs from sc_t.%s: %d vs %d rows; first source %v target %v", tbl, tbl, len(a), len(b), a[:min(3, len(a))], b[:min(3, len(b))])
		}
	}
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='sc_t' AND TABLE_NAME IN ('skip','gone','n')").Scan(&n); err != nil || n != 0 {
		t.Fatalf("filtered, dropped or renamed tables on the target: %d (%v)", n, err)
	}
	var cols string
	if err := dst.QueryRow("SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='sc_t' AND TABLE_NAME='t'").Scan(&cols); err != nil || cols != "e,id,a2,d,b,z" {
		t.Fatalf("target columns %q (%v), want e,id,a2,d,b,z", cols, err)
	}
}
