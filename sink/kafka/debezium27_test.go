package kafka

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
)

// conforms checks a {schema, payload} message as a Connect consumer
// (JsonConverter.toConnectData) reads it: every field of a struct schema
// is in the payload, in the schema's order, with nothing else; a required
// field is not null; types match. It returns the first mismatch.
func conforms(schema map[string]any, v any, path string) error {
	if v == nil {
		if opt, _ := schema["optional"].(bool); !opt {
			if _, hasDefault := schema["default"]; !hasDefault {
				return fmt.Errorf("%s: null in a required field", path)
			}
		}
		return nil
	}
	switch schema["type"] {
	case "struct":
		m, ok := v.(orderedObject)
		if !ok {
			return fmt.Errorf("%s: %T for a struct", path, v)
		}
		fields, _ := schema["fields"].([]any)
		if len(fields) != len(m.keys) {
			return fmt.Errorf("%s: payload fields %v, schema has %d", path, m.keys, len(fields))
		}
		for i, f := range fields {
			fs := f.(map[string]any)
			name := fs["field"].(string)
			if m.keys[i] != name {
				return fmt.Errorf("%s: payload field %d is %q, schema's is %q", path, i, m.keys[i], name)
			}
			if err := conforms(fs, m.vals[i], path+"."+name); err != nil {
				return err
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %T for an array", path, v)
		}
		for i, x := range a {
			if err := conforms(schema["items"].(map[string]any), x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case "string", "bytes":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %T for %s", path, v, schema["type"])
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %T for boolean", path, v)
		}
	case "int8", "int16", "int32", "int64", "float", "double":
		if _, ok := v.(json.Number); !ok {
			return fmt.Errorf("%s: %T for %s", path, v, schema["type"])
		}
	default:
		return fmt.Errorf("%s: schema type %v", path, schema["type"])
	}
	return nil
}

// orderedObject is a JSON object with its keys in order.
type orderedObject struct {
	keys []string
	vals []any
}

// decodeOrdered reads JSON keeping object key order and numbers as text.
func decodeOrdered(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var o orderedObject
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeOrdered(d)
				if err != nil {
					return nil, err
				}
				o.keys, o.vals = append(o.keys, k.(string)), append(o.vals, v)
			}
			_, err := d.Token()
			return o, err
		case '[':
			a := []any{}
			for d.More() {
				v, err := decodeOrdered(d)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := d.Token()
			return a, err
		}
	}
	return tok, nil
}

// checkMessage checks that msg is {schema, payload} and that the payload
// conforms to the schema.
func checkMessage(t *testing.T, what string, msg []byte) {
	t.Helper()
	var whole struct {
		Schema  map[string]any  `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(msg, &whole); err != nil || whole.Schema == nil || whole.Payload == nil {
		t.Fatalf("%s is not {schema, payload} (%v): %s", what, err, msg)
	}
	d := json.NewDecoder(bytes.NewReader(whole.Payload))
	d.UseNumber()
	p, err := decodeOrdered(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := conforms(whole.Schema, p, what); err != nil {
		t.Fatalf("%s does not conform to its schema: %v\n%s", what, err, msg)
	}
}

// fieldSchema finds the field schema of column name in the "after" struct
// of an envelope schema.
func fieldSchema(t *testing.T, env string, name string) map[string]any {
	t.Helper()
	var s struct {
		Fields []struct {
			Field  string           `json:"field"`
			Fields []map[string]any `json:"fields"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(env), &s); err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Fields {
		if f.Field == "after" {
			for _, c := range f.Fields {
				if c["field"] == name {
					return c
				}
			}
		}
	}
	t.Fatalf("no field %s in %s", name, env)
	return nil
}

