package decode

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

func queryEvent(schema, q string) *replication.BinlogEvent {
	return &replication.BinlogEvent{Header: &replication.EventHeader{Timestamp: 1}, Event: &replication.QueryEvent{Schema: []byte(schema), Query: []byte(q)}}
}

// TestDDLRewrite checks what DDL becomes on its way to the target: routed
// names, filtered tables, idempotent forms, skipped statements.
func TestDDLRewrite(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Selected = func(r sluice.TableRef) bool { return strings.HasPrefix(r.Schema, "shard_") && r.Name != "tmp" }
	cfg.SchemaSelected = func(s string) bool { return strings.HasPrefix(s, "shard_") }
	cfg.Route = func(r sluice.TableRef) sluice.TableRef { return sluice.TableRef{Schema: "merged", Name: r.Name} }
	cfg.RouteSchema = func(string) string { return "merged" }
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		schema, q string
		want      []string // nil: nothing replicated
	}{
		{"", "CREATE DATABASE shard_1", []string{"CREATE DATABASE IF NOT EXISTS `merged`"}},
		{"shard_1", "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", []string{"CREATE TABLE `merged`.`t` (id INT PRIMARY KEY, v VARCHAR(10))"}},
		{"shard_1", "CREATE TABLE tmp (id INT)", nil},
		{"other", "CREATE TABLE x (id INT)", nil},
		{"shard_1", "ALTER TABLE t ADD COLUMN w INT, DROP COLUMN v, ADD UNIQUE KEY uw (w)",
			[]string{"ALTER TABLE `merged`.`t` ADD COLUMN w INT, DROP COLUMN v, ADD UNIQUE KEY uw (w)"}},
		{"shard_1", "DROP TABLE t, tmp, other.x", []string{"DROP TABLE IF EXISTS `merged`.`t`"}},
		{"shard_1", "GRANT SELECT ON *.* TO 'u'@'%'", nil},
		{"shard_1", "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.id = 1", nil},
	}
	for _, c := range cases {
		items, err := d.Feed(queryEvent(c.schema, c.q), sluice.Position{File: "f", Pos: 10})
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		var got []string
		for _, it := range items {
			if it.Kind != sluice.ItemDDL {
				t.Fatalf("%s: got a %s item", c.q, it.Kind)
			}
			got = append(got, it.DDL...)
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s\n got  %q\n want %q", c.q, got, c.want)
		}
	}
	// Renaming a table out of the replicated set cannot be replayed.
	if _, err := d.Feed(queryEvent("shard_1", "CREATE TABLE a (id INT PRIMARY KEY)"), sluice.Position{}); err != nil {
		t.Fatal(err)
	}
	_, err = d.Feed(queryEvent("shard_1", "RENAME TABLE a TO other.a"), sluice.Position{File: "f", Pos: 20})
	if !errors.Is(err, sluice.ErrUnsupportedDDL) {
		t.Fatalf("rename out of the set: got %v, want ErrUnsupportedDDL", err)
	}
	// Dropping a merged (routed) schema would drop other shards' tables.
	if _, err := d.Feed(queryEvent("", "DROP DATABASE shard_1"), sluice.Position{}); !errors.Is(err, sluice.ErrUnsupportedDDL) {
		t.Fatalf("drop routed database: got %v, want ErrUnsupportedDDL", err)
	}
	if _, err := d.Feed(queryEvent("shard_1", "ALTER TABLE a ADD SYSTEM VERSIONING"), sluice.Position{}); !errors.Is(err, sluice.ErrUnsupportedDDL) {
		t.Fatalf("unparsable DDL on a replicated table: got %v, want ErrUnsupportedDDL", err)
	}
}

func TestGTIDPosition(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GTIDPos = "0-1-100,2-5-7"
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := &replication.BinlogEvent{Header: &replication.EventHeader{}, Event: &replication.MariadbGTIDEvent{}}
	ev.Event.(*replication.MariadbGTIDEvent).GTID.DomainID = 0
	ev.Event.(*replication.MariadbGTIDEvent).GTID.ServerID = 1
	ev.Event.(*replication.MariadbGTIDEvent).GTID.SequenceNumber = 101
	items, err := d.Feed(ev, sluice.Position{File: "f", Pos: 5})
	if err != nil || len(items) != 1 || items[0].Kind != sluice.ItemBegin || items[0].GTID != "0-1-101" {
		t.Fatalf("begin: %+v %v", items, err)
	}
	items, err = d.Feed(&replication.BinlogEvent{Header: &replication.EventHeader{}, Event: &replication.XIDEvent{}}, sluice.Position{File: "f", Pos: 9})
	if err != nil || len(items) != 1 || items[0].Kind != sluice.ItemCommit {
		t.Fatalf("commit: %+v %v", items, err)
	}
	if got := items[0].End.GTIDSet; got != "0-1-101,2-5-7" {
		t.Fatalf("GTID position after commit %q, want 0-1-101,2-5-7", got)
	}
}

func TestMySQLGTIDPosition(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Flavor = "mysql"
	cfg.GTIDPos = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-4"
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	sid := []byte{0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca, 0x11, 0xe1, 0x9e, 0x33, 0xc8, 0x0a, 0xa9, 0x42, 0x95, 0x62}
	hdr := &replication.EventHeader{}
	var got []sluice.StreamItem
	for _, ev := range []replication.Event{
		&replication.GTIDEvent{SID: sid, GNO: 5},
		&replication.QueryEvent{Query: []byte("BEGIN")},
		&replication.XIDEvent{},
	} {
		items, err := d.Feed(&replication.BinlogEvent{Header: hdr, Event: ev}, sluice.Position{File: "binlog.000002", Pos: 100})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, items...)
	}
	if len(got) != 2 || got[0].Kind != sluice.ItemBegin || got[1].Kind != sluice.ItemCommit {
		t.Fatalf("items %+v", got)
	}
	if want := "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"; got[1].End.GTIDSet != want || got[0].GTID != "3e11fa47-71ca-11e1-9e33-c80aa9429562:5" {
		t.Fatalf("GTID %q, set %q; want set %s", got[0].GTID, got[1].End.GTIDSet, want)
	}
}
