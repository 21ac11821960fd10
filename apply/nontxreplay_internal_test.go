package apply

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

// TestNontxReplaySQL: the idempotent form of each change kind, as sent to
// the target: no row-count check (a row may or may not be there), the
// warning check kept, an UPDATE of the key deleting the old key first.
func TestNontxReplaySQL(t *testing.T) {
	tbl := &sluice.Table{Ref: sluice.TableRef{Schema: "d", Name: "a"}, PK: []int{0},
		Columns: []sluice.Column{{Name: "id", DataType: "int"}, {Name: "v", DataType: "varchar", Nullable: true}}}
	info := &tableInfo{spec: sqlgen.NewTableSpec(tbl, tbl.Ref), nontx: true}
	a := &Applier{cfg: DefaultConfig()}
	for _, tc := range []struct {
		c    sluice.RowChange
		want string
	}{
		{sluice.RowChange{Kind: sluice.Insert, After: []any{int64(1), "x"}},
			"REPLACE INTO `d`.`a` (`id`,`v`) VALUES (1,'x');SET @sluice_w=~0+(@@warning_count<>0)*1"},
		{sluice.RowChange{Kind: sluice.Update, Before: []any{int64(1), "x"}, After: []any{int64(1), "y"}},
			"REPLACE INTO `d`.`a` (`id`,`v`) VALUES (1,'y');SET @sluice_w=~0+(@@warning_count<>0)*1"},
		{sluice.RowChange{Kind: sluice.Update, Before: []any{int64(1), "x"}, After: []any{int64(2), "x"}},
			"DELETE FROM `d`.`a` WHERE `id`=1;SET @sluice_w=~0+(@@warning_count<>0)*1;REPLACE INTO `d`.`a` (`id`,`v`) VALUES (2,'x');SET @sluice_w=~0+(@@warning_count<>0)*2"},
		{sluice.RowChange{Kind: sluice.Delete, Before: []any{int64(1), "x"}},
			"DELETE FROM `d`.`a` WHERE `id`=1;SET @sluice_w=~0+(@@warning_count<>0)*1"},
	} {
		b := batchWriter{a: a}
		if err := b.replayChange(context.Background(), &tc.c, info); err != nil {
			t.Fatal(err)
		}
		if b.open {
			b.check()
		}
		if got := string(b.buf); got != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.c.Kind, got, tc.want)
		}
	}
	// A keyless table and a row image without the key are refused, by name.
	keyless := &sluice.Table{Ref: sluice.TableRef{Schema: "d", Name: "k"}, Columns: tbl.Columns}
	kinfo := &tableInfo{spec: sqlgen.NewTableSpec(keyless, keyless.Ref), nontx: true}
	src := &txn{gtid: "0-1-5"}
	for _, tc := range []struct {
		info *tableInfo
		c    sluice.RowChange
		want string
	}{
		{kinfo, sluice.RowChange{Kind: sluice.Insert, Table: keyless, After: []any{int64(1), "x"}}, "no primary key"},
		{info, sluice.RowChange{Kind: sluice.Delete, Table: tbl, Before: []any{}}, "lacks key column `id`"},
	} {
		err := nontxReplayable(src, &tc.c, tc.info)
		var ns nontxStop
		if err == nil || !errors.As(err, &ns) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "0-1-5") {
			t.Errorf("got %v, want a stop naming 0-1-5 and %q", err, tc.want)
		}
	}
}
