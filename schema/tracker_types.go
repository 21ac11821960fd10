package schema

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/sluice-db/sluice"
)

// MariaDB has column types of its own that the TiDB parser does not know:
// UUID, INET6 and INET4 (fixed-length binary values with a text form). Parse
// rewrites each one in a column definition to a stand-in the parser reads,
// ENUM('<marker><type>'), and the tracker and RestoreTypes turn the stand-in
// back into the real type. An ENUM with this one element cannot come from a
// real statement's type position by accident, and a word rewritten where it
// was not a type leaves an ENUM where no type fits, which fails to parse
// rather than being read wrongly.
const typeMarker = "sluice-mariadb-type:"

// mariadbTypes are the types the stand-in replaces, with their byte length
// (0: variable). The spatial types are MariaDB's too as far as the TiDB
// parser is concerned.
var mariadbTypes = map[string]int{"uuid": 16, "inet6": 16, "inet4": 4,
	"geometry": 0, "point": 0, "linestring": 0, "polygon": 0, "multipoint": 0, "multilinestring": 0,
	"multipolygon": 0, "geometrycollection": 0}

// invisibleMarker stands in for the INVISIBLE column attribute, which the
// TiDB parser does not know: a column COMMENT, which it keeps in place and
// which RestoreTypes turns back into INVISIBLE.
const invisibleMarker = "COMMENT '" + typeMarker + "invisible'"

// Words that precede a name but are not one: after them UUID, INET6 or
// INET4 is a column, index or constraint name, not a type.
var notAName = map[string]bool{
	"ADD": true, "MODIFY": true, "CHANGE": true, "DROP": true, "ALTER": true, "RENAME": true, "COLUMN": true,
	"INDEX": true, "KEY": true, "UNIQUE": true, "CONSTRAINT": true, "FULLTEXT": true, "SPATIAL": true,
	"EXISTS": true, "PRIMARY": true, "FOREIGN": true, "CHECK": true, "PERIOD": true, "TABLE": true, "IF": true,
	"NOT": true, "SELECT": true, "AS": true, "TO": true, "BY": true, "ON": true, "DEFAULT": true,
}

// Tokens after which a column definition starts: "(" and "," in CREATE
// TABLE and ADD (...), and the words of ADD/MODIFY [COLUMN] [IF [NOT] EXISTS].
var beforeColumnDef = map[string]bool{"(": true, ",": true, "COLUMN": true, "ADD": true, "MODIFY": true, "EXISTS": true}

type token struct {
	start, end int
	text       string // upper-cased bare word, the punctuation, or "" for a quoted name
	name       bool   // a backquoted identifier or a bare word
}

// rewriteMariaDBTypes returns sql with UUID, INET6 and INET4 in column type
// positions replaced by their stand-ins, and whether anything changed.
func rewriteMariaDBTypes(sql string) (string, bool) {
	if !containsTypeWord(sql) {
		return sql, false
	}
	toks := tokenize(sql)
	var b strings.Builder
	last := 0
	for i, t := range toks {
		low := strings.ToLower(t.text)
		if low == "invisible" && t.name && i > 0 && toks[i-1].text != "(" && toks[i-1].text != "," &&
			(i+1 == len(toks) || toks[i+1].text != "(") {
			// A column attribute (or an index's, which restores the same).
			b.WriteString(sql[last:t.start])
			b.WriteString(invisibleMarker)
			last = t.end
			continue
		}
		if _, ok := mariadbTypes[low]; !ok || !t.name || t.text == "" {
			continue
		}
		if i+1 < len(toks) && (toks[i+1].text == "(" || toks[i+1].text == ".") {
			continue // UUID(): the function; x.uuid: a qualified name
		}
		if !isTypePosition(toks, i) {
			continue
		}
		b.WriteString(sql[last:t.start])
		b.WriteString("ENUM('" + typeMarker + low + "')")
		last = t.end
	}
	if last == 0 {
		return sql, false
	}
	b.WriteString(sql[last:])
	return b.String(), true
}

