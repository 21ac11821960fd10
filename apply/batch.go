package apply

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unsafe"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/stagetime"
	"github.com/sluice-db/sluice/sqlgen"
)

// maxInsertStmt bounds one merged multi-row INSERT.
const maxInsertStmt = 1 << 20

// ErrMissingRow: an UPDATE or DELETE from the source matched no row on the
// target (a MariaDB replica's error 1032).
var ErrMissingRow = errors.New("row missing on the target")

// ErrTargetWarning: the target raised a warning (or note) while storing a
// row change, so what it stored may differ from the source.
var ErrTargetWarning = errors.New("the target raised a warning")

// Checking each row statement.
//
// The target session is strict (STRICT_ALL_TABLES), so a value the target
// would truncate or convert is an error, not a warning. Notes remain (a
// DECIMAL rounded, trailing spaces cut), and an UPDATE or DELETE that
// matches no row is no error at all. The driver exposes neither the
// warning count of the OK packet nor a way to stop a multi-statement
// batch, whose COMMIT may travel with the rows. So every row statement is
// followed, in the same batch, by one statement that fails when the row
// statement raised a warning or matched fewer rows than the source changed:
//
//	SET @sluice_r=~0+(ROW_COUNT()<>1)*7,@sluice_w=~0+(@@warning_count<>0)*7
//
// A BIGINT UNSIGNED overflow is an error in every sql_mode; the server then
// skips the rest of the batch (the COMMIT included) and its message names
// the failed check (7: the 7th row statement of the batch). ROW_COUNT()
// counts found rows (TargetConfig sets CLIENT_FOUND_ROWS), and a statement
// without tables (SET) leaves @@warning_count of the statement before it.
// With on-missing-row: skip, the row count is not checked in SQL; the
// driver's per-statement counts (mysql.Result.AllRowsAffected) give the
// rows missing, which the transaction commits without.

// rowStmt is one row statement in the batch buffer.
type rowStmt struct {
	info *tableInfo
	kind sluice.ChangeKind
	// want is how many rows it must match (UPDATE, DELETE); 0 for INSERT.
	want int
	// rows are the before images that identify the rows, srcs their
	// source transactions (nil entries: the one in batchWriter.src).
	rows [][]any
	srcs []*txn
	// afters are the rows it writes, kept for a table with generated
	// columns, whose check compares the stored rows (see genCheck).
	afters [][]any
	// start, end delimit its text in buf; res is its index among all
	// statements of buf, as the server counts results.
	start, end, res int
	// An INSERT's rows (n) came from srcFirst..srcLast, for messages.
	srcFirst, srcLast *txn
	n                 int
}

// Tables with generated columns.
//
// The target computes generated column values itself. A source that is
// not strict (or an INSERT IGNORE) stores a value computed with a warning,
// 'Ǆ|' converted to '?|' in a latin1 column or a clipped overflow, and the
// row event carries that value. In the strict row session the same
// computation is an error, and any warning stops the task, while a MariaDB
// replica stores what the source stored (difftest bug L). So a row
// statement of such a table runs with strict mode off, between two SETs of
// sql_mode in the same batch, and instead of the warning check the stored
// rows are compared with the source's row images in every column,
// generated ones included, by exact value:
//
//	SET @sluice_ok=(EXISTS(SELECT 1 FROM t WHERE ...) AND ...);SET @sluice_g=~0+(@sluice_ok=0)*7
//
// A warning that changed nothing the source did not change too is then
// harmless, and any difference still stops the task.
const genSQLMode = "NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION"

// ErrTargetRowDiffers: a row stored on the target differs from the
// source's row image (a table with generated columns, see genCheck).
var ErrTargetRowDiffers = errors.New("the row stored on the target differs from the source's")

// genBegin starts a row statement of a table with generated columns: the
// session leaves strict mode for it.
func (b *batchWriter) genBegin(st rowStmt) {
	b.sep()
	b.buf = append(b.buf, "SET SESSION sql_mode='"+genSQLMode+"'"...)
	b.begin(st) // its separator counts the SET as a statement
}

