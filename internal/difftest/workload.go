package difftest

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
)

// workload drives generated DML and DDL on the source. It runs in rounds:
// in each round a random number of workers run generated transactions at
// once, then (sometimes) one DDL statement runs alone, and the table model
// is re-read from the source. Every choice is drawn from generators seeded
// by (seed, round, worker), so a seed makes the same decisions each run;
// which statements fail on the source (duplicate keys, deadlocks) depends on
// the interleaving, and the source decides.
type workload struct {
	seed   int64
	schema string
	f      Features
	db     *sql.DB
	logf   func(format string, args ...any)
	model  map[string]*Table
	next   int          // column name counter
	tables int          // table name counter
	cls    *seedClasses // the generator classes of this seed (classes.go)
	// killAfter, set by the runner, kills sluice and restarts it once the
	// target has applied the source's domain-0 GTID seq (a fault placed by
	// a class, e.g. after an XA PREPARE).
	killAfter func(ctx context.Context, seq int64, what string) bool
	// ddlOK is set by the runner before each round: DDL may run now (the
	// copy is done, or no kill will interrupt it).
	ddlOK atomic.Bool
	// xaOK is set by the runner once the copy has its snapshot: the XA
	// class waits for it (classes_xa.go).
	xaOK atomic.Bool
	kid  atomic.Int64 // ids for the class tables

	stmts, failed, ddls, ddlFailed atomic.Int64
}

func (w *workload) rng(round, worker int) *rand.Rand {
	return rand.New(rand.NewSource(w.seed*1_000_003 + int64(round)*7919 + int64(worker)*104729))
}

func (w *workload) reload(ctx context.Context) error {
	m, err := loadModel(ctx, w.db, w.schema)
	if err != nil {
		return fmt.Errorf("read the source's schema: %w", err)
	}
	delete(m, "zz_end")
	for n := range m {
		if isClassTable(n) {
			delete(m, n) // driven by its class, not the generic DML/DDL
		}
	}
	w.model = m
	return nil
}

// setup creates the schema and its first tables, with rows in them so
// that the copy and the replication overlap.
func (w *workload) setup(ctx context.Context) error {
	r := w.rng(-1, 0)
	if _, err := w.db.ExecContext(ctx, "CREATE DATABASE `"+w.schema+"`"); err != nil {
		return err
	}
	if _, err := w.db.ExecContext(ctx, "CREATE TABLE `"+w.schema+"`.zz_end (id INT PRIMARY KEY, note VARCHAR(64))"); err != nil {
		return err
	}
	for i, n := 0, 3+r.Intn(3); i < n; i++ {
		if err := w.newTable(ctx, r); err != nil {
			return err
		}
	}
	if err := w.reload(ctx); err != nil {
		return err
	}
	for _, name := range sortedNames(w.model) {
		t := w.model[name]
		for i, n := 0, 5+r.Intn(20); i < n; i++ {
			w.exec(ctx, w.db, w.insert(gen{r: r, f: w.f, keyless: t.Keyless()}, t, 1+r.Intn(10)))
		}
	}
	return nil
}

// newTable creates a table; a generated definition the server refuses (a
// key too long, say) is drawn again.
func (w *workload) newTable(ctx context.Context, r *rand.Rand) error {
	w.tables++
	name := fmt.Sprintf("t%d", w.tables)
	var last error
	for try := 0; try < 20; try++ {
		stmt := createTable(r, w.f, w.schema, name, &w.next)
		if _, err := w.db.ExecContext(ctx, stmt); err != nil {
			last = fmt.Errorf("%s: %w", stmt, err)
			continue
		}
		w.logf("create %s", name)
		return nil
	}
	return last
}

// exec runs one statement; an error is the source's decision and is only
// counted.
func (w *workload) exec(ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, stmt string) bool {
	w.stmts.Add(1)
	if _, err := q.ExecContext(ctx, stmt); err != nil {
		w.failed.Add(1)
		return false
	}
	return true
}

// round runs one round of DML on a random number of workers.
func (w *workload) round(ctx context.Context, round int) {
	r := w.rng(round, 0)
	names := sortedNames(w.model)
	if len(names) == 0 {
		return
	}
	workers := 1 + r.Intn(4)
	var wg sync.WaitGroup
	if w.cls != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.classRound(ctx, round)
		}()
	}
	for i := 1; i <= workers; i++ {
		wr := w.rng(round, i)
		txns := 2 + wr.Intn(10)
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := w.db.Conn(ctx)
			if err != nil {
				return
			}
			defer conn.Close()
			for j := 0; j < txns && ctx.Err() == nil; j++ {
				stmts := make([]string, 1+wr.Intn(4))
				for k := range stmts {
					t := w.model[pick(wr, names)]
					stmts[k] = w.dml(gen{r: wr, f: w.f, keyless: t.Keyless()}, t)
				}
				if len(stmts) == 1 {
					w.exec(ctx, conn, stmts[0])
					continue
				}
				if !w.exec(ctx, conn, "BEGIN") {
					continue
				}
				for _, s := range stmts {
					w.exec(ctx, conn, s)
				}
				if wr.Intn(10) == 0 {
					w.exec(ctx, conn, "ROLLBACK")
				} else {
					w.exec(ctx, conn, "COMMIT")
				}
			}
		}()
	}
	wg.Wait()
}

