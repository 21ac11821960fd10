package migrate

import (
	"errors"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/load"
)

// TestGroupReloadNote: the plan line's part for tables reloaded with their
// foreign-key group, in the singular and the plural, and for a table whose
// key references its own rows.
func TestGroupReloadNote(t *testing.T) {
	a, b, c := sluice.TableRef{Schema: "s", Name: "a"}, sluice.TableRef{Schema: "s", Name: "b"}, sluice.TableRef{Schema: "s", Name: "c"}
	for _, tc := range []struct {
		rs   []load.GroupReload
		want string
	}{
		{nil, ""},
		{[]load.GroupReload{{Group: []sluice.TableRef{a}}},
			"; s.a is reloaded whole (a foreign key references its own rows, so all of it must be of one snapshot, and chunks of it are still to copy)"},
		{[]load.GroupReload{{Group: []sluice.TableRef{a, b}, Pending: []sluice.TableRef{a}, Reloaded: []sluice.TableRef{b}}},
			"; foreign keys join s.a, s.b: s.a has chunks to copy from this run's snapshot, so s.b is reloaded whole (a parent and its child must be of one snapshot)"},
		{[]load.GroupReload{{Group: []sluice.TableRef{a, b, c}, Pending: []sluice.TableRef{a, b}, Reloaded: []sluice.TableRef{b, c}}},
			"; foreign keys join s.a, s.b, s.c: s.a, s.b have chunks to copy from this run's snapshot, so s.b, s.c are reloaded whole (a parent and its child must be of one snapshot)"},
	} {
		if got := groupReloadNote(tc.rs); got != tc.want {
			t.Errorf("groupReloadNote(%v) =\n%q, want\n%q", tc.rs, got, tc.want)
		}
	}
}

// TestConfigValidate: a copy needs its task; the defaults are the dump's
// and the load's.
func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); !errors.Is(err, sluice.ErrConfig) {
		t.Fatalf("a copy without a task: %v", err)
	}
	if c.Dump.Threads != 4 || c.Load.BulkMaxChunks != load.DefaultConfig().BulkMaxChunks {
		t.Fatalf("defaults: %+v %+v", c.Dump, c.Load)
	}
}