// batchWriter turns row changes into SQL text and sends it in
// multi-statement round trips of at most BatchBytes.
type batchWriter struct {
	a    *Applier
	conn *sql.Conn
	buf  []byte
	// ins is the table of the INSERT at the end of buf, which the next
	// insert into the same table extends instead of starting a statement;
	// its check is written when it ends (open).
	ins      *tableInfo
	insStart int
	open     bool
	nres     int // index of the statement at the end of buf
	stmts    []rowStmt
	// src is the source transaction whose changes are being written.
	src *txn
	// missing counts the rows that matched nothing in this target
	// transaction (on-missing-row: skip).
	missing int
	// clock times the round trips (a worker's; nil: untimed); final marks
	// the batch that carries the COMMIT.
	clock *stagetime.Clock
	final bool
	// fkOff: the changes written last turned foreign_key_checks off
	// (RowChange.NoFKChecks); fkDirty: the session may have the checks
	// off, until a batch that ends with them on succeeds or rollback
	// turns them on again (fkFor).
	fkOff, fkDirty bool
}

// fkFor makes the statements written next run with foreign_key_checks as
// the source session had them (off: its rows event carried the
// NO_FOREIGN_KEY_CHECKS flag), as a MariaDB replica sets the variable per
// rows event. The session is left with the checks on at the end of every
// target transaction (fkFor(false) before the commit) and by rollback.
func (b *batchWriter) fkFor(off bool) {
	if off == b.fkOff {
		return
	}
	b.sep()
	if off {
		b.buf = append(b.buf, "SET SESSION foreign_key_checks=0"...)
		b.fkDirty = true
	} else {
		b.buf = append(b.buf, "SET SESSION foreign_key_checks=1"...)
	}
	b.fkOff = off
}

// start empties the buffer and begins a target transaction.
func (b *batchWriter) start() {
	b.reset()
	b.missing = 0
	b.buf = append(b.buf, "START TRANSACTION"...)
}

func (b *batchWriter) reset() {
	b.buf = b.buf[:0]
	b.stmts = b.stmts[:0]
	b.ins, b.open, b.nres = nil, false, 0
}

// sep ends the statement at the end of buf and starts another.
func (b *batchWriter) sep() {
	if b.open {
		b.check()
	}
	b.ins = nil
	if len(b.buf) > 0 {
		b.buf = append(b.buf, ';')
		b.nres++
	}
}

// begin starts row statement st.
func (b *batchWriter) begin(st rowStmt) {
	b.sep()
	st.start, st.res = len(b.buf), b.nres
	b.stmts = append(b.stmts, st)
}

// check ends the last row statement with its check (see above).
func (b *batchWriter) check() {
	i := len(b.stmts)
	st := &b.stmts[i-1]
	st.end = len(b.buf)
	b.open = false
	if st.afters != nil {
		b.genCheck(i, st)
		return
	}
	b.buf = append(b.buf, ";SET "...)
	b.nres++
	if st.want > 0 && !b.a.cfg.skipMissing() {
		b.buf = append(b.buf, "@sluice_r=~0+(ROW_COUNT()<>"...)
		b.buf = strconv.AppendInt(b.buf, int64(st.want), 10)
		b.buf = append(b.buf, ")*"...)
		b.buf = strconv.AppendInt(b.buf, int64(i), 10)
		b.buf = append(b.buf, ',')
	}
	if st.kind == sluice.Delete && st.info.spec.HasGenerated() {
		// A DELETE computes the virtual columns of every row it looks at,
		// and an expression over values the source stored with a warning
		// warns again (c14*2+1 with c14 binary: "Truncated incorrect
		// DOUBLE value", difftest seed 2001), though nothing is stored.
		// What it removes is checked by its row count; its match is exact
		// in every written column, which the generated ones follow.
		b.buf = append(b.buf, "@sluice_w=~0"...)
		return
	}
	b.buf = append(b.buf, "@sluice_w=~0+(@@warning_count<>0)*"...)
	b.buf = strconv.AppendInt(b.buf, int64(i), 10)
}

