package apply_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// runUntilDDL starts cmd and kill -9s it as soon as it reports a DDL that
// ran on the target before its checkpoint ("ddl-done END"). It returns
// that END, or "" when the child finished by itself.
func runUntilDDL(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	limit := time.After(3 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				if err != nil {
					t.Fatalf("child failed: %v: %s", err, stderr.String())
				}
				return ""
			}
			if end, found := strings.CutPrefix(l, "ddl-done "); found {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				go func() { _, _ = io.Copy(io.Discard, out) }()
				_ = cmd.Wait()
				return end
			}
		case <-limit:
			_ = cmd.Process.Kill()
			t.Fatalf("child made no progress for 3 minutes: %s", stderr.String())
		}
	}
}

// TestDDLRerunAfterKill (issue 29, N6): sluice is killed -9 after each DDL
// ran on the target and before its checkpoint; the restart must neither
// run it twice nor lose it. Before the fix the restart ran the statement
// again: `CHANGE a b INT, CHANGE b a INT` succeeded a second time and
// swapped the columns back, so the target's a held the source's b. The
// other kinds (ADD, DROP and RENAME of a column, CREATE and DROP TABLE,
// CREATE TABLE ... LIKE, ALTER IGNORE, a CHECK constraint) would fail or
// do nothing the second time, now that the source's text has no IF [NOT]
// EXISTS; each must be recognised as done.
func TestDDLRerunAfterKill(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "ddlkill"
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE dk",
		"CREATE TABLE dk.t (id INT PRIMARY KEY, a INT, b INT)",
		"INSERT INTO dk.t VALUES (1, 10, 20), (2, 11, 21)")
	ctx := context.Background()
	if _, err := replicate(ctx, srcInst, runOpts{task: task, until: sourcePos(t, src)}); err != nil {
		t.Fatal(err)
	}
	ddl := []string{
		"ALTER TABLE dk.t CHANGE a b INT, CHANGE b a INT",
		"ALTER TABLE dk.t ADD COLUMN c INT DEFAULT 5",
		"ALTER TABLE dk.t DROP COLUMN b",
		"ALTER TABLE dk.t RENAME COLUMN c TO d",
		"CREATE TABLE dk.n (id INT PRIMARY KEY, v INT, CHECK (v > 0))",
		"CREATE TABLE dk.n2 LIKE dk.n",
		"DROP TABLE dk.n",
		"ALTER IGNORE TABLE dk.t ADD UNIQUE KEY ud (d)",
		"CREATE OR REPLACE TABLE dk.n2 (id INT PRIMARY KEY, w VARCHAR(3))",
	}
	for i, q := range ddl {
		// A row after each DDL; once d is unique (ALTER IGNORE kept one
		// row of d=5), each with its own d.
		ins := "INSERT INTO dk.t (id) VALUES (" + strconv.Itoa(30+10*i) + ")"
		if i >= 7 {
			ins = "INSERT INTO dk.t (id, d) VALUES (" + strconv.Itoa(30+10*i) + ", " + strconv.Itoa(i) + ")"
		}
		sandboxtest.MustExec(t, src, q, ins)
	}
	sandboxtest.MustExec(t, src, "INSERT INTO dk.n2 VALUES (1, 'x')")
	until := sourcePos(t, src)
	spare, kills := "", 0
	for round := 0; ; round++ {
		if round > len(ddl)+1 {
			t.Fatalf("%d rounds for %d DDL statements", round, len(ddl))
		}
		end := runUntilDDL(t, childCmd(srcInst, task, until, "SLUICE_DDL_HOLD=1", "SLUICE_DDL_SPARE="+spare))
		if end == "" {
			break
		}
		if end == spare {
			t.Fatalf("killed twice at the DDL ending at %s", end)
		}
		spare = end
		kills++
	}
	if kills != len(ddl) {
		t.Fatalf("%d kills for %d DDL statements", kills, len(ddl))
	}
	sameDefinitions(t, src, dst, []string{"dk.t", "dk.n2"}, nil)
	sameTables(t, src, dst, "dk.t", "dk.n2")
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='dk' AND TABLE_NAME='n'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("dk.n on the target: %d (%v), want dropped", n, err)
	}
}

// TestDDLSameShapeAfterCrash: a column swap that leaves the definition
// reading as before cannot be told done from not done after a crash; the
// restart stops and names it instead of guessing.
func TestDDLSameShapeAfterCrash(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "ddlsame"
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE dsm", "CREATE TABLE dsm.t (a INT, b INT, id INT PRIMARY KEY)", "INSERT INTO dsm.t VALUES (1, 2, 1)")
	ctx := context.Background()
	if _, err := replicate(ctx, srcInst, runOpts{task: task, until: sourcePos(t, src)}); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, src, "ALTER TABLE dsm.t CHANGE a b INT, CHANGE b a INT FIRST", "INSERT INTO dsm.t VALUES (3, 4, 2)")
	until := sourcePos(t, src)
	undo := apply.SetAfterDDLHook(func() error { return errors.New("simulated crash between a DDL and its checkpoint") })
	if _, err := replicate(ctx, srcInst, runOpts{task: task, until: until}); err == nil {
		t.Fatal("the simulated crash did not stop the applier")
	}
	undo()
	_, err := replicate(ctx, srcInst, runOpts{task: task, until: until})
	var se *sluice.Error
	if !errors.Is(err, sluice.ErrUnsupportedDDL) || !errors.As(err, &se) || !strings.Contains(se.Hint, "sluice skip") {
		t.Fatalf("restart: %v, want a stop naming the statement and sluice skip", err)
	}
	t.Logf("message: %v", err)
	var a int
	if err := dst.QueryRow("SELECT a FROM dsm.t WHERE id = 1").Scan(&a); err != nil || a != 2 {
		t.Fatalf("target a = %d (%v): the swap ran once, want 2", a, err)
	}
}
