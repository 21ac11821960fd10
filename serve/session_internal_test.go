package serve

import "testing"

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
