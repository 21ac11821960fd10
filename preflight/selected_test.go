package preflight

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/task"
)

func TestCheckPatterns(t *testing.T) {
	cfg := &task.Config{Tables: task.Tables{Include: []string{"app.*", "Other.T1"}}}
	tables := []*dump.TablePlan{
		{Table: &sluice.Table{Ref: sluice.TableRef{Schema: "app", Name: "a"}}},
		{Table: &sluice.Table{Ref: sluice.TableRef{Schema: "other", Name: "t1"}}},
	}
	if err := CheckPatterns(cfg, tables); err != nil {
		t.Fatalf("every pattern matches, got %v", err)
	}
	cfg.Tables.Include = append(cfg.Tables.Include, "app.missing")
	err := CheckPatterns(cfg, tables)
	if !errors.Is(err, sluice.ErrUnknownTable) || !strings.Contains(err.Error(), `"app.missing"`) || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("want an unknown-table error naming the pattern and the fix, got %v", err)
	}
}
