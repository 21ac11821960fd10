package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/sqlgen"
)

// prepareTable makes sure target table tgt exists with src's definition. A
// missing table is created from the source's CREATE TABLE. An existing one
// must have the same columns and keys (a rerun finds its own table), and
// when this task has loaded nothing into it yet it must be empty, because a
// row already there would be doubled or silently kept.
//
// A table whose chunks are all loaded (done) is not compared with the
// source: it holds its snapshot's rows in that snapshot's definition, and a
// DDL since then is the source's change after the copy (replication
// applies it in --mode all).
func (l *Loader) prepareTable(ctx context.Context, src *sluice.Table, tgt sluice.TableRef, started, done bool) error {
	have, err := schema.Inspect(ctx, l.db, tgt)
	if err != nil && !errors.Is(err, sluice.ErrUnknownTable) {
		return fmt.Errorf("load: inspect %s: %w", tgt, dbconn.Classify(err, "target", l.cfg.Target))
	}
	if have == nil && started {
		// Never make it empty under checkpoints that say its chunks are
		// loaded: that would lose their rows silently (sluice migrate
		// reloads such a table before it gets here, see ReloadLost).
		return &sluice.Error{Op: "load: target table " + tgt.String(), Err: fmt.Errorf("%w: it is missing, but this task's checkpoints say some of its chunks are loaded", sluice.ErrSchemaMismatch),
			Hint: fmt.Sprintf("DELETE FROM %s WHERE task = '%s' AND tbl = '%s' on the target, then run the same command again: it loads the table whole",
				l.meta.table("load_checkpoint"), strings.ReplaceAll(l.cfg.Task, "'", "''"), strings.ReplaceAll(tblKey(tgt), "'", "''"))}
	}
	if have != nil && !started {
		// A table this task made in an earlier run, before the source
		// changed its definition (a DDL after that run's snapshot), with
		// none of its chunks loaded: made again from this snapshot.
		if remade, err := l.remakeEmpty(ctx, src, tgt, have); err != nil {
			return err
		} else if remade {
			have = nil
		}
	}
	if have == nil {
		if err := l.createTable(ctx, src, tgt); err != nil {
			return err
		}
		// The table's definition is this run's snapshot's, whatever an
		// earlier run stored with the plan: replication judges DDL by it.
		if err := l.meta.setPlanSnapshot(ctx, tgt, l.snap); err != nil {
			return fmt.Errorf("load: %w", dbconn.Classify(err, "target", l.cfg.Target))
		}
		return nil
	}
	if started && done {
		return nil
	}
	if diff := definitionDiff(src, have); diff != "" {
		hint := "drop or rename the target table (sluice creates it), make it match the source, or exclude " + src.Ref.String() + " in tables.exclude"
		if started {
			hint = "drop the target table (sluice migrate then loads it again whole from the source), make it match the source, or exclude " + src.Ref.String() + " in tables.exclude"
		}
		return &sluice.Error{Op: "load: target table " + tgt.String(), Err: fmt.Errorf("%w from source %s: %s", sluice.ErrSchemaMismatch, src.Ref, diff), Hint: hint}
	}
	if started {
		return nil
	}
	var one int
	err = l.db.QueryRowContext(ctx, "SELECT 1 FROM "+tgt.Quoted()+" LIMIT 1").Scan(&one)
	if err == nil {
		return &sluice.Error{Op: "load: target table " + tgt.String(), Err: fmt.Errorf("%w: it already holds rows that this task did not load", sluice.ErrSchemaMismatch),
			Hint: "empty or drop the target table, or exclude " + src.Ref.String() + " in tables.exclude"}
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("load: %w", dbconn.Classify(err, "target", l.cfg.Target))
	}
	return nil
}

// changedSinceMade reports whether target table tgt, which this task made,
// no longer has the source's definition.
func (l *Loader) changedSinceMade(ctx context.Context, src *sluice.Table, tgt sluice.TableRef) (bool, error) {
	have, err := schema.Inspect(ctx, l.db, tgt)
	if errors.Is(err, sluice.ErrUnknownTable) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("load: inspect %s: %w", tgt, dbconn.Classify(err, "target", l.cfg.Target))
	}
	if definitionDiff(src, have) == "" {
		return false, nil
	}
	made, err := l.meta.made(ctx, tgt)
	return made, dbconn.Classify(err, "target", l.cfg.Target)
}

// remakeEmpty drops target table tgt when this task made it, none of its
// chunks is loaded, it holds no row and its definition is not the source's
// any more. Anything else is left for prepareTable to judge.
func (l *Loader) remakeEmpty(ctx context.Context, src *sluice.Table, tgt sluice.TableRef, have *sluice.Table) (bool, error) {
	if definitionDiff(src, have) == "" {
		return false, nil
	}
	made, err := l.meta.made(ctx, tgt)
	if err != nil || !made {
		return false, dbconn.Classify(err, "target", l.cfg.Target)
	}
	var one int
	err = l.db.QueryRowContext(ctx, "SELECT 1 FROM "+tgt.Quoted()+" LIMIT 1").Scan(&one)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("load: %w", dbconn.Classify(err, "target", l.cfg.Target))
	}
	if _, err := l.db.ExecContext(ctx, "DROP TABLE "+tgt.Quoted()); err != nil {
		return false, fmt.Errorf("load: drop %s to make it again: %w", tgt, l.classify(err))
	}
	return true, nil
}

