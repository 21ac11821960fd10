package apply

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// ErrTargetRefused: the target refused a row change of the source with an
// error of its own (a duplicate key, a column it lacks, a CHECK
// constraint), so it differs from the source in data or definition.
var ErrTargetRefused = errors.New("the target refused a row change")

// refusedRow are the server errors of a row statement whose text names
// neither the table nor the source transaction (issue 29, N14).
var refusedRow = map[uint16]string{
	1062: "the target already holds a row with this key: it was changed outside sluice, or the table was copied after this change",
	1054: "the target table lacks a column the source's row has",
	4025: "a CHECK constraint of the target refuses the source's row",
}

// rowError names the statement of the failed batch that the server
// refused with me: its table, its row and its source transaction, and a
// fix. The batch is rolled back; its row statements are run again one by
// one in a transaction that is rolled back too, until one fails the same
// way. Nil when me is not such an error.
func (b *batchWriter) rowError(ctx context.Context, me *mysql.MySQLError) error {
	why, ok := refusedRow[me.Number]
	if !ok {
		return nil
	}
	_, _ = b.conn.ExecContext(ctx, "ROLLBACK")
	for i := range b.stmts {
		if b.stmts[i].afters != nil {
			// The batch may have stopped before strict mode was back on.
			if _, err := b.conn.ExecContext(ctx, "SET SESSION sql_mode='"+rowSQLMode+"'"); err != nil {
				return fmt.Errorf("restore the strict sql_mode: %w", err)
			}
			break
		}
	}
	st := b.findFailing(ctx, me.Number)
	if st == nil {
		// Not reproduced alone (a streamed transaction's earlier batches
		// are gone with the rollback): name the batch's tables.
		var names []string
		seen := map[*tableInfo]bool{}
		for i := range b.stmts {
			if in := b.stmts[i].info; !seen[in] {
				seen[in] = true
				names = append(names, in.spec.Name)
			}
		}
		return &sluice.Error{Op: "apply " + b.source(nil),
			Err:  fmt.Errorf("%w: a row change of one of %v: %w", ErrTargetRefused, names, me),
			Hint: refusedHint(me.Number, "", "")}
	}
	var first, last *txn
	switch {
	case len(st.srcs) > 0 && st.srcs[0] != nil:
		first, last = st.srcs[0], st.srcs[len(st.srcs)-1]
	case st.srcFirst != nil:
		first, last = st.srcFirst, st.srcLast
	default:
		first, last = b.src, b.src
	}
	desc := st.info.spec.Name
	if len(st.rows) == 1 {
		desc += " " + describeRow(st.info, st.rows[0])
	} else if st.kind == sluice.Insert && st.n > 1 {
		desc += fmt.Sprintf(" (one of the %d rows of a merged INSERT)", st.n)
	}
	gtid := ""
	op := "apply " + b.source(first)
	if first != last && last != nil {
		op = fmt.Sprintf("apply one of the source transactions %s..%s", first.gtid, last.gtid)
	} else if first != nil {
		gtid = first.gtid
	}
	return &sluice.Error{Op: op,
		Err:  fmt.Errorf("%w: %s of %s: %w; %s", ErrTargetRefused, st.kind, desc, me, why),
		Hint: refusedHint(me.Number, st.info.spec.Name, gtid)}
}

func refusedHint(num uint16, table, gtid string) string {
	if table == "" {
		table = "the table"
	}
	skip := ""
	if gtid != "" {
		skip = "; or, if the target is right as it is, apply what else the transaction changes by hand and run sluice skip --config TASK --gtid " + gtid + " before starting the task again"
	}
	switch num {
	case 1062:
		return "make the target's row with this key in " + table + " the source's (or delete it), then restart the task" + skip
	case 1054:
		return "add the missing column to " + table + " on the target as the source has it (compare SHOW CREATE TABLE on both), then restart the task" + skip
	case 4025:
		return "make the CHECK constraints of " + table + " on the target the source's (or drop the one named), then restart the task" + skip
	}
	return "compare " + table + " on source and target, then restart the task" + skip
}

// findFailing runs the batch's row statements one by one in a transaction
// it rolls back, and returns the first that fails with num.
func (b *batchWriter) findFailing(ctx context.Context, num uint16) *rowStmt {
	defer func() { _, _ = b.conn.ExecContext(context.Background(), "ROLLBACK") }()
	if _, err := b.conn.ExecContext(ctx, "START TRANSACTION"); err != nil {
		return nil
	}
	for i := range b.stmts {
		st := &b.stmts[i]
		if st.end <= st.start {
			continue
		}
		_, err := b.conn.ExecContext(ctx, string(b.buf[st.start:st.end]))
		if err == nil {
			continue
		}
		if isMySQLErr(err, num) {
			return st
		}
		return nil
	}
	return nil
}

// ddlFailedHint is the fix for a DDL statement the target refused (N15).
// A plain restart runs the same statement again, so the hint says what to
// change first, or names the statement's position for sluice replace and
// sluice skip.
func ddlFailedHint(it sluice.StreamItem) string {
	p := it.End.File + ":" + strconv.FormatUint(uint64(it.End.Pos), 10)
	return "make the target accept the statement, then start the task again (it runs the statement again); or, with the task stopped, run sluice replace --config TASK --position " + p +
		" --sql '<a statement the target accepts>' in its place, or make the change on the target by hand and run sluice skip --config TASK --position " + p + ", then start the task again"
}

// fullSQL is a statement for a message: whole, on one line (N16).
func fullSQL(q string) string { return strings.Join(strings.Fields(q), " ") }
