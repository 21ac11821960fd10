package load

import (
	"context"
	"database/sql"
	"regexp"
	"strings"

	"github.com/sluice-db/sluice"
)

// Tables with generated columns.
//
// The target computes generated columns from the values loaded. A source
// that is not strict (or INSERT IGNORE) stores values computed with a
// warning: 'Ǆ|' as '?|' in a latin1 column, an INT clipped at its range. In
// the strict load session the same computation is an error and the copy
// stops (difftest bug L), while the source holds the row. So such a table
// loads with strict mode off, and every warning of its statements is
// looked at: one about a generated column is what the source got too (the
// same expression over the same values, the definitions being equal); any
// other still fails the chunk.

// lenientSQLMode is the load session's sql_mode without strict mode.
const lenientSQLMode = "NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION,ALLOW_INVALID_DATES"

// strictSQLMode is the load session's own sql_mode (see Open).
const strictSQLMode = "STRICT_ALL_TABLES," + lenientSQLMode

func generatedNames(t *sluice.Table) map[string]bool {
	var m map[string]bool
	for _, c := range t.Columns {
		if c.Generated {
			if m == nil {
				m = map[string]bool{}
			}
			m[strings.ToLower(c.Name)] = true
		}
	}
	return m
}

// lenient turns strict mode off for t's statements on tx's session, and
// lets every warning be seen (SHOW WARNINGS shows max_error_count).
func lenient(ctx context.Context, tx *sql.Tx, t *target) error {
	if t.generated == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, "SET SESSION sql_mode='"+lenientSQLMode+"', max_error_count=65535")
	return err
}

// strict restores the session's strict mode after lenient.
func strict(ctx context.Context, tx *sql.Tx, t *target) error {
	if t.generated == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, "SET SESSION sql_mode='"+strictSQLMode+"', max_error_count=DEFAULT")
	return err
}

// warnedCol finds the column a warning names: "... for column `db`.`t`.`c`
// at row 1" or "... for column 'c' at row 1".
var warnedCol = regexp.MustCompile("for column (?:`[^`]*`\\.`[^`]*`\\.`([^`]*)`|'([^']*)')")

func warnedColumn(msg string) string {
	m := warnedCol.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	return strings.ToLower(m[1] + m[2])
}

// exprWarning: a warning that names no column and that only the evaluation
// of an expression raises ("Truncated incorrect DOUBLE value: '...'" for
// c*2+1 over a binary string, difftest seed 2001). The values a load
// writes are literals of their columns' types, whose warnings name the
// column; the only expressions are generation expressions.
func exprWarning(code int, msg string) bool {
	return code == 1292 && strings.HasPrefix(msg, "Truncated incorrect ") && warnedColumn(msg) == ""
}