// genCheck ends row statement i (1-based) of a table with generated
// columns: strict mode back on, its row count checked, and every row it
// wrote compared with the source's image.
func (b *batchWriter) genCheck(i int, st *rowStmt) {
	// ROW_COUNT() is the previous statement's: the row count is checked
	// first, before any other statement, the SET of sql_mode included.
	if st.want > 0 && !b.a.cfg.skipMissing() {
		b.buf = append(b.buf, ";SET @sluice_r=~0+(ROW_COUNT()<>"...)
		b.buf = strconv.AppendInt(b.buf, int64(st.want), 10)
		b.buf = append(b.buf, ")*"...)
		b.buf = strconv.AppendInt(b.buf, int64(i), 10)
		b.nres++
	}
	b.buf = append(b.buf, ";SET @sluice_ok=("...)
	for n, row := range st.afters {
		if n > 0 {
			b.buf = append(b.buf, " AND "...)
		}
		b.buf = st.info.spec.AppendRowExists(b.buf, row)
	}
	b.buf = append(b.buf, ");SET SESSION sql_mode='"+rowSQLMode+"';SET @sluice_g=~0+(@sluice_ok=0)*"...)
	b.buf = strconv.AppendInt(b.buf, int64(i), 10)
	b.nres += 3
}

func (b *batchWriter) change(ctx context.Context, c *sluice.RowChange, info *tableInfo) error {
	b.fkFor(c.NoFKChecks)
	if info.spec.HasGenerated() && c.Kind != sluice.Delete {
		return b.genChange(ctx, c, info)
	}
	switch c.Kind {
	case sluice.Insert:
		if b.ins == info && len(b.buf)-b.insStart < maxInsertStmt {
			b.buf = append(b.buf, ',')
			b.buf = info.spec.AppendInsertRow(b.buf, c.After)
			st := &b.stmts[len(b.stmts)-1]
			st.srcLast = b.src
			st.n++
		} else {
			b.begin(rowStmt{info: info, kind: sluice.Insert, srcFirst: b.src, srcLast: b.src, n: 1})
			b.insStart = len(b.buf)
			b.buf = info.spec.AppendInsert(b.buf, c.After)
			b.ins, b.open = info, true
		}
	case sluice.Update:
		b.begin(rowStmt{info: info, kind: sluice.Update, want: 1, rows: [][]any{c.Before}, srcs: []*txn{b.src}})
		var ok bool
		if b.buf, ok = info.spec.AppendUpdate(b.buf, c.Before, c.After); !ok {
			// Nothing to set (no written column differs), yet the row
			// must exist: touch it, so that the check sees it found.
			b.buf = appendTouch(b.buf, info, c.Before)
		}
		b.check()
	case sluice.Delete:
		b.begin(rowStmt{info: info, kind: sluice.Delete, want: 1, rows: [][]any{c.Before}, srcs: []*txn{b.src}})
		b.buf = info.spec.AppendDelete(b.buf, c.Before)
		b.check()
	}
	return b.flushIfFull(ctx)
}

// genChange writes an INSERT or UPDATE of a table with generated columns.
func (b *batchWriter) genChange(ctx context.Context, c *sluice.RowChange, info *tableInfo) error {
	switch c.Kind {
	case sluice.Insert:
		if b.ins == info && len(b.buf)-b.insStart < maxInsertStmt {
			b.buf = append(b.buf, ',')
			b.buf = info.spec.AppendInsertRow(b.buf, c.After)
			st := &b.stmts[len(b.stmts)-1]
			st.afters = append(st.afters, c.After)
			st.srcLast = b.src
			st.n++
		} else {
			b.genBegin(rowStmt{info: info, kind: sluice.Insert, afters: [][]any{c.After}, srcFirst: b.src, srcLast: b.src, n: 1})
			b.insStart = len(b.buf)
			b.buf = info.spec.AppendInsert(b.buf, c.After)
			b.ins, b.open = info, true
		}
	case sluice.Update:
		b.genBegin(rowStmt{info: info, kind: sluice.Update, want: 1, rows: [][]any{c.Before}, srcs: []*txn{b.src}, afters: [][]any{c.After}})
		var ok bool
		if b.buf, ok = info.spec.AppendUpdate(b.buf, c.Before, c.After); !ok {
			b.buf = appendTouch(b.buf, info, c.Before)
		}
		b.check()
	}
	return b.flushIfFull(ctx)
}

