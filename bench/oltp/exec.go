package oltp

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// sqlExec runs statements on one dedicated connection with one server-side
// prepared statement per table and kind, as sysbench's thread_init does.
//
// It talks to the driver directly rather than through database/sql: the
// pool's locking, per-query allocations and value conversions cost the
// client a third of the CPU per point select, and on a machine where client
// and server share cores that shows up as lower QPS than sysbench's C client
// reaches. The statements and their protocol (COM_STMT_PREPARE and
// COM_STMT_EXECUTE, binary rows) are the same either way.
type sqlExec struct {
	connector driver.Connector
	conn      driver.Conn
	kinds     []Kind
	tables    int
	stmts     [][numKinds]driver.Stmt // [table-1][kind]
	inTrx     bool
	args      []driver.NamedValue
	dest      []driver.Value
	// counts of the current event's successful statements
	reads, writes, other int64
}

func newExec(ctx context.Context, connector driver.Connector, kinds []Kind, tables int) (*sqlExec, error) {
	x := &sqlExec{connector: connector, kinds: kinds, tables: tables, dest: make([]driver.Value, 4)}
	return x, x.connect(ctx)
}

// connect opens a fresh connection and prepares the statements.
func (x *sqlExec) connect(ctx context.Context) error {
	conn, err := x.connector.Connect(ctx)
	if err != nil {
		return err
	}
	x.conn = conn
	x.inTrx = false
	x.stmts = make([][numKinds]driver.Stmt, x.tables)
	pc, _ := conn.(driver.ConnPrepareContext)
	for t := 1; t <= x.tables; t++ {
		for _, k := range x.kinds {
			if !k.Prepared() {
				continue
			}
			var s driver.Stmt
			if pc != nil {
				s, err = pc.PrepareContext(ctx, k.SQL(t))
			} else {
				s, err = conn.Prepare(k.SQL(t))
			}
			if err != nil {
				x.close(true)
				return err
			}
			x.stmts[t-1][k] = s
		}
	}
	return nil
}

// close closes the statements (sysbench's close_statements) and the
// connection. A broken connection (bad) is closed without closing the
// statements on the server.
func (x *sqlExec) close(bad bool) {
	if !bad {
		for _, ts := range x.stmts {
			for _, s := range ts {
				if s != nil {
					s.Close()
				}
			}
		}
	}
	x.stmts = nil
	if x.conn != nil {
		x.conn.Close()
		x.conn = nil
	}
}

func (x *sqlExec) text(ctx context.Context, q string) error {
	if ec, ok := x.conn.(driver.ExecerContext); ok {
		_, err := ec.ExecContext(ctx, q, nil)
		return err
	}
	return errors.New("driver cannot execute plain statements")
}

func (x *sqlExec) Exec(ctx context.Context, k Kind, table int, args ...any) error {
	var err error
	switch k {
	case Begin, Commit:
		err = x.text(ctx, k.SQL(0))
		if err == nil {
			x.inTrx = k == Begin
		}
	case InsertText:
		err = x.text(ctx, fmt.Sprintf(k.SQL(table), args...))
	default:
		s := x.stmts[table-1][k]
		if s == nil {
			return fmt.Errorf("statement %s for sbtest%d was not prepared", k, table)
		}
		x.args = x.args[:0]
		for i, a := range args {
			x.args = append(x.args, driver.NamedValue{Ordinal: i + 1, Value: a})
		}
		if k.Class() == Read {
			err = x.query(ctx, s)
		} else {
			_, err = s.(driver.StmtExecContext).ExecContext(ctx, x.args)
		}
	}
	if err != nil {
		return &stmtError{kind: k, table: table, err: err}
	}
	switch k.Class() {
	case Read:
		x.reads++
	case Write:
		x.writes++
	default:
		x.other++
	}
	return nil
}

// query runs a prepared SELECT and reads every row, as sysbench fetches
// each result set in full.
func (x *sqlExec) query(ctx context.Context, s driver.Stmt) error {
	rows, err := s.(driver.StmtQueryContext).QueryContext(ctx, x.args)
	if err != nil {
		return err
	}
	if n := len(rows.Columns()); n > len(x.dest) {
		x.dest = make([]driver.Value, n)
	}
	dest := x.dest[:len(rows.Columns())]
	for {
		if err = rows.Next(dest); err != nil {
			break
		}
	}
	cerr := rows.Close()
	if err == io.EOF {
		err = nil
	}
	if err == nil {
		err = cerr
	}
	return err
}

// rollback ends a transaction an error interrupted; it reports whether the
// connection is still usable.
func (x *sqlExec) rollback(ctx context.Context) bool {
	if !x.inTrx {
		return true
	}
	err := x.text(ctx, "ROLLBACK")
	x.inTrx = false
	return err == nil
}

type stmtError struct {
	kind  Kind
	table int
	err   error
}

func (e *stmtError) Error() string {
	if e.table > 0 {
		return fmt.Sprintf("%s on sbtest%d: %v", e.kind, e.table, e.err)
	}
	return fmt.Sprintf("%s: %v", e.kind, e.err)
}

func (e *stmtError) Unwrap() error { return e.err }

type errClass int

const (
	errFatal   errClass = iota // stop the run
	errIgnored                 // count, roll back, go on (sysbench --mysql-ignore-errors)
	errLost                    // count, reconnect, go on
)

// IgnoreSet is sysbench's --mysql-ignore-errors: server error numbers that
// are counted and skipped instead of ending the run; All ignores every
// server error.
type IgnoreSet struct {
	All   bool
	Codes map[uint16]bool
}

// DefaultIgnore is sysbench's default: deadlock (1213), record changed (1020)
// and lock wait timeout (1205).
func DefaultIgnore() IgnoreSet {
	return IgnoreSet{Codes: map[uint16]bool{1213: true, 1020: true, 1205: true}}
}

// lostCodes are the client errors that mean the connection is gone.
var lostCodes = map[uint16]bool{2006: true, 2013: true, 2055: true, 2011: true, 1053: true, 1927: true, 4031: true}

func classifyErr(err error, ig IgnoreSet) errClass {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch {
		case lostCodes[me.Number]:
			return errLost
		case ig.All || ig.Codes[me.Number]:
			return errIgnored
		}
		return errFatal
	}
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, sql.ErrConnDone) || errors.As(err, &ne) {
		return errLost
	}
	return errFatal
}