// dml returns one generated statement against t.
func (w *workload) dml(g gen, t *Table) string {
	r := g.r
	switch n := r.Intn(20); {
	case n < 8:
		if t.Keyless() && r.Intn(3) == 0 {
			// A duplicate row: the same row twice in one statement.
			row := w.row(g, t)
			return w.insertRows(t, []string{row, row}, "INSERT", false)
		}
		verb := "INSERT"
		switch r.Intn(12) {
		case 0:
			verb = "REPLACE"
		case 1:
			verb = "INSERT IGNORE"
		}
		return w.insert(g, t, 1+r.Intn(5), verb)
	case n < 15:
		return w.update(g, t)
	default:
		return fmt.Sprintf("DELETE FROM %s WHERE %s%s", w.qt(t), w.pred(g, t), limit(r))
	}
}

func limit(r *rand.Rand) string {
	if r.Intn(3) == 0 {
		return fmt.Sprintf(" LIMIT %d", 1+r.Intn(3))
	}
	return ""
}

func (w *workload) qt(t *Table) string { return "`" + w.schema + "`.`" + t.Name + "`" }

func (w *workload) row(g gen, t *Table) string {
	cols := t.writable()
	vals := make([]string, len(cols))
	for i, c := range cols {
		vals[i] = g.value(c, t.isKeyCol(c.Name))
	}
	return "(" + strings.Join(vals, ", ") + ")"
}

func (w *workload) insert(g gen, t *Table, n int, verb ...string) string {
	rows := make([]string, n)
	for i := range rows {
		rows[i] = w.row(g, t)
	}
	v := "INSERT"
	if len(verb) > 0 {
		v = verb[0]
	}
	return w.insertRows(t, rows, v, g.r.Intn(6) == 0)
}

// insertRows builds the INSERT; odku resolves duplicates on the source
// with an update of the last column.
func (w *workload) insertRows(t *Table, rows []string, verb string, odku bool) string {
	var names []string
	for _, c := range t.writable() {
		names = append(names, c.Name)
	}
	s := fmt.Sprintf("%s INTO %s (%s) VALUES %s", verb, w.qt(t), quoteList(names), strings.Join(rows, ", "))
	if verb == "INSERT" && !t.Keyless() && odku {
		c := t.writable()[len(t.writable())-1]
		s += fmt.Sprintf(" ON DUPLICATE KEY UPDATE `%s` = VALUES(`%s`)", c.Name, c.Name)
	}
	return s
}

// update sets one to three columns, key columns included (an update that
// moves a row to another key).
func (w *workload) update(g gen, t *Table) string {
	r := g.r
	cols := t.writable()
	var sets []string
	for i, n := 0, 1+r.Intn(3); i < n; i++ {
		c := pick(r, cols)
		sets = append(sets, fmt.Sprintf("`%s` = %s", c.Name, g.value(c, t.isKeyCol(c.Name))))
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s%s", w.qt(t), strings.Join(sets, ", "), w.pred(g, t), limit(r))
}

// pred matches some rows: by a key value from the key pool, by a column's
// value, by NULL, or a range of an integer column.
func (w *workload) pred(g gen, t *Table) string {
	r := g.r
	cols := t.writable()
	var keyCols []string
	keyCols = append(keyCols, t.PK...)
	for _, u := range t.Uniques {
		keyCols = append(keyCols, u...)
	}
	if len(keyCols) > 0 && r.Intn(2) == 0 {
		c := t.col(pick(r, keyCols))
		if c != nil {
			return fmt.Sprintf("`%s` = %s", c.Name, g.value(*c, true))
		}
	}
	c := pick(r, cols)
	switch {
	case isSpatial(c.DataType) || strings.HasSuffix(c.Name, "_j"):
		return fmt.Sprintf("`%s` IS NULL", c.Name)
	case r.Intn(6) == 0:
		return fmt.Sprintf("`%s` IS NULL", c.Name)
	case strings.Contains(c.DataType, "int") && r.Intn(2) == 0:
		return fmt.Sprintf("`%s` BETWEEN %d AND %d", c.Name, r.Intn(20), 10+r.Intn(30))
	}
	return fmt.Sprintf("`%s` = %s", c.Name, g.value(c, true))
}

func isSpatial(dt string) bool {
	switch dt {
	case "point", "geometry", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		return true
	}
	return false
}
