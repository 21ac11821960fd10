package preflight

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/task"
)

// CheckPatterns makes every include pattern match at least one table, so a
// misspelt table name is an error instead of a silent no-op.
func CheckPatterns(cfg *task.Config, tables []*dump.TablePlan) error {
	if p := Unmatched(cfg, tables); len(p) > 0 {
		return noMatch(cfg, p[0])
	}
	return nil
}

func noMatch(cfg *task.Config, p string) error {
	return &sluice.Error{Op: "select tables", Err: fmt.Errorf("%w: no table on the source %s matches %q", sluice.ErrUnknownTable, cfg.Source.Addr(), p),
		Hint: "fix tables.include in the task file (patterns are schema.table globs) or create the table"}
}

// Unmatched lists the include patterns that match none of tables.
func Unmatched(cfg *task.Config, tables []*dump.TablePlan) []string {
	var out []string
	for _, p := range cfg.IncludePatterns() {
		found := false
		for _, tp := range tables {
			if p.Match(tp.Table.Ref.Schema, tp.Table.Ref.Name) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, p.Text)
		}
	}
	return out
}

// CheckSelected is CheckPatterns against the source: a pattern that
// matches no table because the source user may not read it is a privilege
// error (the server hides tables a user cannot read, so it looked like "no
// table matches"). Otherwise, a task that replicates takes the pattern with
// a warning: its tables are created later, and replicated from their
// CREATE in the stream. A copy alone refuses it.
func CheckSelected(ctx context.Context, cfg *task.Config, tables []*dump.TablePlan, replicating bool, log *slog.Logger) error {
	miss := Unmatched(cfg, tables)
	if len(miss) == 0 {
		return nil
	}
	db, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	for _, p := range miss {
		cp, err := task.ParsePattern(p)
		if err != nil {
			return err
		}
		schema := cp.SchemaPart()
		if n := cp.SchemaName(); n != "" {
			schema = n
		}
		can, err := maySelect(ctx, db, cp)
		if err != nil {
			return dbconn.Classify(err, "source", cfg.Source)
		}
		if !can {
			return &sluice.Error{Op: "select tables", Err: fmt.Errorf("%w: source user %q has no SELECT privilege on %q, so no table matches tables.include pattern %q", sluice.ErrPrivilege, cfg.Source.User, schema, p),
				Hint: fmt.Sprintf("GRANT SELECT ON `%s`.* TO the source user (for a pattern, on each schema it names), or fix tables.include", strings.ReplaceAll(schema, "`", ""))}
		}
		if !replicating {
			return noMatch(cfg, p)
		}
		log.Info(fmt.Sprintf("warning: tables.include pattern %q matches no table on the source yet; tables created later are replicated from their CREATE TABLE", p))
	}
	return nil
}

// maySelect reports whether the current user holds SELECT globally, on a
// schema that the pattern's schema part matches, or on a table in one.
func maySelect(ctx context.Context, db *sql.DB, p task.Pattern) (bool, error) {
	var global int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'SELECT'").Scan(&global); err != nil {
		return false, err
	}
	if global > 0 {
		return true, nil
	}
	rows, err := db.QueryContext(ctx, "SELECT TABLE_SCHEMA FROM information_schema.SCHEMA_PRIVILEGES WHERE PRIVILEGE_TYPE = 'SELECT' "+
		"UNION SELECT TABLE_SCHEMA FROM information_schema.TABLE_PRIVILEGES WHERE PRIVILEGE_TYPE = 'SELECT'")
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return false, err
		}
		if p.MatchSchema(s) {
			return true, nil
		}
		// A grant's schema may itself be a LIKE pattern (app\_%).
		if lit := p.SchemaName(); lit != "" && likeMatch(s, lit) {
			return true, nil
		}
	}
	return false, rows.Err()
}

// likeMatch matches name against a grant's schema, a LIKE pattern: % any
// run, _ one character, \ escapes.
func likeMatch(like, name string) bool {
	var b strings.Builder
	for i := 0; i < len(like); i++ {
		switch c := like[i]; c {
		case '\\':
			if i+1 < len(like) {
				i++
				b.WriteString("\\" + string(like[i]))
			}
		case '%':
			b.WriteByte('*')
		case '_':
			b.WriteByte('?')
		case '*', '?', '[', '`':
			b.WriteString("\\" + string(c))
		default:
			b.WriteByte(c)
		}
	}
	return task.MatchPart(b.String(), name)
}
