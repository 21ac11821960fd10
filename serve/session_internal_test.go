package serve

import (
	"strings"
	"testing"
)

// TestReadsTable: a SELECT that reads a table is refused (the service has
// none: Debezium's information_schema.schemata query got a wrong row when
// it was taken for a SELECT of variables); FROM DUAL and FROM inside a
// string are no table.
func TestReadsTable(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT schema_name, default_character_set_name FROM information_schema.schemata": true,
		"select @@version_comment limit 1":                                                false,
		"SELECT 1 FROM DUAL":                                                              false,
		"SELECT 'a from b'":                                                               false,
		"SELECT @@server_id, `from` FROM t":                                               true,
		"SELECT UNIX_TIMESTAMP()":                                                         false,
	} {
		if got := readsTable(q); got != want {
			t.Errorf("readsTable(%q) = %v, want %v", q, got, want)
		}
	}
}

// TestShowVariablesWhere: without a source, SHOW VARIABLES WHERE is
// answered from the service's own variables for conditions on
// Variable_name (Debezium's IN list among them), and refused with the fix
// for others.
func TestShowVariablesWhere(t *testing.T) {
	h := newSession(&Server{cfg: Config{ServerID: 7}})
	for q, want := range map[string]string{
		"SHOW VARIABLES WHERE Variable_name IN ('character_set_server','collation_server')":                                 "character_set_server=utf8mb4 collation_server=utf8mb4_general_ci",
		"SHOW GLOBAL VARIABLES WHERE Variable_name = 'SERVER_ID'":                                                           "server_id=7",
		"show variables where variable_name like 'binlog_f%' or Variable_name = 'log_bin'":                                  "binlog_format=ROW log_bin=ON",
		"SHOW VARIABLES WHERE (Variable_name LIKE 'binlog%') AND NOT Variable_name IN ('binlog_checksum', 'binlog_format')": "binlog_row_image=FULL",
		"SHOW VARIABLES LIKE 'version_c%'":                                                                                  "version_comment=sluice binlog service",
		"SHOW VARIABLES WHERE Variable_name = 'no_such_thing'":                                                              "",
	} {
		r, err := h.showVariablesWhere(q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		var got []string
		for i := range r.RowDatas {
			vals, err := r.RowDatas[i].Parse(r.Fields, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(vals[0].AsString())+"="+string(vals[1].AsString()))
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("%s = %q, want %q", q, g, want)
		}
	}
	for _, q := range []string{"SHOW VARIABLES WHERE Value = 'ON'", "SHOW VARIABLES WHERE Variable_name = CONCAT('server', '_id')"} {
		if _, err := h.showVariablesWhere(q); err == nil || !strings.Contains(err.Error(), "Variable_name only") {
			t.Errorf("%s: %v, want a refusal naming what is answered", q, err)
		}
	}
}
