package load_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestModeAllCopiesNonTransactionalTablesAtTheSnapshot runs --mode all
// while a writer inserts, updates and deletes rows of an Aria and a MyISAM
// table (alone and in transactions that also write InnoDB). A consistent
// snapshot does not hold such tables still: before the fix their chunks
// were read as they were at read time, so rows written after the snapshot
// were copied and then replicated again (the task stopped with Duplicate
// entry; difftest seeds 2703-2708). The target must end equal to the
// source, by CHECKSUM TABLE and by the HEX of every column.
func TestModeAllCopiesNonTransactionalTablesAtTheSnapshot(t *testing.T) {
	const schema = "nt_all"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
		"CREATE TABLE "+schema+".inno (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB",
		"INSERT INTO "+schema+".inno SELECT seq, CONCAT('i', seq) FROM "+schema+".seq_1_to_6000",
		"CREATE TABLE "+schema+".aria (id INT PRIMARY KEY, v VARCHAR(64), n INT) ENGINE=Aria",
		"INSERT INTO "+schema+".aria SELECT seq, CONCAT('a', seq), 0 FROM "+schema+".seq_1_to_6000",
		"CREATE TABLE "+schema+".my (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=MyISAM",
		"INSERT INTO "+schema+".my SELECT seq, CONCAT('m', seq) FROM "+schema+".seq_1_to_2000")
	task := schema
	cfg := taskFile(t, task, schema+".*", fmt.Sprintf("routes: [{schema: %s, target-schema: %s_copy}]\nthreads: 2\npool-size: 2\nrows-per-chunk: 500\ndir: %s\nincremental: {worker-count: 4, batch: 20}",
		schema, schema, filepath.Join(t.TempDir(), "state")))

	stopWrites := writeNonTransactional(t, schema)
	defer stopWrites()
	// The chunk delay spreads the copy over seconds, so that many writes
	// land between the snapshot and the reads of the last chunks.
	r := startAll(t, cfg, "--commit-unit", "chunk", "--chunk-delay", "100ms")
	r.waitReplicating(t, task)
	out := r.out
	stopWrites()
	r.waitApplied(t, src, dst, task)
	r.stop(t)
	t.Logf("output:\n%s", out.String())
	if !strings.Contains(out.String(), "non-transactional table(s) ("+schema+".aria, "+schema+".my) were read under a read lock held for") {
		t.Errorf("the output does not say how long the non-transactional tables were locked:\n%s", out.String())
	}
	sameTables(t, src, dst, schema, schema+"_copy")
}

// writeNonTransactional writes to schema's aria and my tables until the
// returned function is called: inserts beyond the copied keys (the last
// chunk), updates and deletes all over the key range, and transactions that
// write InnoDB and Aria together (each Aria statement is its own binlog
// event group, logged when it runs).
func writeNonTransactional(t *testing.T, schema string) func() {
	t.Helper()
	db := sandboxtest.MustOpen(t, srcInst, "")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	errc := make(chan error, 1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewSource(7))
		for n := 0; ctx.Err() == nil; n++ {
			var stmts []string
			switch n % 4 {
			case 0:
				stmts = []string{fmt.Sprintf("INSERT INTO %s.aria VALUES (%d, 'new', %d)", schema, 100000+n, n),
					fmt.Sprintf("INSERT INTO %s.my VALUES (%d, 'new')", schema, 100000+n)}
			case 1:
				stmts = []string{fmt.Sprintf("UPDATE %s.aria SET n = n + 1, v = 'upd' WHERE id = %d", schema, 1+r.Intn(6000)),
					fmt.Sprintf("DELETE FROM %s.my WHERE id = %d", schema, 1+r.Intn(2000))}
			case 2:
				stmts = []string{fmt.Sprintf("DELETE FROM %s.aria WHERE id = %d", schema, 1+r.Intn(6000))}
			case 3:
				stmts = []string{"BEGIN",
					fmt.Sprintf("UPDATE %s.inno SET v = 'upd %d' WHERE id = %d", schema, n, 1+r.Intn(6000)),
					fmt.Sprintf("INSERT INTO %s.aria VALUES (%d, 'in trx', %d)", schema, 100000+n, n),
					fmt.Sprintf("INSERT INTO %s.inno VALUES (%d, 'new')", schema, 100000+n),
					"COMMIT"}
			}
			c, err := db.Conn(ctx)
			if err != nil {
				break
			}
			for _, q := range stmts {
				if _, err = c.ExecContext(ctx, q); err != nil {
					break
				}
			}
			c.Close()
			if err != nil && ctx.Err() == nil {
				errc <- err
				return
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			select {
			case err := <-errc:
				t.Fatalf("source writes: %v", err)
			default:
			}
		})
	}
}