// appendTouch appends an UPDATE that finds the row before and sets one
// column to itself.
func appendTouch(b []byte, info *tableInfo, before []any) []byte {
	s := info.spec
	b = append(b, "UPDATE "...)
	b = append(b, s.Name...)
	b = append(b, " SET "...)
	c := s.Cols[s.Write[0]]
	b = append(b, c...)
	b = append(b, '=')
	b = append(b, c...)
	return append(b, whereOf(info, before)...)
}

// whereOf is the WHERE clause (with LIMIT 1 for a keyless table) that
// finds the row before, as AppendDelete writes it.
func whereOf(info *tableInfo, before []any) []byte {
	d := info.spec.AppendDelete(nil, before)
	return d[len("DELETE FROM ")+len(info.spec.Name):]
}

func (b *batchWriter) flushIfFull(ctx context.Context) error {
	if len(b.buf) >= b.a.cfg.BatchBytes {
		return b.exec(ctx)
	}
	return nil
}

// exec sends what is buffered.
func (b *batchWriter) exec(ctx context.Context) error {
	if b.open {
		b.check()
	}
	b.ins = nil
	if len(b.buf) == 0 {
		return nil
	}
	// The batch's text goes to the driver as a view of buf, not a copy
	// (the copy was a twentieth of the catch-up's allocated bytes, issue
	// 18). Ownership: buf is this worker's and is not written until
	// ExecContext returns, which is when the driver is done with the
	// query (it copies it into its own packet buffer, synchronously, and
	// keeps no reference); reset below then reuses buf for the next batch.
	q := unsafe.String(unsafe.SliceData(b.buf), len(b.buf))
	state := stagetime.Execute
	if b.final {
		state = stagetime.ExecuteCommit
	}
	t0 := b.clock.Enter(state)
	var err error
	if b.a.cfg.skipMissing() {
		var counts []int64
		if counts, err = rawExec(ctx, b.conn, q); err == nil {
			b.countMissing(counts)
		}
	} else {
		_, err = b.conn.ExecContext(ctx, q)
	}
	b.clock.Leave(state, t0)
	if err != nil {
		err = b.explain(ctx, err)
	} else {
		b.fkDirty = b.fkOff // the whole batch ran: the session is as written
	}
	if cap(b.buf) > 4*b.a.cfg.BatchBytes {
		b.buf = nil // do not keep a huge buffer after an outsized row
	}
	b.reset()
	return err
}

// rawExec runs q and returns each statement's affected (found) rows.
func rawExec(ctx context.Context, c *sql.Conn, q string) ([]int64, error) {
	var counts []int64
	err := c.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("apply: the target driver connection %T cannot execute statements", dc)
		}
		res, err := ex.ExecContext(ctx, q, nil)
		if err != nil {
			return err
		}
		r, ok := res.(mysql.Result)
		if !ok {
			return fmt.Errorf("apply: the target driver result %T has no per-statement row counts", res)
		}
		counts = r.AllRowsAffected()
		return nil
	})
	return counts, err
}

// countMissing adds the rows that the batch's UPDATEs and DELETEs did not
// find (on-missing-row: skip).
func (b *batchWriter) countMissing(counts []int64) {
	for _, st := range b.stmts {
		if st.want == 0 {
			continue
		}
		if st.res >= len(counts) {
			// Cannot happen: the server answers every statement of a batch
			// that succeeded. Count nothing rather than guess.
			continue
		}
		if n := int64(st.want) - counts[st.res]; n > 0 {
			b.missing += int(n)
		}
	}
}

func (b *batchWriter) rollback() {
	b.reset()
	q := "ROLLBACK"
	if b.fkDirty || b.fkOff {
		q += ";SET SESSION foreign_key_checks=1"
	}
	b.fkOff, b.fkDirty = false, false
	_, _ = b.conn.ExecContext(context.Background(), q)
}

