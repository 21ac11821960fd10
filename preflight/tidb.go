package preflight

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/load"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/sqlgen"
	"github.com/sluice-db/sluice/task"
)

// The target's flavour, and on a TiDB target the selected tables TiDB
// cannot hold as the source has them (issue 32). TiDB takes most of a
// MariaDB schema, but it has no spatial types or indexes, no FULLTEXT
// index (it drops one with a warning), fewer collations and none of
// MariaDB's own types; a table it would take differently is refused here,
// before anything is copied, with the table and the reason. Beyond the
// rules below, each table's CREATE TABLE is tried in a scratch schema on
// the target: an error or a warning there (TiDB ignores what it does not
// implement with a warning) refuses the table with TiDB's own words, and a
// table it creates must read back with the source's columns and keys.

// targetFlavorName is the check's name.
const targetFlavorName = "target flavour"

// targetFlavor names the target's flavour and version, and on TiDB checks
// the selected tables (src nil: the source is not reachable; only the name).
func targetFlavor(ctx context.Context, src, dst *sql.DB, cfg *task.Config, mode string) Result {
	r := Result{Name: targetFlavorName, Status: "pass"}
	f, ver, err := dbconn.ServerFlavor(ctx, dst)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "target", cfg.Target))
	}
	r.Detail = f.String() + " " + ver
	if f != dbconn.TiDB || src == nil {
		return r
	}
	refs, err := schema.ListTables(ctx, src, cfg.Selected)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	colls, err := tidbCollations(ctx, dst)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "target", cfg.Target))
	}
	scratch := ""
	if mode != "incremental" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		scratch = "sluice_check_" + hex.EncodeToString(b)
		defer dst.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+sluice.QuoteIdent(scratch)) //nolint:errcheck // best effort
	}
	for _, ref := range refs {
		reason, err := tidbRefuses(ctx, src, ref, colls)
		if err == nil && reason == "" && scratch != "" {
			reason, err = tidbTrialCreate(ctx, src, dst, ref, scratch)
		}
		if err != nil {
			return errResult(r.Name, err)
		}
		if reason != "" {
			r.Status = "fail"
			r.Detail = fmt.Sprintf("%s %s cannot hold table %s: %s", f, ver, ref, reason)
			r.Err = fmt.Errorf("%w: %s", sluice.ErrSchemaMismatch, r.Detail)
			r.Fix = "change the table on the source, exclude " + ref.String() + " in tables.exclude, or use a MariaDB target (docs/manual/tidb.md lists what TiDB cannot hold)"
			return r
		}
	}
	r.Detail += fmt.Sprintf(": the %d selected tables fit", len(refs))
	return r
}

// tidbCollations lists the collations the target knows.
func tidbCollations(ctx context.Context, dst *sql.DB) (map[string]bool, error) {
	rows, err := dst.QueryContext(ctx, "SELECT COLLATION_NAME FROM information_schema.COLLATIONS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out[strings.ToLower(c)] = true
	}
	return out, rows.Err()
}

// tidbTypes are the column types TiDB does not have, with the reason.
var tidbTypes = map[string]string{
	"geometry": "spatial", "point": "spatial", "linestring": "spatial", "polygon": "spatial",
	"multipoint": "spatial", "multilinestring": "spatial", "multipolygon": "spatial", "geometrycollection": "spatial",
	"inet4": "MariaDB's own", "inet6": "MariaDB's own", "uuid": "MariaDB's own", "vector": "MariaDB's own",
}

// tidbRefuses applies the rules that need no trial: types, index kinds and
// collations. "" when none applies.
func tidbRefuses(ctx context.Context, src *sql.DB, ref sluice.TableRef, colls map[string]bool) (string, error) {
	rows, err := src.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COALESCE(COLLATION_NAME, '') FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, ref.Schema, ref.Name)
	if err != nil {
		return "", err
	}
	var reason string
	for rows.Next() && reason == "" {
		var name, typ, coll string
		if err := rows.Scan(&name, &typ, &coll); err != nil {
			rows.Close()
			return "", err
		}
		if why, ok := tidbTypes[strings.ToLower(typ)]; ok {
			reason = fmt.Sprintf("column %s is %s, a %s type TiDB does not have", name, strings.ToUpper(typ), why)
		} else if coll != "" && !colls[strings.ToLower(coll)] {
			reason = fmt.Sprintf("column %s has collation %s, which TiDB does not have (it would compare and order its values differently)", name, coll)
		}
	}
	rows.Close()
	if reason != "" || rows.Err() != nil {
		return reason, rows.Err()
	}
	var idx, kind string
	err = src.QueryRowContext(ctx, `SELECT INDEX_NAME, INDEX_TYPE FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_TYPE IN ('FULLTEXT', 'SPATIAL') LIMIT 1`, ref.Schema, ref.Name).Scan(&idx, &kind)
	switch {
	case err == nil:
		return fmt.Sprintf("index %s is a %s index, which TiDB does not have", idx, kind), nil
	case !errors.Is(err, sql.ErrNoRows):
		return "", err
	}
	return "", nil
}

// tidbTrialCreate creates ref's CREATE TABLE as scratch.<name> on the
// target, as the copy would, and reports TiDB's error or warnings, or a
// difference between what it made and the source's table.
func tidbTrialCreate(ctx context.Context, src, dst *sql.DB, ref sluice.TableRef, scratch string) (string, error) {
	t, err := schema.Inspect(ctx, src, ref)
	if err != nil {
		return "", nil // dropped meanwhile: the copy's own checks see it
	}
	tgt := sluice.TableRef{Schema: scratch, Name: ref.Name}
	create, err := sqlgen.CreateTableAs(t.CreateSQL, tgt)
	if err != nil {
		return "", err
	}
	c, err := dst.Conn(ctx)
	if err != nil {
		return "", err
	}
	// Foreign keys may name tables not made here.
	for _, q := range []string{"SET SESSION foreign_key_checks = 0", sqlgen.CreateDatabase(scratch), "USE " + sluice.QuoteIdent(scratch)} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			return "", err
		}
	}
	defer c.Close() // again after the explicit Close below: a no-op
	if _, err := c.ExecContext(ctx, create); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			return "its CREATE TABLE fails there: " + oneLine(err), nil
		}
		return "", err
	}
	rows, err := c.QueryContext(ctx, "SHOW WARNINGS")
	if err != nil {
		return "", err
	}
	var warns []string
	for rows.Next() {
		var level, msg string
		var code int
		if err := rows.Scan(&level, &code, &msg); err != nil {
			rows.Close()
			return "", err
		}
		if code == 1681 {
			// "Integer display width is deprecated": about the syntax of
			// int(11), which changes nothing TiDB stores.
			continue
		}
		warns = append(warns, fmt.Sprintf("%s %d: %s", level, code, msg))
	}
	rows.Close()
	if len(warns) > 0 {
		return "TiDB takes its CREATE TABLE only with " + strings.Join(warns, "; "), nil
	}
	// The check's pool has one connection: hand it back before Preflight
	// takes it.
	_, _ = c.ExecContext(ctx, "SET SESSION foreign_key_checks = 1")
	c.Close()
	if err := load.Preflight(ctx, dst, t, tgt); err != nil {
		var se *sluice.Error
		if errors.As(err, &se) {
			return "TiDB makes it differently: " + oneLine(se.Err), nil
		}
		return "", err
	}
	return "", nil
}
