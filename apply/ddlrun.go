package apply

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

// DDL across a crash (issue 29, N6). MariaDB DDL cannot share a
// transaction with the checkpoint, so a kill -9 between a statement and its
// checkpoint leaves the restart unsure whether it ran. Running it again is
// not safe in general: `ALTER TABLE t CHANGE a b INT, CHANGE b a INT`
// succeeds a second time and swaps the columns back, and the source's own
// text (ddltext.go in decode) has no IF [NOT] EXISTS to make a rerun fail
// harmlessly.
//
// So before each statement the checkpoint row's ddl_pending records the
// statement's index and a digest of the target's definitions (SHOW CREATE
// TABLE, or absent) of every table the DDL names, committed before the
// statement runs. A restart whose checkpoint holds such a mark for the DDL
// it is about to apply:
//   - skips the statements before the marked one: the mark of statement i
//     is written only after statement i-1 returned;
//   - computes the digest again for the marked statement: different means
//     the statement ran (MariaDB 10.6+ runs each DDL statement atomically,
//     so a definition is either the one before or the one after), equal
//     means it did not, and it runs now as the first time.
//
// The window: the mark commits, then the statement runs. A kill before the
// statement reaches the server leaves the digest equal: rerun, right. A
// kill after it completed leaves the digest changed: skip, right. A kill
// while the server runs it: the server finishes or rolls back the
// statement on its own, and the restart cannot look before that, because
// the new applier takes the dead one's session lock first (fence.go),
// which it gets only once that session, and so the statement, has ended.
//
// Statements that leave the definition as it was are safe to rerun
// (TRUNCATE of a table that has not been written to since, ALTER ... FORCE,
// a MODIFY to the same type), with one exception: renaming columns among
// themselves so that the names read in the old order (the decoder flags
// these, StreamItem.SameShape). Those stop with a message when, after a
// crash, the digest is unchanged. RENAME TABLE keeps its own marker table
// (renamemark.go), which tells a swap of identical tables apart. Database
// DDL is rendered idempotent by the decoder and names no table.

// ddlMark is the content of ddl_pending: the end position of the DDL, and
// (written by this version) the statement about to run and its digest.
type ddlMark struct {
	end    string
	stmt   int
	digest string
	exact  bool // stmt and digest were recorded
}

func (m ddlMark) String() string {
	if !m.exact {
		return m.end
	}
	return m.end + "\n" + strconv.Itoa(m.stmt) + " " + m.digest
}

func parseMark(s string) ddlMark {
	end, rest, ok := strings.Cut(s, "\n")
	if !ok {
		return ddlMark{end: s}
	}
	n, digest, _ := strings.Cut(rest, " ")
	i, err := strconv.Atoi(n)
	if err != nil {
		return ddlMark{end: end}
	}
	return ddlMark{end: end, stmt: i, digest: digest, exact: true}
}

