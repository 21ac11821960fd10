package kafka

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
)

// TestDebeziumTypeMapping checks each MySQL type's value as Debezium's
// MySQL connector writes it (docs "How Debezium MySQL connectors map data
// types", defaults: decimal.handling.mode=precise,
// time.precision.mode=adaptive_time_microseconds, binary.handling.mode=bytes),
// from the Go values the decoder produces.
func TestDebeziumTypeMapping(t *testing.T) {
	cases := []struct {
		col  sluice.Column
		in   any
		want string
	}{
		{sluice.Column{Name: "i", DataType: "int", FullType: "int(11)"}, int32(-5), `-5`},
		{sluice.Column{Name: "u", DataType: "bigint", FullType: "bigint(20) unsigned", Unsigned: true}, uint64(18446744073709551615), `18446744073709551615`},
		{sluice.Column{Name: "f", DataType: "float", FullType: "float"}, float32(1.5), `1.5`},
		{sluice.Column{Name: "g", DataType: "double", FullType: "double"}, float64(-0.25), `-0.25`},
		// precise: the unscaled value 1234 = 0x04d2, base64 "BNI="
		{sluice.Column{Name: "d", DataType: "decimal", FullType: "decimal(10,2)"}, "12.34", `"BNI="`},
		// -1.00 unscaled -100 = 0x9c
		{sluice.Column{Name: "d", DataType: "decimal", FullType: "decimal(10,2)"}, "-1.00", `"nA=="`},
		// 128 needs a leading zero byte to stay positive
		{sluice.Column{Name: "d", DataType: "decimal", FullType: "decimal(5,0)"}, "128", `"AIA="`},
		{sluice.Column{Name: "b", DataType: "bit", FullType: "bit(1)"}, int64(1), `true`},
		// BIT(10) 0x0201: little-endian bytes 01 02
		{sluice.Column{Name: "b", DataType: "bit", FullType: "bit(10)"}, int64(0x201), `"AQI="`},
		{sluice.Column{Name: "dt", DataType: "date", FullType: "date"}, "1970-01-11", `10`},
		{sluice.Column{Name: "dt", DataType: "date", FullType: "date", Nullable: true}, "0000-00-00", `null`},
		{sluice.Column{Name: "t", DataType: "datetime", FullType: "datetime"}, "2018-06-20 06:37:03", `1529476623000`},
		{sluice.Column{Name: "t", DataType: "datetime", FullType: "datetime(6)"}, "2018-06-20 06:37:03.000001", `1529476623000001`},
		{sluice.Column{Name: "ts", DataType: "timestamp", FullType: "timestamp"}, "2018-06-20 13:37:03", `"2018-06-20T13:37:03Z"`},
		{sluice.Column{Name: "ts", DataType: "timestamp", FullType: "timestamp(3)"}, "2018-06-20 13:37:03.250", `"2018-06-20T13:37:03.25Z"`},
		{sluice.Column{Name: "tm", DataType: "time", FullType: "time(6)"}, "-01:00:00.5", `-3600500000`},
		{sluice.Column{Name: "y", DataType: "year", FullType: "year(4)"}, 2024, `2024`},
		{sluice.Column{Name: "e", DataType: "char", FullType: "enum('a','b,c','it''s')"}, int64(3), `"it's"`},
		{sluice.Column{Name: "s", DataType: "char", FullType: "set('x','y','z')"}, int64(5), `"x,z"`},
		{sluice.Column{Name: "v", DataType: "varchar", FullType: "varchar(10)"}, "é\"\n\x01", `"é\"\n\u0001"`},
		{sluice.Column{Name: "tx", DataType: "blob", FullType: "text"}, []byte("hello"), `"hello"`},
		{sluice.Column{Name: "bl", DataType: "blob", FullType: "blob"}, []byte{0, 1, 2}, `"AAEC"`},
		{sluice.Column{Name: "bn", DataType: "char", FullType: "binary(2)"}, []byte{0xff, 0}, `"/wA="`},
		{sluice.Column{Name: "j", DataType: "json", FullType: "json"}, []byte(`{"a":1}`), `"{\"a\":1}"`},
		{sluice.Column{Name: "n", DataType: "int", FullType: "int", Nullable: true}, nil, `null`},
	}
	for _, c := range cases {
		cfg := DefaultConfig("t")
		cfg.TopicPrefix = "p"
		e := newEncoder(cfg)
		tb := &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "t"}, Columns: []sluice.Column{c.col}}
		p := e.plan(tb)
		got := string(e.appendValue(nil, &p.cols[0], c.in))
		if got != c.want {
			t.Errorf("%s %v: got %s, want %s", c.col.FullType, c.in, got, c.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: %s is not JSON", c.col.FullType, got)
		}
	}
}