// checkFailed matches the server's message for a failed check: which
// check (row count or warning) and the row statement's number. MariaDB
// prints the expression as '~0 + (row_count() <> 1) * 7', MySQL with more
// parentheses.
var checkFailed = regexp.MustCompile(`(row_count\(\)|@@warning_count|sluice_ok)[^*']*\*\s*(\d+)`)

// explain turns the failure of a check into an error naming the table,
// the row and the source transaction. The batch stopped at the check, so
// its transaction is open: it is rolled back here, before anything else
// runs on the connection.
func (b *batchWriter) explain(ctx context.Context, err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return err
	}
	if me.Number != 1690 {
		if rerr := b.rowError(ctx, me); rerr != nil {
			return rerr
		}
		return err
	}
	m := checkFailed.FindStringSubmatch(me.Message)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[2])
	if i < 1 || i > len(b.stmts) {
		return err
	}
	st := &b.stmts[i-1]
	_, _ = b.conn.ExecContext(ctx, "ROLLBACK")
	if st.afters != nil {
		// The batch stopped before strict mode was back on.
		if _, err := b.conn.ExecContext(ctx, "SET SESSION sql_mode='"+rowSQLMode+"'"); err != nil {
			return fmt.Errorf("restore the strict sql_mode: %w", err)
		}
	}
	switch m[1] {
	case "row_count()":
		return b.missingError(ctx, st)
	case "sluice_ok":
		return b.differsError(st)
	}
	return b.warningError(ctx, st)
}

// missingError names the first row of st that the target does not hold.
// After the rollback the target is as before the group, and the rows of
// one statement are changed by no other statement of the group (compact.go
// merges only rows distinct by key), so a lookup finds which one it was.
func (b *batchWriter) missingError(ctx context.Context, st *rowStmt) error {
	idx, absent := 0, 1
	if len(st.rows) > 1 {
		absent = 0
		for j, r := range st.rows {
			q := append([]byte("SELECT 1 FROM "), st.info.spec.Name...)
			q = append(q, whereOf(st.info, r)...)
			var one int
			switch err := b.conn.QueryRowContext(ctx, string(q)).Scan(&one); {
			case errors.Is(err, sql.ErrNoRows):
				if absent == 0 {
					idx = j
				}
				absent++
			case err != nil:
				return fmt.Errorf("look up the row missing on the target: %w", err)
			}
		}
	}
	what := st.kind.String()
	if len(st.rows) > 1 {
		what = fmt.Sprintf("merged %s of %d rows", st.kind, len(st.rows))
	}
	more := ""
	switch {
	case absent > 1:
		more = fmt.Sprintf(" (and %d more of its rows)", absent-1)
	case absent == 0:
		// Every row is there again after the rollback: something changed
		// the table meanwhile. Name the statement's first row, and say so.
		more = fmt.Sprintf(" or another of its %d rows (all present again when looked up)", len(st.rows))
	}
	return &sluice.Error{Op: "apply " + b.source(st.srcs[idx]),
		Err: fmt.Errorf("%w: %s of %s matched no row for %s%s; the target lost or never had the row", ErrMissingRow, what, st.info.spec.Name, describeRow(st.info, st.rows[idx]), more),
		Hint: "restore the row on the target from the source (or recopy the table), then restart the task; " +
			"incremental.on-missing-row: skip instead applies the rest of the transaction without it"}
}

// warningError re-runs the statement, after the statements of the batch
// before it, in a transaction that it rolls back, to read the warning's
// text (a failed statement's warnings are gone once the check fails).
func (b *batchWriter) warningError(ctx context.Context, st *rowStmt) error {
	text := b.replayWarnings(ctx, st)
	desc := st.info.spec.Name
	if st.kind != sluice.Insert && len(st.rows) == 1 {
		desc += " " + describeRow(st.info, st.rows[0])
	}
	src := b.src
	if len(st.srcs) > 0 {
		src = st.srcs[0]
	}
	return &sluice.Error{Op: "apply " + b.source(src),
		Err:  fmt.Errorf("%w on %s of %s: %s; the stored value would differ from the source", ErrTargetWarning, st.kind, desc, text),
		Hint: "make the target column hold the source's values exactly (compare SHOW CREATE TABLE on source and target), then restart the task"}
}

