package sqlgen

import (
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
)

// LoadColumn is one column a load writes. Via, when set, is an expression
// with one %s that converts the raw value (a user variable in LOAD DATA, a
// literal in INSERT) into the column, e.g. "CAST(%s AS UNSIGNED)" for BIT.
type LoadColumn struct {
	Name string
	Via  string
}

// LoadSpec names the target table and the columns of each data row.
type LoadSpec struct {
	Table   sluice.TableRef
	Columns []LoadColumn
}

// LoadData builds the LOAD DATA LOCAL INFILE statement for rows in the
// default text format (tab, newline, backslash escapes, \N for NULL).
// CHARACTER SET binary makes the server take the bytes as they are: the
// dump read them with character_set_results=binary, so no conversion
// happens on either side and every column's stored bytes survive.
func LoadData(file string, s LoadSpec) string {
	var b strings.Builder
	b.WriteString("LOAD DATA LOCAL INFILE ")
	b.Write(AppendQuoted(nil, file))
	b.WriteString(" INTO TABLE ")
	b.WriteString(s.Table.Quoted())
	b.WriteString(" CHARACTER SET binary FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (")
	var sets []string
	for i, c := range s.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		if c.Via == "" {
			b.WriteString(sluice.QuoteIdent(c.Name))
			continue
		}
		v := fmt.Sprintf("@sluice_v%d", i)
		b.WriteString(v)
		sets = append(sets, sluice.QuoteIdent(c.Name)+" = "+fmt.Sprintf(c.Via, v))
	}
	b.WriteString(")")
	if len(sets) > 0 {
		b.WriteString(" SET ")
		b.WriteString(strings.Join(sets, ", "))
	}
	return b.String()
}

// AppendInsertHead appends "INSERT INTO t (cols) VALUES ".
func (s LoadSpec) AppendInsertHead(b []byte) []byte {
	b = append(b, "INSERT INTO "...)
	b = append(b, s.Table.Quoted()...)
	b = append(b, " ("...)
	for i, c := range s.Columns {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, sluice.QuoteIdent(c.Name)...)
	}
	return append(b, ") VALUES "...)
}

// AppendInsertRow appends one parenthesised row of raw values (nil is
// NULL). Values are _binary literals for the same reason LOAD DATA uses
// CHARACTER SET binary.
func (s LoadSpec) AppendInsertRow(b []byte, vals [][]byte) []byte {
	b = append(b, '(')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		if v == nil {
			b = append(b, "NULL"...)
			continue
		}
		if via := s.Columns[i].Via; via != "" {
			b = append(b, fmt.Sprintf(via, AppendValue(nil, v))...)
		} else {
			b = AppendValue(b, v)
		}
	}
	return append(b, ')')
}