// tableDigest digests the target's definition of each table (absent, or
// SHOW CREATE TABLE), in a fixed order. It runs in the applier's own
// session mode, so that the same definition reads the same each time.
func (a *Applier) tableDigest(ctx context.Context, tables []sluice.TableRef) (string, error) {
	seen := map[string]bool{}
	var keys []string
	for _, t := range tables {
		k := sluice.QuoteIdent(t.Schema) + "." + sluice.QuoteIdent(t.Name)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		def, err := a.showCreate(ctx, k)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", k, len(def), def)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (a *Applier) showCreate(ctx context.Context, table string) (string, error) {
	rows, err := a.serial.QueryContext(ctx, "SHOW CREATE TABLE "+table)
	if err != nil {
		if isMySQLErr(err, 1146) || isMySQLErr(err, 1049) {
			return "(absent)", nil
		}
		return "", fmt.Errorf("read the definition of %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		for _, v := range vals {
			out = append(out, string(v))
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read the definition of %s: %w", table, err)
	}
	return strings.Join(out, "\x00"), nil
}

// writeMark commits the mark of statement i of it before it runs.
func (a *Applier) writeMark(ctx context.Context, seq uint64, applied sluice.Position, m ddlMark) error {
	b := a.appendCheckpointPending(nil, serialWorker, seq, applied, appendRanges(nil, applied, a.inherited), m.String())
	if _, err := a.serial.ExecContext(ctx, string(b)); err != nil {
		return fmt.Errorf("mark DDL pending: %w", err)
	}
	return nil
}

// runDDL runs the statements of DDL item it, each in the source's session
// context, skipping what a mark shows ran before a crash (see above).
func (a *Applier) runDDL(ctx context.Context, it sluice.StreamItem, seq uint64, applied sluice.Position) error {
	end := it.End.String()
	resume := ddlMark{}
	if a.pending != "" {
		if m := parseMark(a.pending); m.end == end {
			resume = m
		}
	}
	for i, q := range it.DDL {
		tolerant := false
		if resume.end != "" {
			switch {
			case !resume.exact:
				// A mark of an earlier version: the statement may have run;
				// "already exists / does not exist" then means it did.
				tolerant = true
			case i < resume.stmt:
				continue // it ran: the mark of a later statement was written
			}
		}
		digest := ""
		if len(it.Tables) > 0 && !isRenameTable(q) {
			var err error
			if digest, err = a.tableDigest(ctx, it.Tables); err != nil {
				return err
			}
		}
		if resume.exact && i == resume.stmt && digest == "" {
			// Database DDL (made idempotent by the decoder) or a RENAME
			// TABLE (its marker decides): as before, "already exists /
			// does not exist" means it ran.
			tolerant = true
		}
		if resume.exact && i == resume.stmt && digest != "" {
			if digest != resume.digest {
				continue // it ran before the crash
			}
			if it.SameShape {
				return &sluice.Error{Op: "apply DDL at " + end + " (GTID " + it.GTID + ") again after a crash",
					Err: fmt.Errorf("%w: the statement renames columns among themselves and the target's definition reads the same whether or not it ran: %s", sluice.ErrUnsupportedDDL, fullSQL(q)),
					Hint: "compare the columns' values on the target with the source: if the statement ran, run sluice skip --position " + end +
						"; if not, run it on the target by hand and then sluice skip --position " + end + "; then start the task again"}
			}
		}
		if err := a.writeMark(ctx, a.baseSeq+seq-1, applied, ddlMark{end: end, stmt: i, digest: digest, exact: true}); err != nil {
			return err
		}
		if err := a.runStmt(ctx, it, i, q, tolerant); err != nil {
			return err
		}
	}
	return nil
}

// runStmt runs statement i of it in the source's session context and
// restores the applier's session after it.
func (a *Applier) runStmt(ctx context.Context, it sluice.StreamItem, i int, q string, tolerant bool) error {
	var restore []byte
	restoreSQL := sessionRestoreSQL(a.tidb)
	sessionSQL := ddlSessionSQL(it)
	if a.tidb { // tidbddl.go
		var terr error
		if sessionSQL, terr = tidbDDLSessionSQL(it, q); terr != nil {
			return &sluice.Error{Op: "apply DDL at " + it.End.String() + " to the TiDB target", Err: fmt.Errorf("%w: %s: %v", sluice.ErrUnsupportedDDL, fullSQL(q), terr),
				Hint: "apply the change to the target by hand as TiDB allows, then run sluice skip --position " + it.End.String()}
		}
	}
	err := a.serial.QueryRowContext(ctx, restoreSQL).Scan(&restore)
	if err != nil {
		return fmt.Errorf("apply DDL: read the session: %w", err)
	}
	if _, err := a.serial.ExecContext(ctx, sessionSQL); err != nil {
		return &sluice.Error{Op: "apply DDL at " + it.End.String() + " to the target", Err: fmt.Errorf("%w: set the source's session context: %v", sluice.ErrUnsupportedDDL, err),
			Hint: "make the target accept the session settings (e.g. load its time zone tables), or apply the change by hand and run sluice skip --position " + it.End.String()}
	}
	if isRenameTable(q) {
		err = a.runRename(ctx, a.serial, q, it.End, i)
	} else {
		_, err = a.serial.ExecContext(ctx, withSetStatement(it.Session.SetStatement, q))
	}
	// A session left in the DDL's context must not apply rows: restoring
	// fails only with the connection, and then nothing more runs on it.
	if _, rerr := a.serial.ExecContext(context.Background(), string(restore)); rerr != nil && err == nil {
		err = fmt.Errorf("restore the applier's session after DDL: %w", rerr)
	}
	if err != nil {
		var me *mysql.MySQLError
		if tolerant && errors.As(err, &me) && alreadyDone[me.Number] {
			return nil
		}
		return &sluice.Error{Op: "apply DDL at " + it.End.String() + " to the target", Err: fmt.Errorf("%w: %s: %v", sluice.ErrUnsupportedDDL, fullSQL(q), err),
			Hint: ddlFailedHint(it)}
	}
	return nil
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}

// ddlSessionSQL sets the session context the source ran DDL item it in,
// as MariaDB's replica does before it runs a Query event
// (Query_log_event::do_apply_event): the sql_mode (the replica keeps its
// own NO_DIR_IN_CREATE: source paths mean nothing here), the client and
// connection character sets and the server collation, so that the
// statement's bytes are read as the source read them, the time zone,
// foreign_key_checks, explicit_defaults_for_timestamp (a TIMESTAMP
// column's implicit default and NULL-ness), auto_increment_increment and
// _offset (the numbers an added AUTO_INCREMENT column fills in), and the
// statement's time.
//
// A MySQL source's sql_mode bits are not all MariaDB's: its DDL keeps the
// lenient mode sluice used before.
func ddlSessionSQL(it sluice.StreamItem) string {
	s := it.Session
	b := []byte("SET SESSION ")
	if s.HasSQLMode && it.End.Flavor != "mysql" {
		const noDirInCreate = 1 << 7
		b = append(b, "sql_mode="...)
		b = strconv.AppendUint(b, s.SQLMode|noDirInCreate, 10)
	} else {
		b = append(b, "sql_mode='"+ddlSQLMode+"'"...)
	}
	if it.End.Flavor == "mysql" && (s.Charset[0] >= 255 || s.Charset[1] >= 255 || s.Charset[2] >= 255) {
		// MySQL 8's utf8mb4_0900 collations (ids 255 and up) are not
		// MariaDB's: the bytes are utf8mb4, the collations stay the target's.
		b = append(b, ", character_set_client=utf8mb4"...)
	} else if s.Charset[0] != 0 {
		b = append(b, ", character_set_client="...)
		b = strconv.AppendUint(b, uint64(s.Charset[0]), 10)
		b = append(b, ", collation_connection="...)
		b = strconv.AppendUint(b, uint64(s.Charset[1]), 10)
		b = append(b, ", collation_server="...)
		b = strconv.AppendUint(b, uint64(s.Charset[2]), 10)
	}
	if s.TimeZone != "" {
		b = append(b, ", time_zone="...)
		b = sqlgen.AppendQuoted(b, s.TimeZone)
	}
	if s.HasFlags {
		b = append(b, ", foreign_key_checks="...)
		b = appendBool(b, !s.NoFKChecks)
		if it.End.Flavor != "mysql" {
			// MySQL sends it in a status variable of its own, not read.
			b = append(b, ", explicit_defaults_for_timestamp="...)
			b = appendBool(b, s.ExplicitTimestamp)
		}
	}
	if s.AutoIncIncrement != 0 {
		b = append(b, ", auto_increment_increment="...)
		b = strconv.AppendUint(b, uint64(s.AutoIncIncrement), 10)
		b = append(b, ", auto_increment_offset="...)
		b = strconv.AppendUint(b, uint64(s.AutoIncOffset), 10)
	}
	b = append(b, ", timestamp="...)
	b = append(b, ddlTimestamp(it)...)
	return string(b)
}

// withSetStatement runs q under the source's SET STATEMENT assignments,
// when its DDL had them: the variables hold for this statement only, as
// on the source and on a native replica (which runs the whole text).
func withSetStatement(vars, q string) string {
	if vars == "" {
		return q
	}
	return "SET STATEMENT " + vars + " FOR " + q
}

// sessionRestoreSQL reads the applier's session as the SET that restores it
// after a DDL ran in the source's session. TiDB's
// explicit_defaults_for_timestamp is read-only (always ON), so it is left
// out there.
func sessionRestoreSQL(tidb bool) string {
	edft := "', explicit_defaults_for_timestamp=', @@session.explicit_defaults_for_timestamp, "
	if tidb {
		edft = ""
	}
	return "SELECT CONCAT('SET SESSION sql_mode=', QUOTE(@@session.sql_mode), ', character_set_client=', QUOTE(@@session.character_set_client), " +
		"', collation_connection=', QUOTE(@@session.collation_connection), ', collation_server=', QUOTE(@@session.collation_server), " +
		"', time_zone=', QUOTE(@@session.time_zone), ', foreign_key_checks=', @@session.foreign_key_checks, " + edft +
		"', auto_increment_increment=', @@session.auto_increment_increment, ', auto_increment_offset=', @@session.auto_increment_offset, ', timestamp=DEFAULT')"
}
