package kafka

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// ddlItem runs stmts through a schema tracker, as the decoder does, and
// returns the DDL item of the last one with the tracker's state after it.
func ddlItem(t *testing.T, tables []sluice.TableRef, stmts ...string) *sluice.StreamItem {
	t.Helper()
	tr := schema.NewTracker()
	for _, q := range stmts {
		sts, err := tr.Parse(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			if err := tr.Apply("shop", st); err != nil {
				t.Fatal(err)
			}
		}
	}
	state, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return &sluice.StreamItem{Kind: sluice.ItemDDL, Source: stmts[len(stmts)-1], Tables: tables, SchemaState: state}
}

// TestDDLTableChanges checks the tableChanges of Debezium's schema change
// event (2.7's ConnectTableChangeSerializer: type, id, table
// {defaultCharsetName, primaryKeyColumnNames, columns, comment}, each
// column with its java.sql.Types code as Debezium's MySQL DDL parser
// gives it) for a CREATE with several types, an ALTER and a DROP.
func TestDDLTableChanges(t *testing.T) {
	ref := sluice.TableRef{Schema: "shop", Name: "item"}
	create := "CREATE TABLE item (id int(11) unsigned NOT NULL AUTO_INCREMENT, name varchar(40) CHARACTER SET utf8mb4 NOT NULL DEFAULT 'it''s' COMMENT 'label'," +
		" price decimal(10,2) DEFAULT NULL, size enum('S','M','L') NOT NULL DEFAULT 'M', made datetime(3) DEFAULT CURRENT_TIMESTAMP(3)," +
		" ts timestamp NULL, doc json, flag tinyint(1) NOT NULL DEFAULT 0, pic blob, PRIMARY KEY (id))"
	e := newEncoder(DefaultConfig("t"))
	event := func(it *sluice.StreamItem) map[string]any {
		t.Helper()
		b := e.ddlValue(nil, it, &txnMeta{gtid: "0-1-5"}, "shop", time.Unix(1700000000, 0))
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("not JSON: %v: %s", err, b)
		}
		return m
	}
	m := event(ddlItem(t, []sluice.TableRef{ref}, create))
	changes := m["tableChanges"].([]any)
	if len(changes) != 1 {
		t.Fatalf("tableChanges %v, want one", changes)
	}
	ch := changes[0].(map[string]any)
	if ch["type"] != "CREATE" || ch["id"] != `"shop"."item"` {
		t.Fatalf("change %v", ch)
	}
	tb := ch["table"].(map[string]any)
	if !reflect.DeepEqual(tb["primaryKeyColumnNames"], []any{"id"}) {
		t.Fatalf("primaryKeyColumnNames %v", tb["primaryKeyColumnNames"])
	}
	wantKeys := []string{"name", "jdbcType", "nativeType", "typeName", "typeExpression", "charsetName", "length", "scale", "position",
		"optional", "autoIncremented", "generated", "comment", "defaultValueExpression", "enumValues"}
	cols := tb["columns"].([]any)
	type col = map[string]any
	want := []col{
		{"name": "id", "jdbcType": 4.0, "typeName": "INT UNSIGNED", "length": 11.0, "scale": nil, "position": 1.0, "optional": false,
			"autoIncremented": true, "generated": true, "charsetName": nil, "defaultValueExpression": nil, "enumValues": nil, "comment": nil},
		{"name": "name", "jdbcType": 12.0, "typeName": "VARCHAR", "length": 40.0, "position": 2.0, "optional": false, "charsetName": "utf8mb4",
			"defaultValueExpression": "it's", "comment": "label", "autoIncremented": false, "generated": false},
		{"name": "price", "jdbcType": 3.0, "typeName": "DECIMAL", "length": 10.0, "scale": 2.0, "position": 3.0, "optional": true, "defaultValueExpression": nil},
		{"name": "size", "jdbcType": 1.0, "typeName": "ENUM", "length": 1.0, "position": 4.0, "optional": false, "defaultValueExpression": "M",
			"enumValues": []any{"'S'", "'M'", "'L'"}},
		{"name": "made", "jdbcType": 93.0, "typeName": "DATETIME", "length": 3.0, "position": 5.0, "optional": true},
		{"name": "ts", "jdbcType": 2014.0, "typeName": "TIMESTAMP", "length": nil, "position": 6.0, "optional": true},
		{"name": "doc", "jdbcType": 1111.0, "position": 7.0},
		{"name": "flag", "jdbcType": 5.0, "typeName": "TINYINT", "length": 1.0, "position": 8.0, "optional": false, "defaultValueExpression": "0"},
		{"name": "pic", "jdbcType": 2004.0, "typeName": "BLOB", "position": 9.0, "charsetName": nil},
	}
	if len(cols) != len(want) {
		t.Fatalf("%d columns, want %d: %v", len(cols), len(want), cols)
	}
	for i, w := range want {
		c := cols[i].(map[string]any)
		for _, k := range wantKeys {
			if _, ok := c[k]; !ok {
				t.Fatalf("column %s has no %q: %v", w["name"], k, c)
			}
		}
		if len(c) != len(wantKeys) {
			t.Fatalf("column %s has %d fields, Debezium's Column has %d: %v", w["name"], len(c), len(wantKeys), c)
		}
		for k, v := range w {
			if !reflect.DeepEqual(c[k], v) {
				t.Errorf("column %s: %s is %#v, want %#v", w["name"], k, c[k], v)
			}
		}
		if c["typeExpression"] != c["typeName"] {
			t.Errorf("column %s: typeExpression %v, typeName %v", w["name"], c["typeExpression"], c["typeName"])
		}
	}

	// ALTER: the table as it is after the statement.
	m = event(ddlItem(t, []sluice.TableRef{ref}, create, "ALTER TABLE item ADD COLUMN note text AFTER name, DROP COLUMN pic"))
	ch = m["tableChanges"].([]any)[0].(map[string]any)
	cols = ch["table"].(map[string]any)["columns"].([]any)
	if ch["type"] != "ALTER" || len(cols) != 9 || cols[2].(map[string]any)["name"] != "note" || cols[2].(map[string]any)["jdbcType"] != 12.0 ||
		cols[2].(map[string]any)["position"] != 3.0 || cols[8].(map[string]any)["name"] != "flag" {
		t.Fatalf("ALTER: %v", ch)
	}

	// DROP: the id alone, as Debezium's DROP change has no columns.
	m = event(ddlItem(t, []sluice.TableRef{ref}, create, "DROP TABLE item"))
	ch = m["tableChanges"].([]any)[0].(map[string]any)
	if ch["type"] != "DROP" || ch["id"] != `"shop"."item"` {
		t.Fatalf("DROP: %v", ch)
	}

	// A statement on a whole schema changes no table.
	it := ddlItem(t, nil, create)
	it.Source = "CREATE DATABASE other"
	if m = event(it); len(m["tableChanges"].([]any)) != 0 {
		t.Fatalf("CREATE DATABASE: tableChanges %v", m["tableChanges"])
	}
}