func (l *Loader) createTable(ctx context.Context, src *sluice.Table, tgt sluice.TableRef) error {
	create, err := sqlgen.CreateTableAs(src.CreateSQL, tgt)
	if err != nil {
		return fmt.Errorf("load: create %s: %w", tgt, err)
	}
	c, err := l.db.Conn(ctx)
	if err != nil {
		return dbconn.Classify(err, "target", l.cfg.Target)
	}
	defer c.Close()
	// USE the schema so unqualified foreign key references resolve there.
	for _, q := range []string{sqlgen.CreateDatabase(tgt.Schema), "USE " + sluice.QuoteIdent(tgt.Schema), create} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			if se := sequenceMissing(err, src, tgt); se != nil {
				return se
			}
			return fmt.Errorf("load: create %s: %w", tgt, l.classify(err))
		}
	}
	return nil
}

// definitionDiff describes the first difference between two tables'
// columns and keys, or returns "" when they match. It compares what
// decides whether every source row fits and keeps its identity: names,
// types, nullability, character sets, generated columns and unique keys.
func definitionDiff(want, have *sluice.Table) string {
	if len(want.Columns) != len(have.Columns) {
		return fmt.Sprintf("%d columns, want %d", len(have.Columns), len(want.Columns))
	}
	for i, w := range want.Columns {
		h := have.Columns[i]
		switch {
		case !strings.EqualFold(w.Name, h.Name):
			return fmt.Sprintf("column %d is %s, want %s", i+1, h.Name, w.Name)
		case !strings.EqualFold(intWidthless(w.FullType), intWidthless(h.FullType)):
			return fmt.Sprintf("column %s is %s, want %s", w.Name, h.FullType, w.FullType)
		case w.Nullable != h.Nullable:
			return fmt.Sprintf("column %s nullable=%v, want %v", w.Name, h.Nullable, w.Nullable)
		case !strings.EqualFold(w.Charset, h.Charset):
			return fmt.Sprintf("column %s charset %s, want %s", w.Name, h.Charset, w.Charset)
		case w.Generated != h.Generated:
			return fmt.Sprintf("column %s generated=%v, want %v", w.Name, h.Generated, w.Generated)
		}
	}
	if fmt.Sprint(want.PK) != fmt.Sprint(have.PK) || want.PKIsPrimary != have.PKIsPrimary {
		return "primary key differs"
	}
	if keySet(want.UniqueKeys) != keySet(have.UniqueKeys) {
		return "unique keys differ"
	}
	return ""
}

// intDisplayWidth is an integer type's display width, "int(11)": TiDB (as
// MySQL 8) reports "int" for the column MariaDB reports as "int(11)", and
// the width changes no value, so the definitions compare without it.
var intDisplayWidth = regexp.MustCompile(`(?i)^(tinyint|smallint|mediumint|int|integer|bigint|year)\(\d+\)`)

func intWidthless(t string) string { return intDisplayWidth.ReplaceAllString(t, "$1") }

func keySet(keys [][]int) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = fmt.Sprint(k)
	}
	// Order is by key name on each side; the set is what matters.
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return strings.Join(s, ";")
}

// Preflight refuses, before anything is written, a target table that a
// first run of a task could not load: one whose definition differs from
// src's, or that holds rows this task did not load. It is what Prepare
// refuses too, asked before the task's metadata or any table is created
// (issue 16: a refused run created nothing but sluice_meta and some tables
// was not true). nil when tgt is missing or would be loaded.
func Preflight(ctx context.Context, db *sql.DB, src *sluice.Table, tgt sluice.TableRef) error {
	have, err := schema.Inspect(ctx, db, tgt)
	if errors.Is(err, sluice.ErrUnknownTable) {
		return nil
	}
	if err != nil {
		return err
	}
	if diff := definitionDiff(src, have); diff != "" {
		return &sluice.Error{Op: "target table " + tgt.String(), Err: fmt.Errorf("%w from source %s: %s", sluice.ErrSchemaMismatch, src.Ref, diff),
			Hint: "drop or rename the target table (sluice creates it), make it match the source, or exclude " + src.Ref.String() + " in tables.exclude"}
	}
	var one int
	err = db.QueryRowContext(ctx, "SELECT 1 FROM "+tgt.Quoted()+" LIMIT 1").Scan(&one)
	if err == nil {
		return &sluice.Error{Op: "target table " + tgt.String(), Err: fmt.Errorf("%w: it already holds rows that this task did not load", sluice.ErrSchemaMismatch),
			Hint: "empty or drop the target table, or exclude " + src.Ref.String() + " in tables.exclude"}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return err
}
