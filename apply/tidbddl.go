package apply

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/charset"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

// DDL into TiDB. ddlSessionSQL sets the source's session context as MariaDB
// takes it: sql_mode as a number and the character sets as collation ids,
// which TiDB refuses (it takes names only), and
// explicit_defaults_for_timestamp, which is read-only (always ON) there.
// So on TiDB the same context is set by name, and a DDL that ran on the
// source with explicit_defaults_for_timestamp=OFF and names a TIMESTAMP is
// refused: TiDB would give the column other defaults than the source did.

// mariadbSQLModes names MariaDB's sql_mode bits (sql_class.h), bit i at i.
var mariadbSQLModes = []string{"REAL_AS_FLOAT", "PIPES_AS_CONCAT", "ANSI_QUOTES", "IGNORE_SPACE", "IGNORE_BAD_TABLE_OPTIONS",
	"ONLY_FULL_GROUP_BY", "NO_UNSIGNED_SUBTRACTION", "NO_DIR_IN_CREATE", "POSTGRESQL", "ORACLE", "MSSQL", "DB2", "MAXDB",
	"NO_KEY_OPTIONS", "NO_TABLE_OPTIONS", "NO_FIELD_OPTIONS", "MYSQL323", "MYSQL40", "ANSI", "NO_AUTO_VALUE_ON_ZERO",
	"NO_BACKSLASH_ESCAPES", "STRICT_TRANS_TABLES", "STRICT_ALL_TABLES", "NO_ZERO_IN_DATE", "NO_ZERO_DATE",
	"ALLOW_INVALID_DATES", "ERROR_FOR_DIVISION_BY_ZERO", "TRADITIONAL", "NO_AUTO_CREATE_USER", "HIGH_NOT_PRECEDENCE",
	"NO_ENGINE_SUBSTITUTION", "PAD_CHAR_TO_FULL_LENGTH", "EMPTY_STRING_IS_NULL", "SIMULTANEOUS_ASSIGNMENT", "TIME_ROUND_FRACTIONAL"}

// tidbNoSQLMode are MariaDB's modes TiDB does not know; none changes what a
// DDL makes, except IGNORE_BAD_TABLE_OPTIONS, whose absence makes TiDB
// refuse a bad option, visibly.
var tidbNoSQLMode = map[string]bool{"IGNORE_BAD_TABLE_OPTIONS": true, "EMPTY_STRING_IS_NULL": true, "SIMULTANEOUS_ASSIGNMENT": true, "TIME_ROUND_FRACTIONAL": true}

// sqlModeNames turns MariaDB's sql_mode bits into the names TiDB takes.
func sqlModeNames(bits uint64) string {
	var names []string
	for i, n := range mariadbSQLModes {
		if bits&(1<<uint(i)) != 0 && !tidbNoSQLMode[n] {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// tidbDDLSessionSQL is ddlSessionSQL for a TiDB target, or an error naming
// what TiDB cannot take for DDL q.
func tidbDDLSessionSQL(it sluice.StreamItem, q string) (string, error) {
	s := it.Session
	b := []byte("SET SESSION sql_mode=")
	if s.HasSQLMode && it.End.Flavor != "mysql" {
		b = sqlgen.AppendQuoted(b, sqlModeNames(s.SQLMode|1<<7)) // NO_DIR_IN_CREATE, as ddlSessionSQL
	} else {
		b = sqlgen.AppendQuoted(b, ddlSQLMode)
	}
	if it.End.Flavor == "mysql" && (s.Charset[0] >= 255 || s.Charset[1] >= 255 || s.Charset[2] >= 255) {
		b = append(b, ", character_set_client=utf8mb4"...)
	} else if s.Charset[0] != 0 {
		names := [3]string{}
		for i, id := range s.Charset {
			c, err := charset.GetCollationByID(int(id))
			if err != nil {
				return "", fmt.Errorf("the source's session used collation id %d, which TiDB does not know", id)
			}
			names[i] = c.Name
			if i == 0 {
				names[i] = c.CharsetName
			}
		}
		b = append(b, ", character_set_client="...)
		b = sqlgen.AppendQuoted(b, names[0])
		b = append(b, ", collation_connection="...)
		b = sqlgen.AppendQuoted(b, names[1])
		b = append(b, ", collation_server="...)
		b = sqlgen.AppendQuoted(b, names[2])
	}
	if s.TimeZone != "" {
		b = append(b, ", time_zone="...)
		b = sqlgen.AppendQuoted(b, s.TimeZone)
	}
	if s.HasFlags {
		b = append(b, ", foreign_key_checks="...)
		b = appendBool(b, !s.NoFKChecks)
		if it.End.Flavor != "mysql" && !s.ExplicitTimestamp && strings.Contains(strings.ToUpper(q), "TIMESTAMP") {
			return "", fmt.Errorf("the source ran it with explicit_defaults_for_timestamp=OFF, which TiDB cannot (its TIMESTAMP columns would get other defaults and NULL-ness)")
		}
	}
	if s.AutoIncIncrement != 0 {
		b = append(b, ", auto_increment_increment="...)
		b = strconv.AppendUint(b, uint64(s.AutoIncIncrement), 10)
		b = append(b, ", auto_increment_offset="...)
		b = strconv.AppendUint(b, uint64(s.AutoIncOffset), 10)
	}
	b = append(b, ", timestamp="...)
	b = append(b, ddlTimestamp(it)...)
	return string(b), nil
}
