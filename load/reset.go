package load

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// mixedSafe reports whether replication can match t's changes to chunks
// when its chunks come from different snapshots (see snapfilter): an
// integer primary key, compared exactly in Go, and no second unique key,
// which rows of two snapshots could both claim.
func mixedSafe(t *sluice.Table) bool {
	if !t.PKIsPrimary || len(t.PK) == 0 || len(t.UniqueKeys) > 1 {
		return false
	}
	for _, ci := range t.PK {
		switch strings.ToLower(t.Columns[ci].DataType) {
		case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		default:
			return false
		}
	}
	return true
}

// resetTable forgets an earlier run's chunks of target table key and
// empties the table, so this run loads it whole from its own snapshot. The
// checkpoints go first, in one transaction with a load_reset marker; the
// marker makes an interrupted reset finish on the next Open instead of
// leaving rows that no checkpoint accounts for.
func (l *Loader) resetTable(ctx context.Context, key string) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT IGNORE INTO "+l.meta.table("load_reset")+" (task, tbl) VALUES (?, ?)", l.cfg.Task, key); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+l.meta.table("load_checkpoint")+" WHERE task = ? AND tbl = ?", l.cfg.Task, key); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for k := range l.done {
		if k.tbl == key {
			delete(l.done, k)
		}
	}
	return l.finishResets(ctx)
}

// finishResets empties every table marked in load_reset and clears its mark.
func (l *Loader) finishResets(ctx context.Context) error {
	rows, err := l.db.QueryContext(ctx, "SELECT tbl FROM "+l.meta.table("load_reset")+" WHERE task = ?", l.cfg.Task)
	if err != nil {
		return err
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return err
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, k := range keys {
		// The key is the table's quoted name, as stored by tblKey.
		_, err := l.db.ExecContext(ctx, "TRUNCATE TABLE "+k)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1142 {
			// TRUNCATE needs DROP; DELETE is slower but needs only DELETE.
			_, err = l.db.ExecContext(ctx, "DELETE FROM "+k)
		}
		if errors.As(err, &me) && me.Number == 1146 {
			err = nil // the table is gone: nothing to empty
		}
		if err != nil {
			return fmt.Errorf("empty %s for its reload: %w", k, err)
		}
		if _, err := l.db.ExecContext(ctx, "DELETE FROM "+l.meta.table("load_reset")+" WHERE task = ? AND tbl = ?", l.cfg.Task, k); err != nil {
			return err
		}
	}
	return nil
}