// TestDebeziumEnvelope checks the event's shape: before/after, source
// block, op, and with Config.Schema the Connect schema around the payload.
func TestDebeziumEnvelope(t *testing.T) {
	for _, withSchema := range []bool{false, true} {
		cfg := DefaultConfig("t")
		cfg.TopicPrefix, cfg.Schema = "srv", withSchema
		e := newEncoder(cfg)
		tb := &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "t"}, PK: []int{0},
			Columns: []sluice.Column{{Name: "id", DataType: "int", FullType: "int(11)"}, {Name: "v", DataType: "varchar", FullType: "varchar(5)", Nullable: true}}}
		ch := sluice.RowChange{Kind: sluice.Update, Table: tb, Before: []any{int32(1), "a"}, After: []any{int32(1), "b"}}
		m := txnMeta{gtid: "0-1-7", ts: 1700000000, start: sluice.Position{File: "mysql-bin.000001", Pos: 400}, server: 1}
		val := e.debeziumValue(nil, &ch, &m, 0, 'u', time.Unix(1700000001, 0))
		var ev struct {
			Schema  map[string]any `json:"schema"`
			Payload json.RawMessage
		}
		body := val
		if withSchema {
			if err := json.Unmarshal(val, &ev); err != nil {
				t.Fatalf("%v: %s", err, val)
			}
			if ev.Schema["name"] != "srv.db.t.Envelope" {
				t.Fatalf("schema name %v", ev.Schema["name"])
			}
			body = ev.Payload
		}
		var p struct {
			Before, After map[string]any
			Source        map[string]any
			Op            string
			TsMs          int64 `json:"ts_ms"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("%v: %s", err, val)
		}
		if p.Op != "u" || p.Before["v"] != "a" || p.After["v"] != "b" || p.TsMs != 1700000001000 {
			t.Fatalf("event %s", body)
		}
		s := p.Source
		if s["connector"] != "mysql" || s["name"] != "srv" || s["db"] != "db" || s["table"] != "t" || s["gtid"] != "0-1-7" ||
			s["file"] != "mysql-bin.000001" || s["pos"] != 400.0 || s["ts_ms"] != 1700000000000.0 || s["server_id"] != 1.0 {
			t.Fatalf("source %v", s)
		}
		key := e.recordKey(tb, ch.After)
		if !withSchema && string(key) != `{"id":1}` {
			t.Fatalf("key %s", key)
		}
		if !json.Valid(key) {
			t.Fatalf("key %s", key)
		}
	}
}

// TestCanalJSON checks canal's flat message: values as text, the changed
// columns' old values under "old" for an update.
func TestCanalJSON(t *testing.T) {
	cfg := DefaultConfig("t")
	cfg.TopicPrefix, cfg.Format = "srv", FormatCanalJSON
	e := newEncoder(cfg)
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "t"}, PK: []int{0},
		Columns: []sluice.Column{{Name: "id", DataType: "int", FullType: "int(11)"}, {Name: "v", DataType: "varchar", FullType: "varchar(5)", Nullable: true},
			{Name: "e", DataType: "char", FullType: "enum('x','y')"}}}
	ch := sluice.RowChange{Kind: sluice.Update, Table: tb, Before: []any{int32(1), "a", int64(1)}, After: []any{int32(1), "b", int64(1)}}
	m := txnMeta{gtid: "0-1-7", ts: 1700000000}
	val := e.canalValue(nil, &ch, &m, time.Unix(1700000001, 0))
	var msg struct {
		Database, Table, Type string
		PkNames               []string
		IsDdl                 bool
		Es, Ts                int64
		MysqlType             map[string]string
		Data, Old             []map[string]any
	}
	if err := json.Unmarshal(val, &msg); err != nil {
		t.Fatalf("%v: %s", err, val)
	}
	if msg.Database != "db" || msg.Table != "t" || msg.Type != "UPDATE" || msg.IsDdl || msg.Es != 1700000000000 || msg.Ts != 1700000001000 ||
		len(msg.PkNames) != 1 || msg.PkNames[0] != "id" || msg.MysqlType["e"] != "enum('x','y')" {
		t.Fatalf("message %s", val)
	}
	if len(msg.Data) != 1 || msg.Data[0]["id"] != "1" || msg.Data[0]["v"] != "b" || msg.Data[0]["e"] != "x" {
		t.Fatalf("data %v", msg.Data)
	}
	if len(msg.Old) != 1 || len(msg.Old[0]) != 1 || msg.Old[0]["v"] != "a" {
		t.Fatalf("old %v (only the changed column)", msg.Old)
	}
}

// TestNamesAreJSONStrings: names in the envelope and the key schema are
// JSON strings whatever characters they hold (Go's quoting, used before,
// writes DEL as \x7f, which no JSON parser reads), and values encoded into
// the table's sized buffers are the bytes encoded from empty.
func TestNamesAreJSONStrings(t *testing.T) {
	odd := "t\x7f\"\\\x01é"
	cfg := DefaultConfig("t")
	cfg.TopicPrefix, cfg.Schema = "srv\x7f", true
	e := newEncoder(cfg)
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "db\x7f", Name: odd}, PK: []int{0},
		Columns: []sluice.Column{{Name: "id", DataType: "int", FullType: "int(11)"}, {Name: "v", DataType: "varchar", FullType: "varchar(300)", Nullable: true}}}
	m := txnMeta{gtid: "0-1-7", ts: 1700000000, start: sluice.Position{File: "mysql-bin\x7f.000001", Pos: 400}, server: 1}
	p := e.plan(tb)
	for i, n := range []int{0, 5, 300, 1, 200, 0, 300, 300, 2} {
		ch := sluice.RowChange{Kind: sluice.Insert, Table: tb, After: []any{int32(i), strings.Repeat("x", n)}}
		now := time.Unix(1700000001, 0)
		want := e.debeziumValue(nil, &ch, &m, i, 'c', now)
		buf := p.valueBuf()
		got := p.encoded(e.debeziumValue(buf, &ch, &m, i, 'c', now))
		if string(got) != string(want) || len(buf) != 0 {
			t.Fatalf("value %d in a sized buffer:\n%s\nfrom empty:\n%s", i, got, want)
		}
		var ev struct {
			Payload struct {
				Source map[string]any
			}
		}
		if err := json.Unmarshal(got, &ev); err != nil {
			t.Fatalf("%v: %s", err, got)
		}
		if s := ev.Payload.Source; s["table"] != odd || s["db"] != "db\x7f" || s["name"] != "srv\x7f" || s["file"] != "mysql-bin\x7f.000001" {
			t.Fatalf("source %v", s)
		}
	}
	if key := e.recordKey(tb, []any{int32(1), "v"}); !json.Valid(key) {
		t.Fatalf("key %s", key)
	}
	ddl := e.ddlValue(nil, &sluice.StreamItem{Kind: sluice.ItemDDL, Source: "CREATE TABLE x (id INT)"}, &m, "db\x7f", time.Unix(1700000001, 0))
	var d struct{ DatabaseName string }
	if err := json.Unmarshal(ddl, &d); err != nil || d.DatabaseName != "db\x7f" {
		t.Fatalf("%v: %s", err, ddl)
	}
}

// TestSameKeyValue: the direct comparisons agree with comparing the
// printed values.
func TestSameKeyValue(t *testing.T) {
	vals := []any{int64(1), int64(2), uint64(1), int32(1), int32(-1), "1", "a", []byte("a"), []byte("b"), 1.5, nil}
	for _, a := range vals {
		for _, b := range vals {
			if got, want := sameKeyValue(a, b), fmt.Sprint(a) == fmt.Sprint(b); got != want {
				t.Errorf("sameKeyValue(%#v, %#v) = %v, printed values equal: %v", a, b, got, want)
			}
		}
	}
}