// TestFieldSchemaDefaults: a column's DEFAULT is its field schema's
// "default", in the field's Connect type, as Debezium's
// BinlogDefaultValueConverter gives it (issue 30 F5): without it, a JDBC
// sink gave rows from before an ADD COLUMN ... DEFAULT 'def' NULL. No
// DEFAULT, DEFAULT NULL, a nullable zero date and a nullable
// CURRENT_TIMESTAMP get none; a NOT NULL CURRENT_TIMESTAMP gets the epoch,
// as Debezium's DDL parser reads it.
func TestFieldSchemaDefaults(t *testing.T) {
	str := func(s string) *string { return &s }
	cols := []struct {
		col  sluice.Column
		want string // "" for no default
	}{
		{sluice.Column{Name: "s", DataType: "varchar", FullType: "varchar(10)", Nullable: true, Default: str("def")}, `"def"`},
		{sluice.Column{Name: "q", DataType: "varchar", FullType: "varchar(10)", Nullable: true, Default: str("it's")}, `"it's"`},
		{sluice.Column{Name: "n", DataType: "varchar", FullType: "varchar(10)", Nullable: true}, ``},
		{sluice.Column{Name: "i", DataType: "int", FullType: "int(11)", Default: str("-7")}, `-7`},
		{sluice.Column{Name: "u", DataType: "bigint", FullType: "bigint(20) unsigned", Unsigned: true, Default: str("18446744073709551615")}, `18446744073709551615`},
		{sluice.Column{Name: "tf", DataType: "tinyint", FullType: "tinyint(1)", Default: str("TRUE")}, `1`},
		{sluice.Column{Name: "f", DataType: "float", FullType: "float", Default: str("1.5")}, `1.5`},
		{sluice.Column{Name: "d", DataType: "double", FullType: "double", Default: str("2.25")}, `2.25`},
		// 12.3 at scale 2: unscaled 1230 = 0x04ce, base64 "BM4="
		{sluice.Column{Name: "dec", DataType: "decimal", FullType: "decimal(10,2)", Default: str("12.3")}, `"BM4="`},
		// 0.005 rounds half up to 0.01: unscaled 1, "AQ=="
		{sluice.Column{Name: "dr", DataType: "decimal", FullType: "decimal(10,2)", Default: str("0.005")}, `"AQ=="`},
		{sluice.Column{Name: "b", DataType: "bit", FullType: "bit(1)", Default: str("b'1'")}, `true`},
		// BIT(5) DEFAULT b'101': the tracker's text is 0x05; Debezium 2.7 writes "BQ=="
		{sluice.Column{Name: "b5", DataType: "bit", FullType: "bit(5)", Default: str("0x05")}, `"BQ=="`},
		{sluice.Column{Name: "dt", DataType: "date", FullType: "date", Default: str("1970-01-11")}, `10`},
		{sluice.Column{Name: "dz", DataType: "date", FullType: "date", Nullable: true, Default: str("0000-00-00")}, ``},
		{sluice.Column{Name: "dtm", DataType: "datetime", FullType: "datetime", Default: str("2018-06-20 06:37:03")}, `1529476623000`},
		{sluice.Column{Name: "dt6", DataType: "datetime", FullType: "datetime(6)", Default: str("2018-06-20 06:37:03.000001")}, `1529476623000001`},
		{sluice.Column{Name: "ts", DataType: "timestamp", FullType: "timestamp", Default: str("current_timestamp()")}, `"1970-01-01T00:00:00Z"`},
		{sluice.Column{Name: "tsn", DataType: "timestamp", FullType: "timestamp", Nullable: true, Default: str("CURRENT_TIMESTAMP")}, ``},
		{sluice.Column{Name: "tsv", DataType: "timestamp", FullType: "timestamp", Default: str("2018-06-20 13:37:03")}, `"2018-06-20T13:37:03Z"`},
		{sluice.Column{Name: "tm", DataType: "time", FullType: "time", Default: str("-01:00:00")}, `-3600000000`},
		{sluice.Column{Name: "y", DataType: "year", FullType: "year(4)", Default: str("2024")}, `2024`},
		{sluice.Column{Name: "e", DataType: "enum", FullType: "enum('a','b')", Default: str("b")}, `"b"`},
		{sluice.Column{Name: "st", DataType: "set", FullType: "set('x','y')", Default: str("x,y")}, `"x,y"`},
		{sluice.Column{Name: "bn", DataType: "varbinary", FullType: "varbinary(4)", Default: str("ab")}, `"YWI="`},
	}
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "t"}}
	for _, c := range cols {
		tb.Columns = append(tb.Columns, c.col)
	}
	cfg := DefaultConfig("t")
	cfg.TopicPrefix, cfg.Schema = "p", true
	e := newEncoder(cfg)
	env := e.envelopeSchema(tb)
	for _, c := range cols {
		f := fieldSchema(t, env, c.col.Name)
		got := ""
		if _, ok := f["default"]; ok {
			got = rawDefault(env, c.col.Name) // the text: a float64 would round 18446744073709551615
		}
		if got != c.want {
			t.Errorf("%s %s DEFAULT %v: default %s, want %s", c.col.Name, c.col.FullType, deref(c.col.Default), orNone(got), orNone(c.want))
		}
	}
	// The field order of a field schema is JsonConverter's: parameters,
	// default, field.
	if !strings.Contains(env, `"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"a,b"},"default":"b","field":"e"}`) {
		t.Errorf("the enum field's schema is not in JsonConverter's order: %s", env)
	}
}

