package schema

import (
	"regexp"
	"strconv"
	"strings"
)

// MariaDB statements the TiDB parser reads only after a rewrite (difftest
// bug C). Each rewrite keeps the statement's meaning; the SQL restored from
// the parsed statement goes through RestoreTypes, which undoes the
// stand-ins, so the target gets MariaDB's own syntax.
//
//   - Executable comments, /*!50100 ...*/, /*!100500 ...*/, /*M!100301 ...*/:
//     MariaDB runs the body when its version is at least the number. The
//     parser skips /*M! and six-digit bodies, or fails on them, so the body
//     becomes plain text (or is removed, for a later server version).
//   - CREATE OR REPLACE TABLE: parsed as CREATE TABLE, and OrReplace says
//     so (the decoder drops the table first, as MariaDB does).
//   - Then, at the token each parse fails on: PERSISTENT (MariaDB's word for
//     STORED) becomes STORED; SPATIAL INDEX|KEY in a table definition
//     becomes a FULLTEXT index with a marked name; any other bare word is
//     taken for a name the parser reserves and MariaDB does not (lag, lead,
//     rank, window...) and is quoted. A word that really is MariaDB syntax
//     the parser lacks fails again, quoted, and the statement stays
//     unsupported: quoting never turns syntax into a name that parses.

// sourceVersion is the server version executable comments are judged by:
// MariaDB 10.11, the oldest source sluice is tested against.
const sourceVersion = 101100

// maxFixes bounds the failing tokens repaired in one statement.
const maxFixes = 16

// spatialMarker prefixes the name of a FULLTEXT index that stands in for a
// SPATIAL one.
const spatialMarker = "sluice-spatial:"

// stripExecComments replaces each executable comment by its body (or by
// nothing, when its version is later than sourceVersion).
func stripExecComments(sql string) string {
	if !strings.Contains(sql, "/*!") && !strings.Contains(sql, "/*M!") && !strings.Contains(sql, "/*m!") {
		return sql
	}
	var b strings.Builder
	n := len(sql)
	last := 0
	for i := 0; i < n; {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(sql, i, c)
		case c == '/' && i+2 < n && sql[i+1] == '*':
			j := i + 2
			if sql[j] == 'M' || sql[j] == 'm' {
				j++
			}
			if j >= n || sql[j] != '!' {
				end := strings.Index(sql[i+2:], "*/")
				if end < 0 {
					i = n
					continue
				}
				i += end + 4
				continue
			}
			j++
			k := j
			for k < n && sql[k] >= '0' && sql[k] <= '9' {
				k++
			}
			end := strings.Index(sql[k:], "*/")
			if end < 0 {
				i = n
				continue
			}
			run := true
			if k > j {
				v, _ := strconv.Atoi(sql[j:k])
				if k-j >= 6 {
					run = v <= sourceVersion
				}
			}
			b.WriteString(sql[last:i])
			b.WriteByte(' ')
			if run {
				b.WriteString(sql[k : k+end])
				b.WriteByte(' ')
			}
			i = k + end + 2
			last = i
		default:
			i++
		}
	}
	if last == 0 {
		return sql
	}
	b.WriteString(sql[last:])
	return b.String()
}

var orReplaceTable = regexp.MustCompile(`(?i)^(\s*CREATE\s+)OR\s+REPLACE(\s+(?:TEMPORARY\s+)?TABLE\b)`)

// stripOrReplace removes OR REPLACE from CREATE OR REPLACE TABLE.
func stripOrReplace(sql string) (string, bool) {
	if m := orReplaceTable.FindStringSubmatchIndex(sql); m != nil {
		return sql[:m[3]] + sql[m[4]:], true
	}
	return sql, false
}

var nearText = regexp.MustCompile(`(?s)near "(.*)"\s*$`)

// fixAtError repairs the token the parse error points at (see above), or
// reports that it cannot.
func fixAtError(sql string, err error) (string, bool) {
	m := nearText.FindStringSubmatch(err.Error())
	if m == nil || m[1] == "" {
		return sql, false
	}
	near := m[1]
	start := strings.LastIndex(sql, near)
	if start < 0 {
		return sql, false
	}
	end := start
	for end < len(sql) && isWordByte(sql[end]) {
		end++
	}
	if end == start {
		return sql, false
	}
	word := strings.ToUpper(sql[start:end])
	switch word {
	case "PERSISTENT":
		return sql[:start] + "STORED" + sql[end:], true
	case "SPATIAL":
		toks := tokenize(sql[end:])
		if len(toks) < 2 || (toks[0].text != "INDEX" && toks[0].text != "KEY") {
			return sql, false
		}
		name, rest := "", end+toks[0].end
		if toks[1].name {
			name = strings.Trim(sql[end+toks[1].start:end+toks[1].end], "`")
			rest = end + toks[1].end
		}
		if strings.HasPrefix(strings.TrimSpace(sql[rest:]), "(") || name == "" {
			return sql[:start] + "FULLTEXT INDEX `" + spatialMarker + name + "`" + sql[rest:], true
		}
		return sql, false
	}
	if start > 0 && sql[start-1] == '`' {
		return sql, false
	}
	return sql[:start] + "`" + sql[start:end] + "`" + sql[end:], true
}

var spatialStandIn = regexp.MustCompile("FULLTEXT\\s+(?:(?:INDEX|KEY)\\s+)?`" + regexp.QuoteMeta(spatialMarker) + "([^`]*)`")

// restoreSpatial turns the FULLTEXT stand-ins back into SPATIAL indexes.
func restoreSpatial(sql string) string {
	if !strings.Contains(sql, spatialMarker) {
		return sql
	}
	return spatialStandIn.ReplaceAllStringFunc(sql, func(s string) string {
		name := spatialStandIn.FindStringSubmatch(s)[1]
		if name == "" {
			return "SPATIAL INDEX"
		}
		return "SPATIAL INDEX `" + name + "`"
	})
}
