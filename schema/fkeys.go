package schema

import (
	"context"
	"database/sql"
	"strings"

	"github.com/sluice-db/sluice"
)

// ForeignKey is one foreign key constraint: Child's Columns reference
// Parent's RefColumns, in order.
type ForeignKey struct {
	Name       string
	Child      sluice.TableRef
	Columns    []string
	Parent     sluice.TableRef
	RefColumns []string
	// OnDelete and OnUpdate are the referential actions as
	// information_schema spells them: RESTRICT, NO ACTION, CASCADE,
	// SET NULL, SET DEFAULT.
	OnDelete, OnUpdate string
}

// Cascades reports whether action changes child rows when their parent
// row changes (CASCADE, SET NULL, SET DEFAULT), as opposed to refusing the
// change (RESTRICT, NO ACTION).
func Cascades(action string) bool {
	switch strings.ToUpper(action) {
	case "RESTRICT", "NO ACTION", "":
		return false
	}
	return true
}

// AllForeignKeys returns every foreign key on db outside the system
// schemas. The server opens every table for it; one scan serves many
// tables.
func AllForeignKeys(ctx context.Context, db *sql.DB) ([]ForeignKey, error) {
	return queryForeignKeys(ctx, db, ` AND k.TABLE_SCHEMA NOT IN ('mysql','information_schema','performance_schema','sys')`)
}

// ForeignKeysIn returns the foreign keys of the child tables in schemas.
func ForeignKeysIn(ctx context.Context, db *sql.DB, schemas []string) ([]ForeignKey, error) {
	if len(schemas) == 0 {
		return nil, nil
	}
	args := make([]any, len(schemas))
	for i, s := range schemas {
		args[i] = s
	}
	return queryForeignKeys(ctx, db, ` AND k.TABLE_SCHEMA IN (?`+strings.Repeat(", ?", len(schemas)-1)+`)`, args...)
}

func queryForeignKeys(ctx context.Context, db *sql.DB, where string, args ...any) ([]ForeignKey, error) {
	rows, err := db.QueryContext(ctx, `SELECT k.CONSTRAINT_SCHEMA, k.CONSTRAINT_NAME, k.TABLE_SCHEMA, k.TABLE_NAME, k.COLUMN_NAME,
		k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME, r.DELETE_RULE, r.UPDATE_RULE
		FROM information_schema.KEY_COLUMN_USAGE k
		JOIN information_schema.REFERENTIAL_CONSTRAINTS r
		  ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME
		WHERE k.REFERENCED_TABLE_NAME IS NOT NULL`+where+`
		ORDER BY k.CONSTRAINT_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var all []ForeignKey
	var lastSchema string
	for rows.Next() {
		var cs, name, col, refCol, del, upd string
		var child, parent sluice.TableRef
		if err := rows.Scan(&cs, &name, &child.Schema, &child.Name, &col, &parent.Schema, &parent.Name, &refCol, &del, &upd); err != nil {
			return nil, err
		}
		n := len(all)
		if n == 0 || lastSchema != cs || all[n-1].Name != name || all[n-1].Child != child {
			all = append(all, ForeignKey{Name: name, Child: child, Parent: parent, OnDelete: del, OnUpdate: upd})
			n++
		}
		lastSchema = cs
		fk := &all[n-1]
		fk.Columns = append(fk.Columns, col)
		fk.RefColumns = append(fk.RefColumns, refCol)
	}
	return all, rows.Err()
}

// Trigger is one trigger on a table.
type Trigger struct {
	Schema, Name string
	Timing       string // BEFORE, AFTER
	Event        string // INSERT, UPDATE, DELETE
	Table        sluice.TableRef
}

// AllTriggers returns every trigger outside the system schemas.
func AllTriggers(ctx context.Context, db *sql.DB) ([]Trigger, error) {
	return queryTriggers(ctx, db, ` WHERE EVENT_OBJECT_SCHEMA NOT IN ('mysql','information_schema','performance_schema','sys')`)
}

func queryTriggers(ctx context.Context, db *sql.DB, where string, args ...any) ([]Trigger, error) {
	rows, err := db.QueryContext(ctx, `SELECT TRIGGER_SCHEMA, TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE
		FROM information_schema.TRIGGERS`+where+` ORDER BY EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, TRIGGER_NAME`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Trigger
	for rows.Next() {
		var t Trigger
		if err := rows.Scan(&t.Schema, &t.Name, &t.Timing, &t.Event, &t.Table.Schema, &t.Table.Name); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