// rawDefault is the JSON text of a field's default.
func rawDefault(env, name string) string {
	i := strings.Index(env, `"field":"`+name+`"`)
	j := strings.LastIndex(env[:i], `"default":`)
	return strings.TrimSuffix(env[j+len(`"default":`):i], ",")
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// TestDebezium27Timestamps: the source block and the envelope carry
// ts_us and ts_ns beside ts_ms, in Debezium 2.7's field order, as the
// envelope's claimed version 2.7.4.Final has them (issue 30 F9); with
// schema: true, each event conforms to its schema.
func TestDebezium27Timestamps(t *testing.T) {
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "t"}, PK: []int{0}, PKIsPrimary: true,
		Columns: []sluice.Column{{Name: "id", DataType: "int", FullType: "int(11)"}, {Name: "s", DataType: "varchar", FullType: "varchar(5)", Nullable: true, Default: strp("x")}}}
	now := time.Unix(1700000001, 234567891)
	m := &txnMeta{gtid: "0-1-5", ts: 1700000000, server: 1, start: sluice.Position{File: "mysql-bin.000001", Pos: 4}}
	for _, schema := range []bool{false, true} {
		cfg := DefaultConfig("t")
		cfg.TopicPrefix, cfg.Schema = "p", schema
		e := newEncoder(cfg)
		v := e.debeziumValue(nil, &sluice.RowChange{Table: tb, After: []any{int32(1), "a"}}, m, 0, 'c', now)
		var msg struct {
			Payload map[string]any `json:"payload"`
		}
		var payload map[string]any
		if schema {
			checkMessage(t, "change event", v)
			if err := json.Unmarshal(v, &msg); err != nil {
				t.Fatal(err)
			}
			payload = msg.Payload
		} else if err := json.Unmarshal(v, &payload); err != nil {
			t.Fatal(err)
		}
		src := payload["source"].(map[string]any)
		want := map[string]any{"ts_ms": 1700000000000.0, "ts_us": 1700000000000000.0, "ts_ns": 1700000000000000000.0}
		for k, w := range want {
			if src[k] != w {
				t.Errorf("schema %v: source.%s = %v, want %v", schema, k, src[k], w)
			}
		}
		for k, w := range map[string]float64{"ts_ms": float64(now.UnixMilli()), "ts_us": float64(now.UnixMicro()), "ts_ns": float64(now.UnixNano())} {
			if payload[k] != w {
				t.Errorf("schema %v: envelope %s = %v, want %v", schema, k, payload[k], w)
			}
		}
		order := []string{`"sequence":null,"ts_us":`, `,"table":"t","server_id":`, `,"transaction":null,"op":"c","ts_ms":`, `,"ts_us":`, `,"ts_ns":`}
		rest := string(v)
		for _, o := range order {
			i := strings.Index(rest, o)
			if i < 0 {
				t.Fatalf("schema %v: %q not in order in %s", schema, o, v)
			}
			rest = rest[i:]
		}
	}
}

func strp(s string) *string { return &s }

// TestDDLTopicWithSchema: with schema: true, a schema change event's key
// and value are {schema, payload} with Debezium 2.7's SchemaChangeKey and
// SchemaChangeValue schemas, and the payloads conform to them (issue 30
// F8); without it they stay plain JSON.
func TestDDLTopicWithSchema(t *testing.T) {
	ref := sluice.TableRef{Schema: "shop", Name: "item"}
	it := ddlItem(t, []sluice.TableRef{ref}, "CREATE TABLE item (id int PRIMARY KEY, s varchar(5) NOT NULL DEFAULT 'x', e enum('a','b'), d decimal(5,2))")
	m := &txnMeta{gtid: "0-1-5", ts: 1700000000, server: 1, start: sluice.Position{File: "mysql-bin.000001", Pos: 4}}
	cfg := DefaultConfig("t")
	cfg.TopicPrefix, cfg.Schema = "p", true
	key, value := newEncoder(cfg).ddlRecord(it, m, "shop", time.Unix(1700000001, 0))
	checkMessage(t, "schema change key", key)
	checkMessage(t, "schema change value", value)
	var v struct {
		Schema struct {
			Name string `json:"name"`
		} `json:"schema"`
		Payload struct {
			DDL          string `json:"ddl"`
			TableChanges []any  `json:"tableChanges"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(value, &v); err != nil {
		t.Fatal(err)
	}
	if v.Schema.Name != "io.debezium.connector.mysql.SchemaChangeValue" || !strings.HasPrefix(v.Payload.DDL, "CREATE TABLE item") || len(v.Payload.TableChanges) != 1 ||
		!strings.Contains(string(value), `"db":"shop","sequence":null,"ts_us":1700000000000000,"ts_ns":1700000000000000000,"table":"item",`) {
		t.Errorf("schema change value: %s", value)
	}
	if !bytes.HasPrefix(key, []byte(`{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"databaseName"}],"optional":false,"name":"io.debezium.connector.mysql.SchemaChangeKey","version":1},"payload":{"databaseName":"shop"}}`)) {
		t.Errorf("schema change key: %s", key)
	}
	cfg.Schema = false
	key, value = newEncoder(cfg).ddlRecord(it, m, "shop", time.Unix(1700000001, 0))
	var plain map[string]any
	if err := json.Unmarshal(value, &plain); err != nil || plain["schema"] != nil || plain["ddl"] == nil || string(key) != `{"databaseName":"shop"}` {
		t.Errorf("without schema: key %s value %s (%v)", key, value, err)
	}
}
