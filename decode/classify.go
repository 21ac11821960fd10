package decode

import (
	"strings"
)

// stmtClass is what a statement in a Query event does to replicated data.
// The decoder handles every class exactly or stops the task: a statement
// it cannot place is classUnknown, which stops, never one that is dropped.
type stmtClass uint8

const (
	// classUnknown: not recognised. It stops the task.
	classUnknown    stmtClass = iota
	classBegin                // BEGIN, START TRANSACTION
	classCommit               // COMMIT
	classRollback             // ROLLBACK (the whole transaction)
	classSavepoint            // SAVEPOINT name
	classRollbackTo           // ROLLBACK [WORK] TO [SAVEPOINT] name
	classRelease              // RELEASE SAVEPOINT name
	classXA                   // XA START / END / PREPARE / COMMIT / ROLLBACK
	// classDML: a statement that changes rows, logged as text: a session
	// in binlog_format STATEMENT or MIXED. Its rows are not in the binlog,
	// so it cannot be replicated row by row.
	classDML
	// classDDL: changes a table's or a schema's shape (the DDL path).
	classDDL
	// classTemp: a temporary table's CREATE or DROP: no replicated table.
	classTemp
	// classNoData: changes no table's rows or shape (accounts, grants,
	// stored programs, views, maintenance).
	classNoData
)

var classNames = [...]string{"unknown", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "ROLLBACK TO SAVEPOINT", "RELEASE SAVEPOINT", "XA", "DML", "DDL", "temporary table", "no replicated data"}

func (c stmtClass) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// word is one bare word of a statement: its upper-cased text and where it
// starts in the statement.
type word struct {
	w   string
	off int
}

