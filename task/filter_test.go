package task

import (
	"testing"

	"github.com/sluice-db/sluice"
)

// Whatever the patterns, sluice's own schema and the server's system
// schemas are never selected: "*.*" on a source that is a sluice target
// (a chained set-up) took its sluice_meta, merged its checkpoints into the
// target's, and replicated a DROP DATABASE sluice_meta there (issue 30).
func TestNeverSelectsMetaOrSystemSchemas(t *testing.T) {
	c := &Config{}
	c.Tables.Include = []string{"*.*", "sluice_meta.*", "mysql.*"}
	for _, s := range []string{"sluice_meta", "SLUICE_META", "mysql", "sys", "performance_schema", "information_schema"} {
		if c.Selected(sluice.TableRef{Schema: s, Name: "checkpoint"}) || c.SchemaSelected(s) {
			t.Errorf("schema %s is selected", s)
		}
	}
	if !c.Selected(sluice.TableRef{Schema: "shop", Name: "orders"}) || !c.SchemaSelected("shop") {
		t.Error("an ordinary table is not selected by *.*")
	}
}
