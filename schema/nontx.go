package schema

import (
	"context"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
)

// NonTransactional returns which of tables exist with an engine the server
// does not list as transactional (information_schema.ENGINES): Aria,
// MyISAM, MEMORY, ... The dump reads such source tables under a read lock
// and the load makes its chunks into such target tables idempotent. An
// engine the server does not list (a partitioned table's, an unloaded
// plugin's) counts as non-transactional: a read lock or a delete that was
// not needed costs some time, a missing one a wrong copy.
func NonTransactional(ctx context.Context, q chunk.Querier, tables []sluice.TableRef) (map[sluice.TableRef]bool, error) {
	out := map[sluice.TableRef]bool{}
	want := map[sluice.TableRef]bool{}
	schemas := map[string]bool{}
	var args []any
	for _, t := range tables {
		want[t] = true
		if !schemas[t.Schema] {
			schemas[t.Schema] = true
			args = append(args, t.Schema)
		}
	}
	if len(args) == 0 {
		return out, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT t.TABLE_SCHEMA, t.TABLE_NAME FROM information_schema.TABLES t
		LEFT JOIN information_schema.ENGINES e ON e.ENGINE = t.ENGINE
		WHERE t.TABLE_SCHEMA IN (?`+strings.Repeat(", ?", len(args)-1)+`) AND t.TABLE_TYPE <> 'VIEW' AND t.TABLE_TYPE <> 'SEQUENCE'
		AND IFNULL(e.TRANSACTIONS, 'NO') <> 'YES'`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var r sluice.TableRef
		if err := rows.Scan(&r.Schema, &r.Name); err != nil {
			return nil, err
		}
		if want[r] {
			out[r] = true
		}
	}
	return out, rows.Err()
}