// words returns the first max bare words of q, upper-cased, skipping
// comments, quoted strings and quoted identifiers (a `select` column or a
// 'DROP' default is not a keyword). The text of an executable comment
// (/*!50001 ... */, /*M!100100 ... */) counts: the server runs it.
func words(q string, max int) []word {
	var out []word
	for i := 0; i < len(q) && len(out) < max; {
		c := q[i]
		switch {
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := i + 2
			if j < len(q) && (q[j] == '!' || q[j] == 'M' && j+1 < len(q) && q[j+1] == '!') {
				// Executable: skip the marker and the version, read the body.
				for j < len(q) && (q[j] == '!' || q[j] == 'M') {
					j++
				}
				for j < len(q) && q[j] >= '0' && q[j] <= '9' {
					j++
				}
				i = j
				continue
			}
			end := strings.Index(q[j:], "*/")
			if end < 0 {
				return out
			}
			i = j + end + 2
		case c == '*' && i+1 < len(q) && q[i+1] == '/':
			i += 2 // the end of an executable comment
		case c == '#', c == '-' && i+2 < len(q) && q[i+1] == '-' && (q[i+2] == ' ' || q[i+2] == '\t' || q[i+2] == '\n'):
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				return out
			}
			i += end + 1
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(q) {
				if q[j] == '\\' && c != '`' {
					j += 2
					continue
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			i = j + 1
		case isWordByte(c):
			j := i
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			out = append(out, word{strings.ToUpper(q[i:j]), i})
			i = j
		default:
			i++
		}
	}
	return out
}

// isWordByte is in ddltext.go: the bytes of an unquoted identifier.

// identAfter is the identifier that starts at or after byte off of q (a
// savepoint name, quoted or bare).
func identAfter(q string, off int) string {
	for off < len(q) && (q[off] == ' ' || q[off] == '\t' || q[off] == '\n' || q[off] == '\r') {
		off++
	}
	if off >= len(q) {
		return ""
	}
	if q[off] == '`' {
		var b strings.Builder
		for i := off + 1; i < len(q); i++ {
			if q[i] == '`' {
				if i+1 < len(q) && q[i+1] == '`' {
					b.WriteByte('`')
					i++
					continue
				}
				return b.String()
			}
			b.WriteByte(q[i])
		}
		return b.String()
	}
	j := off
	for j < len(q) && isWordByte(q[j]) {
		j++
	}
	return q[off:j]
}

// Object keywords after CREATE, ALTER or DROP and their class.
var objectClass = map[string]stmtClass{
	"TABLE": classDDL, "DATABASE": classDDL, "SCHEMA": classDDL, "INDEX": classDDL, "UNIQUE": classDDL,
	"FULLTEXT": classDDL, "SPATIAL": classDDL, "SEQUENCE": classDDL, "TEMPORARY": classTemp,
	"VIEW": classNoData, "TRIGGER": classNoData, "PROCEDURE": classNoData, "FUNCTION": classNoData,
	"EVENT": classNoData, "USER": classNoData, "ROLE": classNoData, "SERVER": classNoData,
	"PACKAGE": classNoData, "TABLESPACE": classNoData, "LOGFILE": classNoData,
}

// Statements that change no table's rows or shape, by their first word.
var noDataFirst = map[string]bool{
	"GRANT": true, "REVOKE": true, "FLUSH": true, "OPTIMIZE": true, "REPAIR": true,
	"CHECK": true, "CHECKSUM": true, "INSTALL": true, "UNINSTALL": true, "RESET": true, "PURGE": true,
}

// Statements that change rows, by their first word.
var dmlFirst = map[string]bool{
	"INSERT": true, "UPDATE": true, "DELETE": true, "REPLACE": true, "LOAD": true,
	"CALL": true, "DO": true, "SELECT": true, "WITH": true, "VALUES": true, "TABLE": true, "HANDLER": true,
}

// classify says what statement q (the text of a Query event) is; for
// savepoint statements it also returns the savepoint's name.
func classify(q string) (stmtClass, string) {
	ws := words(q, 16)
	if len(ws) == 0 {
		// Only comments (MariaDB's "# Dummy event replacing event type
		// ..."): the server runs nothing.
		return classNoData, ""
	}
	at := func(i int) string {
		if i < len(ws) {
			return ws[i].w
		}
		return ""
	}
	switch first := ws[0].w; first {
	case "BEGIN":
		if len(ws) == 1 || at(1) == "WORK" && len(ws) == 2 {
			return classBegin, ""
		}
		return classUnknown, "" // BEGIN NOT ATOMIC: a compound statement
	case "START":
		if at(1) == "TRANSACTION" {
			return classBegin, ""
		}
	case "COMMIT":
		return classCommit, ""
	case "ROLLBACK":
		i := 1
		if at(i) == "WORK" {
			i++
		}
		if at(i) != "TO" {
			return classRollback, ""
		}
		off := ws[i].off + len("TO")
		if at(i+1) == "SAVEPOINT" {
			if n := identAfter(q, ws[i+1].off+len("SAVEPOINT")); n != "" {
				off = ws[i+1].off + len("SAVEPOINT")
			}
		}
		return classRollbackTo, identAfter(q, off)
	case "SAVEPOINT":
		return classSavepoint, identAfter(q, ws[0].off+len("SAVEPOINT"))
	case "RELEASE":
		if at(1) == "SAVEPOINT" {
			return classRelease, identAfter(q, ws[1].off+len("SAVEPOINT"))
		}
	case "XA":
		return classXA, ""
	case "LOAD":
		if at(1) == "INDEX" {
			return classNoData, "" // LOAD INDEX INTO CACHE
		}
		return classDML, ""
	case "ANALYZE":
		if at(1) == "TABLE" || at(1) == "LOCAL" || at(1) == "NO_WRITE_TO_BINLOG" {
			return classNoData, ""
		}
		return classDML, "" // ANALYZE UPDATE ... runs the UPDATE
	case "SET":
		if at(1) == "STATEMENT" {
			// SET STATEMENT var=value[, ...] FOR statement: the statement.
			for i := 2; i < len(ws); i++ {
				if ws[i].w == "FOR" {
					return classify(q[ws[i].off+len("FOR"):])
				}
			}
			return classUnknown, ""
		}
		return classNoData, "" // SET PASSWORD, SET DEFAULT ROLE
	case "TRUNCATE":
		return classDDL, ""
	case "RENAME":
		switch at(1) {
		case "TABLE", "TABLES":
			return classDDL, ""
		case "USER":
			return classNoData, ""
		}
	case "CREATE", "ALTER", "DROP":
		for i := 1; i < len(ws) && i < 12; i++ {
			c, ok := objectClass[ws[i].w]
			if !ok {
				continue
			}
			if first == "CREATE" && ws[i].w == "TABLE" && selectsRows(q) {
				// CREATE TABLE ... SELECT logged as text (statement
				// format): its rows are not in the binlog. (Row format
				// logs the plain CREATE TABLE and then the rows.)
				return classDML, ""
			}
			return c, ""
		}
	default:
		if noDataFirst[first] {
			return classNoData, ""
		}
		if dmlFirst[first] {
			return classDML, ""
		}
	}
	return classUnknown, ""
}

// selectsRows reports whether a CREATE TABLE statement fills the table from
// a SELECT (a SELECT keyword outside quotes, comments and parentheses that
// only define columns).
func selectsRows(q string) bool {
	for _, w := range words(q, 1<<20) {
		if w.w == "SELECT" {
			return true
		}
	}
	return false
}

// innerStatement is the statement of a SET STATEMENT ... FOR statement,
// and q itself otherwise: the DDL path reads the statement the server ran.
func innerStatement(q string) string {
	ws := words(q, 64)
	if len(ws) < 3 || ws[0].w != "SET" || ws[1].w != "STATEMENT" {
		return q
	}
	for _, w := range ws[2:] {
		if w.w == "FOR" {
			return strings.TrimSpace(q[w.off+len("FOR"):])
		}
	}
	return q
}