// TestNonTransactionalTargetResumesAfterKillMidChunk kills the copy while a
// chunk's rows are in an Aria target table but its checkpoint is not
// committed: the rows of a non-transactional table stay, the mark (InnoDB)
// goes. Before the fix the rerun refused the table ("already holds rows
// that this task did not load") when no chunk of it was done, and a later
// chunk's rows were loaded twice otherwise. The rerun must delete what the
// killed chunk left (the chunk's key range; the whole table for one without
// a key) and end with the target equal to the source.
func TestNonTransactionalTargetResumesAfterKillMidChunk(t *testing.T) {
	for _, c := range []struct {
		name   string
		create string
		done   int64 // chunks committed before the kill
		// userMade makes the target table Aria by hand, empty, from an
		// InnoDB source table: the target's engine decides.
		userMade bool
		// unit is the commit unit: "table" loads the table's chunks as one
		// stream in one transaction.
		unit string
	}{
		{"first", "(id INT PRIMARY KEY, v VARCHAR(64), b BLOB)", 0, false, "chunk"},
		{"later", "(id INT PRIMARY KEY, v VARCHAR(64), b BLOB)", 1, false, "chunk"},
		{"nokey", "(id INT, v VARCHAR(64), b BLOB)", 0, false, "chunk"},
		{"usermade", "(id INT PRIMARY KEY, v VARCHAR(64), b BLOB)", 0, true, "chunk"},
		{"whole", "(id INT PRIMARY KEY, v VARCHAR(64), b BLOB)", 0, false, "table"},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema := "nt_kill_" + c.name
			src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
			engine := "Aria"
			if c.userMade {
				engine = "InnoDB"
				sandboxtest.MustExec(t, dst, "DROP DATABASE IF EXISTS "+schema+"_copy", "CREATE DATABASE "+schema+"_copy",
					"CREATE TABLE "+schema+"_copy.t "+c.create+" ENGINE=Aria")
			}
			sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
				"CREATE TABLE "+schema+".t "+c.create+" ENGINE="+engine,
				"INSERT INTO "+schema+".t SELECT seq, CONCAT('row ', seq), IF(seq % 5 = 0, NULL, UNHEX(SHA1(seq))) FROM "+schema+".seq_1_to_3000")
			task := schema
			cfg := taskFile(t, task, schema+".*", fmt.Sprintf("routes: [{schema: %s, target-schema: %s_copy}]\nthreads: 1\npool-size: 1\nrows-per-chunk: 1000", schema, schema))
			// INSERTs of 50 rows: the rows of a chunk reach the Aria table
			// statement by statement, and the chunk delay holds its
			// checkpoint back, so the kill finds rows without their mark.
			killWithUnmarkedRows(t, dst, task, "`"+schema+"_copy`.`t`", c.done,
				"migrate", "--config", cfg, "--commit-unit", c.unit, "--rows-per-statement", "50", "--chunk-delay", "3s")
			mustSluice(t, "migrate", "--config", cfg, "--commit-unit", c.unit, "--rows-per-statement", "50")
			if c.userMade {
				// The definitions differ by their engine only: compare rows.
				if a, b := tableRows(t, src, schema, "t"), tableRows(t, dst, schema+"_copy", "t"); strings.Join(a, "\n") != strings.Join(b, "\n") {
					t.Errorf("%d rows on the source, %d on the target, contents differ", len(a), len(b))
				}
			} else {
				sameTables(t, src, dst, schema, schema+"_copy")
			}
			if done, _ := checkpointsMatchData(t, dst, task, schema+"_copy", "t"); done != totalChunks(t, dst, task) {
				t.Errorf("%d chunks marked done, the plan has %d", done, totalChunks(t, dst, task))
			}
		})
	}
}

// killWithUnmarkedRows starts sluice with args and kills it with SIGKILL
// once target table tbl holds rows that no committed checkpoint accounts
// for, after exactly done of its chunks were committed.
func killWithUnmarkedRows(t *testing.T, dst *sql.DB, task, tbl string, done int64, args ...string) {
	t.Helper()
	cmd := exec.Command(sluiceBin, args...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		var chunks, marked, have int64
		// The tables may not exist yet: errors mean "not yet".
		err := dst.QueryRow("SELECT COUNT(*), IFNULL(SUM(`rows`), 0) FROM sluice_meta.load_checkpoint WHERE task = ? AND tbl = ?", task, tbl).Scan(&chunks, &marked)
		if err == nil {
			err = dst.QueryRow("SELECT COUNT(*) FROM " + tbl).Scan(&have)
		}
		if chunks > done {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("%d chunks of %s were committed before rows of chunk %d were seen", chunks, tbl, done)
		}
		if err == nil && chunks == done && have > marked {
			t.Logf("killed with %d rows of %s in the table, %d of them in %d committed chunks", have, tbl, marked, chunks)
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited (%v) before the kill; output:\n%s", err, out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
}
