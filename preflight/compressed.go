package preflight

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/task"
)

// compressedColumns: replication cannot read the row images of MariaDB's
// COMPRESSED columns (decode.ErrCompressedColumn), so a task that
// replicates refuses a selected table with one before it starts, rather
// than at the table's first row. A copy alone reads them with SELECT and
// needs no check.
func compressedColumns(ctx context.Context, src *sql.DB, cfg *task.Config) Result {
	r := Result{Name: "compressed columns", Status: "pass", Detail: "no COMPRESSED column in the selected tables"}
	rows, err := src.QueryContext(ctx, `SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS
		WHERE COLUMN_TYPE LIKE '%COMPRESSED%' AND TABLE_SCHEMA NOT IN ('mysql','information_schema','performance_schema','sys')
		ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION`)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	defer rows.Close()
	var hit []string
	for rows.Next() {
		var t sluice.TableRef
		var col string
		if err := rows.Scan(&t.Schema, &t.Name, &col); err != nil {
			return errResult(r.Name, err)
		}
		if cfg.Selected(t) {
			hit = append(hit, t.String()+"."+col)
		}
	}
	if err := rows.Err(); err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	if len(hit) == 0 {
		return r
	}
	r.Status = "fail"
	r.Detail = fmt.Sprintf("%v: %s", decode.ErrCompressedColumn, strings.Join(hit, ", "))
	r.Err = fmt.Errorf("%w: %s", decode.ErrCompressedColumn, strings.Join(hit, ", "))
	r.Fix = "exclude these tables from the task (tables.exclude), or make the columns plain on the source (ALTER TABLE ... MODIFY the column without COMPRESSED)"
	return r
}