// differsError: a row statement of a table with generated columns stored
// a row that differs from the source's image.
func (b *batchWriter) differsError(st *rowStmt) error {
	desc := st.info.spec.Name
	if len(st.afters) == 1 {
		desc += " " + describeRow(st.info, st.afters[0])
	} else {
		desc += fmt.Sprintf(" (one of %d rows, the first %s)", len(st.afters), describeRow(st.info, st.afters[0]))
	}
	src := b.src
	if len(st.srcs) > 0 {
		src = st.srcs[0]
	}
	return &sluice.Error{Op: "apply " + b.source(src),
		Err:  fmt.Errorf("%w: %s of %s: a column, generated or written, holds another value than the source's row image", ErrTargetRowDiffers, st.kind, desc),
		Hint: "make the target table's definition the source's (compare SHOW CREATE TABLE on both, generation expressions and character sets included), then restart the task"}
}

func (b *batchWriter) replayWarnings(ctx context.Context, st *rowStmt) string {
	defer func() { _, _ = b.conn.ExecContext(context.Background(), "ROLLBACK") }()
	prefix := strings.TrimSuffix(string(b.buf[:st.start]), ";")
	if !strings.HasPrefix(prefix, "START TRANSACTION") {
		prefix = strings.TrimSuffix("START TRANSACTION;"+prefix, ";")
	}
	if _, err := b.conn.ExecContext(ctx, prefix); err != nil {
		return "(its text is unknown: re-running the batch failed: " + err.Error() + ")"
	}
	if _, err := b.conn.ExecContext(ctx, string(b.buf[st.start:st.end])); err != nil {
		return err.Error()
	}
	rows, err := b.conn.QueryContext(ctx, "SHOW WARNINGS")
	if err != nil {
		return "(its text is unknown: " + err.Error() + ")"
	}
	defer rows.Close()
	var msgs []string
	for rows.Next() {
		var level, msg string
		var code int
		if err := rows.Scan(&level, &code, &msg); err != nil {
			return "(its text is unknown: " + err.Error() + ")"
		}
		msgs = append(msgs, fmt.Sprintf("%s %d: %s", level, code, msg))
	}
	if len(msgs) == 0 {
		return "(the statement re-run alone raised none; it is: " + shortSQL(string(b.buf[st.start:st.end])) + ")"
	}
	return strings.Join(msgs, "; ")
}

// source names a source transaction for a message.
func (b *batchWriter) source(t *txn) string {
	if t == nil {
		t = b.src
	}
	if t == nil {
		return "a source transaction"
	}
	s := "source transaction"
	if t.gtid != "" {
		s += " " + t.gtid
	}
	if t.end.File != "" {
		s += " ending at " + t.end.File + ":" + strconv.FormatUint(uint64(t.end.Pos), 10)
	} else {
		s += " (streamed; its end is not yet read)"
	}
	return s
}

// describeRow prints the values that identify row: its key columns, or
// every compared column of a keyless table.
// appendShown writes a key value for a message: bytes that are not all
// visible ASCII in hex (X'2020', not a quoted pair of spaces).
func appendShown(b []byte, v any) []byte {
	raw, ok := v.([]byte)
	if !ok {
		return sqlgen.AppendValue(b, v)
	}
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f {
			b = append(b, "X'"...)
			b = hex.AppendEncode(b, raw)
			return append(b, '\'')
		}
	}
	return sqlgen.AppendValue(b, v)
}

func describeRow(info *tableInfo, row []any) string {
	var b []byte
	if info.spec.Keyless {
		b = append(b, "(no key) "...)
	}
	for n, k := range info.spec.Key {
		if n > 0 {
			b = append(b, ", "...)
		}
		b = append(b, info.spec.Cols[k]...)
		b = append(b, '=')
		if k < len(row) {
			b = appendShown(b, row[k])
		}
		if len(b) > 300 {
			return string(b[:300]) + "..."
		}
	}
	return string(b)
}
