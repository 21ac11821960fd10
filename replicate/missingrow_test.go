package replicate_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// TestMissingRowStopsTask: a row deleted on the target behind the task's
// back, then updated and deleted on the source, stops the task (the
// default on-missing-row: stop) with the error in its status and its
// checkpoint before the update. Run again with on-missing-row: skip, the
// task goes on and sluice_apply_missing_rows_total counts both changes.
func TestMissingRowStopsTask(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE mrt", "CREATE TABLE mrt.t (id INT PRIMARY KEY, u INT, v INT, UNIQUE KEY (u))",
		"INSERT INTO mrt.t VALUES (1,1,1),(2,2,2),(3,3,3)")
	cfg := taskConfig(t, "mrt", srcInst, dstInst, start)
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "mrt" }
	cfg.Decode.SchemaSelected = func(s string) bool { return s == "mrt" }
	r := run(t, cfg)
	synced := r.waitApplied(t, masterStatus(t, src)).Applied
	sandboxtest.MustExec(t, dst, "DELETE FROM mrt.t WHERE id=2")
	sandboxtest.MustExec(t, src, "UPDATE mrt.t SET v=20 WHERE id=2", "DELETE FROM mrt.t WHERE id=2", "INSERT INTO mrt.t VALUES (4,4,4)")
	end := masterStatus(t, src)
	var err error
	select {
	case err = <-r.done:
		r.ended, r.err = true, err
	case <-time.After(2 * time.Minute):
		t.Fatal("the task did not stop on the missing row")
	}
	if !errors.Is(err, apply.ErrMissingRow) {
		t.Fatalf("task ended with %v, want ErrMissingRow", err)
	}
	st, rerr := replicate.ReadStatus(cfg.Dir)
	if rerr != nil || st.Stage != replicate.StageFailed || !strings.Contains(st.Error, "row missing on the target") || !strings.Contains(st.Error, "`mrt`.`t`") {
		t.Fatalf("status after the stop: stage %q error %q (%v)", st.Stage, st.Error, rerr)
	}
	if st.Applied.File != synced.File || st.Applied.Pos != synced.Pos {
		t.Fatalf("checkpoint moved to %v, want %v (before the update)", st.Applied, synced)
	}

	cfg.Apply.OnMissingRow = apply.MissingRowSkip
	r2 := run(t, cfg)
	st = r2.waitApplied(t, end)
	if st.MissingRows != 2 {
		t.Fatalf("status missing_rows %d, want 2", st.MissingRows)
	}
	sameData(t, srcInst, dstInst, "mrt")
	want := `sluice_apply_missing_rows_total{task="mrt"} 2`
	for {
		resp, err := http.Get("http://" + st.MetricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), want) {
			break
		}
		select {
		case err := <-r2.done:
			r2.err, r2.ended = err, true
			t.Fatalf("task ended (%v) while metrics lack %s:\n%s", err, want, body)
		case <-time.After(100 * time.Millisecond):
		}
	}
	r2.stop(t)
}
