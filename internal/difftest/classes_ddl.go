package difftest

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
)

// classDDL runs one DDL step of a class in the DDL slot. Statements run
// on a connection of their own, discarded afterwards (its session
// settings must not reach other statements); one the source refuses is
// counted, and the model is re-read either way.
func (w *workload) classDDL(ctx context.Context, r *rand.Rand, id classID) error {
	var setup, stmts []string
	switch id {
	case clsDDLSession:
		setup, stmts = w.sessionDDL(r)
	case clsHelperNames:
		stmts = w.helperDDL(r)
	case clsDDLKills:
		stmts = w.swapColumns(r)
	}
	if len(stmts) == 0 {
		return w.reload(ctx)
	}
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer discard(conn)
	for _, q := range setup {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	for _, q := range stmts {
		w.ddls.Add(1)
		if _, err := conn.ExecContext(ctx, q); err != nil {
			w.ddlFailed.Add(1)
			w.logf("class ddl (source refused: %v): %s %s", err, strings.Join(setup, "; "), oneLine(q))
			break
		}
		w.logf("class ddl: %s; %s", strings.Join(setup, "; "), oneLine(q))
	}
	return w.reload(ctx)
}

// sessionDDL is DDL whose meaning depends on the session that ran it: a
// backslash under NO_BACKSLASH_ESCAPES, names in double quotes under
// ANSI_QUOTES, and latin1 bytes from a latin1 client (0xE9 is é). A
// native replica runs it under the event's own sql_mode and character
// sets; the defaults then reach rows through the class's inserts.
func (w *workload) sessionDDL(r *rand.Rand) (setup, stmts []string) {
	if !w.cls.created[clsDDLSession] {
		return nil, nil
	}
	w.next++
	col := fmt.Sprintf("c%d", w.next)
	qt := "`" + w.schema + "`.`k_ds`"
	nbe := "SET SESSION sql_mode=CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')"
	switch r.Intn(5) {
	case 0:
		return []string{nbe}, []string{fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s VARCHAR(12) DEFAULT 'a\nb\\'`, qt, col)}
	case 1:
		return []string{"SET SESSION sql_mode=CONCAT(@@sql_mode, ',ANSI_QUOTES')"},
			[]string{fmt.Sprintf(`ALTER TABLE "%s"."k_ds" ADD COLUMN "%s" VARCHAR(12) DEFAULT 'q"x'`, w.schema, col)}
	case 2:
		return []string{"SET NAMES latin1"},
			[]string{fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s VARCHAR(12) CHARACTER SET utf8mb4 DEFAULT '\xe9t\xe9'", qt, col)}
	case 3:
		return []string{"SET NAMES latin1", nbe},
			[]string{fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s VARCHAR(12) CHARACTER SET latin1 DEFAULT 'x\\y\xe0', COMMENT='\xe9'", qt, col)}
	default:
		w.tables++
		return []string{"SET NAMES latin1", nbe},
			[]string{fmt.Sprintf("CREATE TABLE `%s`.`k_ds%d` (id INT PRIMARY KEY, a VARCHAR(12) DEFAULT 'p\\q', b VARCHAR(12) CHARACTER SET utf8mb4 DEFAULT '\xfc')", w.schema, w.tables),
				fmt.Sprintf("INSERT INTO `%s`.`k_ds%d` (id) VALUES (1), (2)", w.schema, w.tables)}
	}
}

// helperSuffixes are the names gh-ost and pt-online-schema-change give
// their tables; here they are real tables next to a replicated one.
var helperSuffixes = []string{"old", "new", "del", "gho", "ghc"}

// helperDDL makes a real table whose name looks like an online-DDL
// helper of a replicated table t: a copy `_t_<suffix>` that the generic
// workload then writes to, or (as a hand-made "swap") t renamed to
// `_t_old` and a new, empty t created like it.
func (w *workload) helperDDL(r *rand.Rand) []string {
	names := sortedNames(w.model)
	if len(names) == 0 {
		return nil
	}
	t := pick(r, names)
	if strings.HasPrefix(t, "_") {
		return nil
	}
	q := func(n string) string { return "`" + w.schema + "`.`" + n + "`" }
	if r.Intn(3) == 0 {
		old := "_" + t + "_old"
		return []string{fmt.Sprintf("RENAME TABLE %s TO %s", q(t), q(old)),
			fmt.Sprintf("CREATE TABLE %s LIKE %s", q(t), q(old))}
	}
	h := "_" + t + "_" + pick(r, helperSuffixes)
	return []string{fmt.Sprintf("CREATE TABLE %s LIKE %s", q(h), q(t)),
		fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", q(h), q(t))}
}

// swapColumns swaps the names of two columns in one ALTER: run twice, it
// swaps them back, so a DDL re-run after a crash shows in the data.
func (w *workload) swapColumns(r *rand.Rand) []string {
	names := sortedNames(w.model)
	if len(names) == 0 {
		return nil
	}
	t := w.model[pick(r, names)]
	var cols []Col
	for _, c := range t.Cols {
		if !c.Generated && !c.Invisible {
			cols = append(cols, c)
		}
	}
	if len(cols) < 2 {
		return nil
	}
	a := pick(r, cols)
	b := pick(r, cols)
	if a.Name == b.Name || strings.HasSuffix(a.Name, "_j") != strings.HasSuffix(b.Name, "_j") {
		return nil // the _j suffix marks JSON for the value generator
	}
	return []string{fmt.Sprintf("ALTER TABLE %s CHANGE `%s` `%s` %s%s, CHANGE `%s` `%s` %s%s", w.qt(t),
		a.Name, b.Name, fullType(a), nullness(a), b.Name, a.Name, fullType(b), nullness(b))}
}
