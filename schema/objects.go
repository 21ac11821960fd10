package schema

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/sluice-db/sluice"
)

// Objects are what a source holds besides the base tables that sluice
// copies and replicates (issue 29): objects sluice leaves out, and tables
// it refuses because copying them would not be exact.
type Objects struct {
	// Refused: MariaDB sequences and system-versioned tables. Neither is
	// copied nor replicated: a sequence's state and a versioned table's
	// history rows would be lost or the task would stop on their changes.
	Sequences []sluice.TableRef
	Versioned []sluice.TableRef
	// SequenceDefaults are base-table columns whose default takes the next
	// value of a sequence: the target can create the table only when the
	// sequence exists there.
	SequenceDefaults []SequenceDefault
	// Left out by the full copy and by replication, each as "schema.name"
	// with what it belongs to: "db.tr (on db.t)", "db.p (procedure)".
	Views    []string
	Triggers []string
	Routines []string
	Events   []string
}

// SequenceDefault is a column whose DEFAULT is NEXT VALUE FOR Sequence.
type SequenceDefault struct {
	Table    sluice.TableRef
	Column   string
	Sequence sluice.TableRef
}

// nextval matches MariaDB's form of a sequence default in
// information_schema.COLUMNS: nextval(`db`.`s`).
var nextval = regexp.MustCompile("(?i)nextval\\(\\s*(?:`((?:[^`]|``)+)`\\.)?`((?:[^`]|``)+)`\\s*\\)")

// SourceObjects lists the objects on db that a task with this selection
// meets: tables and views by selected, triggers by their table, routines
// and events by schemaSelected (nil selects everything).
func SourceObjects(ctx context.Context, db *sql.DB, selected func(sluice.TableRef) bool, schemaSelected func(string) bool) (*Objects, error) {
	keep := func(r sluice.TableRef) bool {
		return !systemSchema(r.Schema) && (selected == nil || selected(r))
	}
	keepSchema := func(s string) bool { return !systemSchema(s) && (schemaSelected == nil || schemaSelected(s)) }
	o := &Objects{}
	err := eachRow(ctx, db, `SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES
		WHERE TABLE_TYPE IN ('SEQUENCE', 'SYSTEM VERSIONED', 'VIEW') ORDER BY TABLE_SCHEMA, TABLE_NAME`, func(v []string) {
		r := sluice.TableRef{Schema: v[0], Name: v[1]}
		if !keep(r) {
			return
		}
		switch v[2] {
		case "SEQUENCE":
			o.Sequences = append(o.Sequences, r)
		case "SYSTEM VERSIONED":
			o.Versioned = append(o.Versioned, r)
		case "VIEW":
			o.Views = append(o.Views, r.String())
		}
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, db, `SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_DEFAULT FROM information_schema.COLUMNS c
		JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
		WHERE t.TABLE_TYPE = 'BASE TABLE' AND c.COLUMN_DEFAULT LIKE '%nextval(%' ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION`, func(v []string) {
		r := sluice.TableRef{Schema: v[0], Name: v[1]}
		m := nextval.FindStringSubmatch(v[3])
		if !keep(r) || m == nil {
			return
		}
		seq := sluice.TableRef{Schema: strings.ReplaceAll(m[1], "``", "`"), Name: strings.ReplaceAll(m[2], "``", "`")}
		if seq.Schema == "" {
			seq.Schema = r.Schema
		}
		o.SequenceDefaults = append(o.SequenceDefaults, SequenceDefault{Table: r, Column: v[2], Sequence: seq})
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, db, `SELECT TRIGGER_SCHEMA, TRIGGER_NAME, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS
		ORDER BY TRIGGER_SCHEMA, TRIGGER_NAME`, func(v []string) {
		if t := (sluice.TableRef{Schema: v[2], Name: v[3]}); keep(t) {
			o.Triggers = append(o.Triggers, fmt.Sprintf("%s.%s (on %s)", v[0], v[1], t))
		}
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, db, `SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE FROM information_schema.ROUTINES
		ORDER BY ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE`, func(v []string) {
		if keepSchema(v[0]) {
			o.Routines = append(o.Routines, fmt.Sprintf("%s.%s (%s)", v[0], v[1], strings.ToLower(v[2])))
		}
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, db, `SELECT EVENT_SCHEMA, EVENT_NAME FROM information_schema.EVENTS ORDER BY EVENT_SCHEMA, EVENT_NAME`, func(v []string) {
		if keepSchema(v[0]) {
			o.Events = append(o.Events, v[0]+"."+v[1])
		}
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// SequenceExists reports whether db holds sequence ref.
func SequenceExists(ctx context.Context, db *sql.DB, ref sluice.TableRef) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND TABLE_TYPE = 'SEQUENCE'`, ref.Schema, ref.Name).Scan(&n)
	return n > 0, err
}

func systemSchema(s string) bool {
	switch strings.ToLower(s) {
	case "mysql", "information_schema", "performance_schema", "sys":
		return true
	}
	return false
}

// eachRow runs q and calls f with each row's columns as strings (NULL as "").
func eachRow(ctx context.Context, db *sql.DB, q string, f func([]string)) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		v := make([]string, len(cols))
		for i := range vals {
			v[i] = vals[i].String
		}
		f(v)
	}
	return rows.Err()
}