func containsTypeWord(sql string) bool {
	l := strings.ToLower(sql)
	for _, w := range []string{"uuid", "inet", "invisible", "geometry", "point", "linestring", "polygon"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// isTypePosition: toks[i] follows a column name that starts a column
// definition ("(" / "," / ADD / MODIFY / COLUMN / EXISTS name TYPE), or the
// new name of CHANGE [COLUMN] [IF EXISTS] old new TYPE.
func isTypePosition(toks []token, i int) bool {
	isName := func(j int) bool { return j >= 0 && toks[j].name && !notAName[toks[j].text] }
	if !isName(i - 1) {
		return false
	}
	if i-2 >= 0 && beforeColumnDef[toks[i-2].text] {
		return true
	}
	if isName(i-2) && i-3 >= 0 {
		switch toks[i-3].text {
		case "CHANGE", "COLUMN", "EXISTS":
			return true
		}
	}
	return false
}

// tokenize splits sql into names and punctuation, skipping strings and
// comments. The bodies of executable comments (/*! ... */, /*M! ... */) are
// SQL the server runs, so they are tokenized too.
func tokenize(sql string) []token {
	var out []token
	n := len(sql)
	for i := 0; i < n; {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' || (c == '-' && i+2 < n && sql[i+1] == '-' && (sql[i+2] == ' ' || sql[i+2] == '\t')):
			for i < n && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < n && sql[i+1] == '*':
			if i+2 < n && sql[i+2] == '!' {
				i += 3
				for i < n && sql[i] >= '0' && sql[i] <= '9' {
					i++
				}
				continue
			}
			if i+3 < n && (sql[i+2] == 'M' || sql[i+2] == 'm') && sql[i+3] == '!' {
				i += 4
				for i < n && sql[i] >= '0' && sql[i] <= '9' {
					i++
				}
				continue
			}
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '*' && i+1 < n && sql[i+1] == '/':
			i += 2 // the end of an executable comment
		case c == '\'' || c == '"':
			i = skipQuoted(sql, i, c)
		case c == '`':
			j := i + 1
			for j < n {
				if sql[j] == '`' {
					if j+1 < n && sql[j+1] == '`' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			out = append(out, token{start: i, end: min(j+1, n), name: true})
			i = j + 1
		case isWordByte(c):
			j := i
			for j < n && isWordByte(sql[j]) {
				j++
			}
			out = append(out, token{start: i, end: j, text: strings.ToUpper(sql[i:j]), name: true})
			i = j
		default:
			out = append(out, token{start: i, end: i + 1, text: sql[i : i+1]})
			i++
		}
	}
	return out
}

func skipQuoted(sql string, i int, q byte) int {
	for j := i + 1; j < len(sql); j++ {
		switch sql[j] {
		case '\\':
			j++
		case q:
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(sql)
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// mariadbType returns the MariaDB type a stand-in field type carries, or "".
func mariadbType(tp *types.FieldType) string {
	if tp.GetType() != mysql.TypeEnum || len(tp.GetElems()) != 1 {
		return ""
	}
	e := tp.GetElems()[0]
	if !strings.HasPrefix(e, typeMarker) {
		return ""
	}
	if t := strings.TrimPrefix(e, typeMarker); t != "" {
		if _, ok := mariadbTypes[t]; ok {
			return t
		}
	}
	return ""
}

// fixMariaDBType gives a column parsed from a stand-in its real type, as
// information_schema describes it (no character set).
func fixMariaDBType(c *sluice.Column, tp *types.FieldType) {
	if t := mariadbType(tp); t != "" {
		c.DataType, c.FullType, c.Charset, c.Unsigned = t, t, "", false
	}
}

// RestoreTypes turns the stand-ins in SQL restored from a parsed statement
// back into MariaDB's own type names, so the target gets the real type.
func RestoreTypes(sql string) string {
	sql = restoreSpatial(sql)
	if !strings.Contains(sql, typeMarker) {
		return sql
	}
	for t := range mariadbTypes {
		sql = strings.ReplaceAll(sql, "ENUM('"+typeMarker+t+"')", strings.ToUpper(t))
	}
	return strings.ReplaceAll(sql, invisibleMarker, "INVISIBLE")
}
