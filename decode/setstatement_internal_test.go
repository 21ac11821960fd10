package decode

import "testing"

func TestSetStatementVars(t *testing.T) {
	for q, want := range map[string]string{
		"SET STATEMENT default_storage_engine=Aria FOR CREATE TABLE t (a INT)":             "default_storage_engine=Aria",
		"set statement sql_mode='', innodb_strict_mode=0 for alter table t add b int":      "sql_mode='', innodb_strict_mode=0",
		"SET STATEMENT sql_mode='NO_ENGINE_SUBSTITUTION FOR x' FOR DROP TABLE t":           "sql_mode='NO_ENGINE_SUBSTITUTION FOR x'",
		"/* c */ SET STATEMENT max_statement_time=5 /* FOR */ FOR CREATE INDEX i ON t (a)": "max_statement_time=5 /* FOR */",
		"CREATE TABLE t (a INT)": "",
		"SET @x = 1":             "",
	} {
		if got := setStatementVars(q); got != want {
			t.Errorf("setStatementVars(%q) = %q, want %q", q, got, want)
		}
	}
}
