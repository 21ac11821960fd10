// Package schema reads table definitions from a live server (for the full
// copy and verify) and, for replication, tracks versioned schemas by
// following DDL in the binlog.
package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// ListTables returns the base tables on db for which keep returns true,
// sorted by schema and name. Views are not tables and are skipped.
func ListTables(ctx context.Context, db *sql.DB, keep func(sluice.TableRef) bool) ([]sluice.TableRef, error) {
	rows, err := db.QueryContext(ctx, `SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES
		WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ('mysql','information_schema','performance_schema','sys')
		ORDER BY TABLE_SCHEMA, TABLE_NAME`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sluice.TableRef
	for rows.Next() {
		var r sluice.TableRef
		if err := rows.Scan(&r.Schema, &r.Name); err != nil {
			return nil, err
		}
		if keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	return out, rows.Err()
}

// afterColumnsHook, set by tests, runs between the reading of a table's
// columns and keys and its SHOW CREATE TABLE.
var afterColumnsHook func(sluice.TableRef)

// Inspect reads one table's columns and keys. It returns an error wrapping
// sluice.ErrUnknownTable if the table does not exist.
//
// The columns and the keys are read at once, on two connections of db (one
// round trip instead of two: a replication task inspects each target table
// on its way, and a distant target pays each round trip; issue 18), and
// SHOW CREATE TABLE after both: a table dropped before it has been read
// whole then fails there, as unknown, whichever read saw it gone.
func Inspect(ctx context.Context, db *sql.DB, ref sluice.TableRef) (*sluice.Table, error) {
	t := &sluice.Table{Ref: ref}
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type keysRead struct {
		parts []keyPart
		err   error
	}
	kc := make(chan keysRead, 1)
	go func() {
		parts, err := readKeyParts(kctx, db, ref)
		kc <- keysRead{parts, err}
	}()
	err := readColumns(ctx, db, t)
	if err != nil {
		cancel()
	}
	k := <-kc
	if err != nil {
		return nil, err
	}
	if k.err != nil {
		return nil, k.err
	}
	if len(t.Columns) == 0 {
		return nil, &sluice.Error{Op: "inspect " + ref.String(), Err: fmt.Errorf("%w: %s does not exist", sluice.ErrUnknownTable, ref), Hint: "check the table name and the task's tables patterns"}
	}
	if afterColumnsHook != nil {
		afterColumnsHook(ref)
	}
	setKeys(t, k.parts)
	var name, create string
	if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+ref.Quoted()).Scan(&name, &create); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1146 {
			// Dropped or renamed since its columns were read (difftest
			// bug V): as missing as if it had never been listed.
			return nil, &sluice.Error{Op: "inspect " + ref.String(), Err: fmt.Errorf("%w: %s does not exist (any more)", sluice.ErrUnknownTable, ref), Hint: "check the table name and the task's tables patterns"}
		}
		return nil, err
	}
	t.CreateSQL = create
	return t, nil
}

// readColumns reads ref's columns into t.Columns (none: no such table).
func readColumns(ctx context.Context, db *sql.DB, t *sluice.Table) error {
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, IFNULL(CHARACTER_SET_NAME,''), EXTRA,
		COLUMN_DEFAULT, COLUMN_COMMENT
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, t.Ref.Schema, t.Ref.Name)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c sluice.Column
		var nullable, extra string
		var def sql.NullString
		if err := rows.Scan(&c.Name, &c.DataType, &c.FullType, &nullable, &c.Charset, &extra, &def, &c.Comment); err != nil {
			return err
		}
		c.DataType = strings.ToLower(c.DataType)
		c.Nullable = nullable == "YES"
		c.Unsigned = strings.Contains(strings.ToLower(c.FullType), "unsigned")
		ex := strings.ToUpper(extra)
		c.Generated = strings.Contains(ex, "VIRTUAL") || strings.Contains(ex, "STORED") || strings.Contains(ex, "PERSISTENT")
		c.AutoIncrement = strings.Contains(ex, "AUTO_INCREMENT")
		c.Default = columnDefault(def)
		t.Columns = append(t.Columns, c)
	}
	return rows.Err()
}

// keyPart is one column of one unique index, as information_schema lists it.
type keyPart struct{ index, column, nullable string }

func readKeyParts(ctx context.Context, db *sql.DB, ref sluice.TableRef) ([]keyPart, error) {
	rows, err := db.QueryContext(ctx, `SELECT INDEX_NAME, COLUMN_NAME, NULLABLE FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 ORDER BY INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX`, ref.Schema, ref.Name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var parts []keyPart
	for rows.Next() {
		var p keyPart
		if err := rows.Scan(&p.index, &p.column, &p.nullable); err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, rows.Err()
}

// setKeys sets t's unique keys and row identity from its unique index parts.
func setKeys(t *sluice.Table, parts []keyPart) {
	type key struct {
		name     string
		cols     []int
		nullable bool
	}
	var keys []*key
	for _, p := range parts {
		if len(keys) == 0 || keys[len(keys)-1].name != p.index {
			keys = append(keys, &key{name: p.index})
		}
		k := keys[len(keys)-1]
		ci := t.ColumnIndex(p.column)
		if ci < 0 {
			// A prefix or expression part we cannot use as a row identity.
			k.nullable = true
			continue
		}
		k.cols = append(k.cols, ci)
		if p.nullable == "YES" {
			k.nullable = true
		}
	}
	// Keys whose columns are all NOT NULL, primary first, then the narrowest.
	sort.SliceStable(keys, func(a, b int) bool {
		pa, pb := keys[a].name == "PRIMARY", keys[b].name == "PRIMARY"
		if pa != pb {
			return pa
		}
		return len(keys[a].cols) < len(keys[b].cols)
	})
	for _, k := range keys {
		t.UniqueKeys = append(t.UniqueKeys, k.cols)
		t.UniqueKeyNames = append(t.UniqueKeyNames, k.name)
		if len(t.PK) == 0 && !k.nullable && len(k.cols) > 0 {
			t.PK = k.cols
			t.PKIsPrimary = k.name == "PRIMARY"
		}
	}
}

// columnDefault reads information_schema's COLUMN_DEFAULT as the tracker
// keeps it: MariaDB quotes a string literal ('x', with ” for a quote)
// and writes NULL for DEFAULT NULL; MySQL gives the bare value.
func columnDefault(d sql.NullString) *string {
	if !d.Valid || d.String == "NULL" {
		return nil
	}
	s := d.String
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		s = strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	return &s
}
