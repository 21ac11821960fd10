package decode

import "strings"

// setStatementVars returns the assignments of a SET STATEMENT var=value[,
// ...] FOR statement as the source wrote them ("" for any other
// statement). The server runs the inner statement with those variables,
// and a native replica runs the whole text; the Query event's status
// variables carry some of them (sql_mode, explicit_defaults_for_timestamp)
// but not others (default_storage_engine, innodb_default_row_format,
// system_versioning_alter_history, ...). The applier runs the DDL it
// sends under the same assignments (sluice.DDLSession.SetStatement).
func setStatementVars(q string) string {
	ws := words(q, 64)
	if len(ws) < 3 || ws[0].w != "SET" || ws[1].w != "STATEMENT" {
		return ""
	}
	for _, w := range ws[2:] {
		if w.w == "FOR" {
			return strings.TrimSpace(q[ws[1].off+len("STATEMENT") : w.off])
		}
	}
	return ""
}
