package dump

import (
	"context"
	"database/sql"
	"fmt"
	"maps"

	"github.com/sluice-db/sluice"
)

// The table list and definitions are read before the snapshot: reading
// them while FLUSH TABLES WITH READ LOCK holds every writer would stall the
// source for as long as a large schema takes to inspect. A DDL in between
// (a table dropped or renamed, a column dropped) made the dump read a
// table the snapshot does not have, or describe a table as the snapshot
// does not have it (difftest bug D: "Unknown column 'c2' in 'SELECT'").
// So a digest of every table's definition is taken before the tables are
// read and again under the lock, in one query each; if they differ, the
// snapshot is given up and everything is read again.

// digestQuery summarizes each base table's definition: table options,
// columns and indexes, as information_schema shows them.
const digestQuery = `SELECT t.TABLE_SCHEMA, t.TABLE_NAME, CONCAT_WS('|', t.ENGINE, t.TABLE_COLLATION, t.CREATE_OPTIONS, t.TABLE_COMMENT,
	(SELECT MD5(GROUP_CONCAT(CONCAT_WS(',', c.COLUMN_NAME, c.ORDINAL_POSITION, c.COLUMN_TYPE, c.IS_NULLABLE, IFNULL(c.COLLATION_NAME, '-'),
		c.EXTRA, IFNULL(c.COLUMN_DEFAULT, '-'), IFNULL(c.GENERATION_EXPRESSION, '-'), c.COLUMN_COMMENT) ORDER BY c.ORDINAL_POSITION SEPARATOR ';'))
		FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME),
	(SELECT MD5(GROUP_CONCAT(CONCAT_WS(',', s.INDEX_NAME, s.SEQ_IN_INDEX, s.COLUMN_NAME, s.NON_UNIQUE, IFNULL(s.SUB_PART, '-'), s.INDEX_TYPE)
		ORDER BY s.INDEX_NAME, s.SEQ_IN_INDEX SEPARATOR ';'))
		FROM information_schema.STATISTICS s WHERE s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME))
	FROM information_schema.TABLES t
	WHERE t.TABLE_TYPE = 'BASE TABLE' AND t.TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')`

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// schemaDigest returns the digest of every selected base table.
func schemaDigest(ctx context.Context, q querier, keep func(sluice.TableRef) bool) (map[sluice.TableRef]string, error) {
	rows, err := q.QueryContext(ctx, digestQuery)
	if err != nil {
		return nil, fmt.Errorf("read the source's table definitions: %w", err)
	}
	defer rows.Close()
	out := map[sluice.TableRef]string{}
	for rows.Next() {
		var r sluice.TableRef
		var d sql.NullString
		if err := rows.Scan(&r.Schema, &r.Name, &d); err != nil {
			return nil, err
		}
		if keep == nil || keep(r) {
			out[r] = d.String
		}
	}
	return out, rows.Err()
}

// sameSchema reports whether two digests describe the same tables.
func sameSchema(a, b map[sluice.TableRef]string) bool { return maps.Equal(a, b) }
