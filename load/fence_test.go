package load_test

import (
	"database/sql"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/fence"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestRerunWaitsForKilledRunsLastChunk: after kill -9 in the copy, the
// dead process's last chunk (rows and checkpoint row, one transaction) may
// still be committing on the target. A rerun that reads the checkpoints
// before that COMMIT lands believes the chunk is not loaded: it then finds
// the rows in the table ("already holds rows that this task did not load",
// difftest bug K) or loads them a second time. The rerun must wait for the
// dead run's sessions first.
//
// The dead run's session is played by a session of the test that holds a
// load fence slot of the task, as every load session does, and runs the
// last chunk's rows, checkpoint row and COMMIT in one round trip that is
// still running on the server. It commits only once the rerun is seen
// waiting for its slot; without the fence the rerun never waits there and
// the test fails. (An idle holder is a live process, refused at once:
// internal/fence.)
func TestRerunWaitsForKilledRunsLastChunk(t *testing.T) {
	const schema = "kf"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	createRerunData(t, src, schema)
	cfg := rerunTask(t, schema)
	mustSluice(t, "migrate", "--config", cfg, "--mode", "full")

	// The last chunk with rows, as its checkpoint row records it.
	var chunk, rows, bytes int64
	var snap string
	tbl := "`" + schema + "`.`t`"
	if err := dst.QueryRow("SELECT chunk, `rows`, bytes, snapshot FROM sluice_meta.load_checkpoint WHERE task = ? AND tbl = ? AND `rows` > 0 ORDER BY chunk DESC LIMIT 1",
		schema, tbl).Scan(&chunk, &rows, &bytes, &snap); err != nil {
		t.Fatal(err)
	}
	first := 1000 - rows + 1 // the table holds ids 1..1000 in key order
	sandboxtest.MustExec(t, dst, fmt.Sprintf("DELETE FROM %s.t WHERE id >= %d", schema, first),
		fmt.Sprintf("DELETE FROM sluice_meta.load_checkpoint WHERE task = '%s' AND tbl = '%s' AND chunk = %d", schema, tbl, chunk))

	// The dead run's last round trip: its rows, its checkpoint row and the
	// COMMIT in one multi-statement packet, still running on the server
	// (held at a user lock the test releases), as a killed process's last
	// chunk can be. Its session then ends, releasing its slot.
	deadDB, err := sql.Open("mysql", dstInst.DSN("")+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer deadDB.Close()
	dead, err := deadDB.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	block, err := dst.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer block.Close()
	for _, q := range []string{"SELECT GET_LOCK('kf.block', 0)"} {
		if _, err := block.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dead.ExecContext(t.Context(), fmt.Sprintf("SELECT GET_LOCK('%s', 0)", fence.SlotName("load", schema, 3))); err != nil {
		t.Fatal(err)
	}
	last := make(chan error, 1)
	go func() {
		_, err := dead.ExecContext(t.Context(), strings.Join([]string{"BEGIN",
			fmt.Sprintf("INSERT INTO %s.t SELECT seq, CONCAT('v', seq) FROM %s.seq_%d_to_1000", schema, schema, first),
			fmt.Sprintf("INSERT INTO sluice_meta.load_checkpoint (task, tbl, chunk, `rows`, bytes, snapshot) VALUES ('%s', '%s', %d, %d, %d, '%s')", schema, tbl, chunk, rows, bytes, snap),
			"DO GET_LOCK('kf.block', 600)", "COMMIT", "DO RELEASE_ALL_LOCKS()"}, ";"))
		last <- err
	}()
	waitFor(t, nil, &syncBuffer{}, "the dead run's last round trip to run", func() bool {
		var n int
		_ = dst.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%DO GET_LOCK(''kf.block''%' AND ID <> CONNECTION_ID()").Scan(&n)
		return n > 0
	})

	out := &syncBuffer{}
	cmd := exec.Command(sluiceBin, "migrate", "--config", cfg, "--mode", "full")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFor(t, exited, out, "the rerun to wait for the earlier run's session", func() bool {
		var n int
		_ = dst.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT GET_LOCK(%' AND STATE LIKE '%lock%'").Scan(&n)
		return n > 0
	})
	// The dead client's COMMIT lands, and its slot is released.
	if _, err := block.ExecContext(t.Context(), "DO RELEASE_LOCK('kf.block')"); err != nil {
		t.Fatal(err)
	}
	if err := <-last; err != nil {
		t.Fatalf("the dead run's last round trip: %v", err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("rerun after the earlier run's last chunk committed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "nothing left to copy") {
		t.Errorf("the rerun copied again what the earlier run committed:\n%s", out.String())
	}
	sameTables(t, src, dst, schema, schema)
	checksums(t, src, dst, schema, "t", "k")
}
