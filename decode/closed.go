package decode

import (
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// The closed world of event types. Feed handles the events that carry
// data (GTID, Query, XID, table map, rows, MySQL's transaction payload);
// other places every remaining type a MariaDB 10.11 or MySQL source can
// write (MariaDB's sql/log_event.h, enum Log_event_type) into one of two
// lists, and refuses the rest by name. A type added by a later server is
// then a visible stop, not a silent divergence.

// other handles an event Feed has no case for, by its header's type.
func (d *Decoder) other(ev *replication.BinlogEvent, pos sluice.Position, ts uint32) error {
	t := ev.Header.EventType
	switch t {
	case replication.FORMAT_DESCRIPTION_EVENT, replication.ROTATE_EVENT, replication.STOP_EVENT,
		replication.HEARTBEAT_EVENT, replication.HEARTBEAT_LOG_EVENT_V2,
		replication.PREVIOUS_GTIDS_EVENT, replication.MARIADB_GTID_LIST_EVENT,
		replication.MARIADB_BINLOG_CHECKPOINT_EVENT:
		// Where the binlog is and what it holds, no change: the reader
		// and the relay keep positions and GTID sets.
		return nil
	case replication.MARIADB_ANNOTATE_ROWS_EVENT, replication.ROWS_QUERY_EVENT, replication.IGNORABLE_EVENT:
		// Comments on the row events that follow (the statement's text).
		// The relay reader may pass them over unread (a nil Event).
		return nil
	case replication.VIEW_CHANGE_EVENT, replication.TRANSACTION_CONTEXT_EVENT:
		// MySQL group replication's membership change and certification
		// records, in a transaction of their own: no row changes.
		return nil
	case replication.MARIADB_START_ENCRYPTION_EVENT:
		// The source encrypts its binlog files; it sends the events
		// decrypted over the replication protocol, so what follows in
		// the relay is plain.
		return nil
	case replication.INTVAR_EVENT, replication.RAND_EVENT, replication.USER_VAR_EVENT:
		// Session values (LAST_INSERT_ID, INSERT_ID, the RAND seed, a
		// user variable) for the next statement logged as text. Only a
		// statement that writes rows reads them, and such a statement is
		// refused (statementDML): nothing to apply them to.
		return nil
	case replication.BEGIN_LOAD_QUERY_EVENT, replication.APPEND_BLOCK_EVENT, replication.DELETE_FILE_EVENT:
		// The file of a LOAD DATA logged as a statement (and its removal
		// when the LOAD failed): the Execute_load_query event that uses
		// it is refused.
		return nil
	case replication.EXECUTE_LOAD_QUERY_EVENT:
		if d.cfg.Handle != nil {
			if h := d.cfg.Handle(d.gtid, pos); h != nil && h.Skip {
				return nil
			}
		}
		// go-mysql does not decode the statement's text.
		return d.statementDML(pos, "LOAD DATA ... (Execute_load_query)")
	case replication.XA_PREPARE_LOG_EVENT:
		e, ok := ev.Event.(*replication.GenericEvent)
		if !ok {
			return fmt.Errorf("decode XA PREPARE at %s: event decoded as %T", posString(pos), ev.Event)
		}
		return d.xaPrepare(e, pos, ts)
	case replication.INCIDENT_EVENT:
		return d.refuseEvent(ev, pos, "an incident: the source wrote that its binlog lacks changes (e.g. LOST_EVENTS)",
			"the source's binlog is incomplete here, as a MariaDB replica would stop too: copy the tables again (sluice migrate --mode all) from a snapshot taken after this position")
	}
	if ev.Header.Flags&replication.LOG_EVENT_IGNORABLE_F != 0 {
		// The source marked it as safe for a replica that does not know
		// it (MySQL's ignorable events).
		return nil
	}
	return d.refuseEvent(ev, pos, fmt.Sprintf("a binlog event of type %s (%d), which sluice does not know", t, byte(t)),
		"a MariaDB replica may handle it; report it, and copy the tables again from a snapshot taken after this position")
}

// refuseEvent is the stop for an event sluice cannot apply exactly.
func (d *Decoder) refuseEvent(ev *replication.BinlogEvent, pos sluice.Position, what, hint string) error {
	return &sluice.Error{
		Op:   fmt.Sprintf("replicate the %s event ending at %s (GTID %s)", ev.Header.EventType, posString(pos), d.gtidOrNone()),
		Err:  fmt.Errorf("%w: %s", sluice.ErrUnsupportedEvent, what),
		Hint: hint,
	}
}

// refuseStatement is the stop for a statement sluice cannot apply exactly;
// it quotes the whole statement on one line.
func (d *Decoder) refuseStatement(pos sluice.Position, q, what, hint string) error {
	return &sluice.Error{
		Op:   fmt.Sprintf("replicate the statement at %s (GTID %s): %s", posString(pos), d.gtidOrNone(), oneLine(q)),
		Err:  fmt.Errorf("%w: %s", sluice.ErrUnsupportedEvent, what),
		Hint: hint,
	}
}

// statementDML refuses a row change logged as a statement (a session in
// binlog_format STATEMENT or MIXED): the binlog holds the statement, not
// its rows, and running it again on the target may change other rows
// than on the source.
func (d *Decoder) statementDML(pos sluice.Position, q string) error {
	return &sluice.Error{
		Op: fmt.Sprintf("replicate the statement at %s (GTID %s): %s", posString(pos), d.gtidOrNone(), oneLine(q)),
		Err: fmt.Errorf("%w: a row change logged as a statement (the session ran with binlog_format STATEMENT or MIXED), so the binlog holds no rows",
			sluice.ErrBinlogFormat),
		Hint: "make every session write rows (SET GLOBAL binlog_format=ROW, in my.cnf too, and no SET SESSION binlog_format in the application), " +
			"apply this statement's change to the target by hand, then run " + skipHint(pos) + " and start the task again",
	}
}

// skipHint is the command that goes past the statement at pos.
func skipHint(pos sluice.Position) string {
	return "sluice skip --config TASK --position " + posString(pos)
}

func (d *Decoder) gtidOrNone() string {
	if d.gtid == "" {
		return "none"
	}
	return d.gtid
}

// oneLine is q with its runs of white space made one space, whole.
func oneLine(q string) string {
	return strings.Join(strings.Fields(q), " ")
}

// partialImage refuses a row event without every column (N17). sluice
// checks the source's global binlog_row_image at the start, so the image
// came from a session that set MINIMAL or NOBLOB for itself (or from a
// global changed since): the fix is in the sessions, and the transaction
// itself can only be skipped after applying it by hand, since its rows
// lack the columns it did not change.
func (d *Decoder) partialImage(table sluice.TableRef, pos sluice.Position) error {
	skip := "sluice skip --config TASK --gtid " + d.gtid
	if d.gtid == "" {
		skip = "copy the table again"
	}
	return &sluice.Error{
		Op:  fmt.Sprintf("decode rows of %s in transaction %s at %s", table, d.gtidOrNone(), posString(pos)),
		Err: fmt.Errorf("%w: the row event lacks columns (binlog_row_image MINIMAL or NOBLOB)", sluice.ErrBinlogFormat),
		Hint: "the session that wrote this transaction set binlog_row_image for itself even if the global is FULL: remove SET SESSION binlog_row_image " +
			"(and any init_connect or connection pool setting of it) from the application, SET GLOBAL binlog_row_image=FULL and keep it in my.cnf, reconnect the sessions; " +
			"then apply this transaction's changes to the target by hand and run " + skip + " before starting the task again",
	}
}

// unsupportedHint is the fix for a DDL statement the decoder refuses. A
// kind of change the schema tracker never replicates (partitioning,
// tablespaces) would be refused again in sluice replace, which reads its
// statements the same way: only skip is offered for those (N16).
func unsupportedHint(pos sluice.Position, q string) string {
	p := posString(pos)
	for _, w := range words(q, 1<<16) {
		switch w.w {
		case "PARTITION", "PARTITIONS", "PARTITIONING", "TABLESPACE":
			return "sluice does not replicate this kind of change (partitioning and tablespaces leave columns and keys as they are): with the task stopped, " +
				"make the change on the target by hand if you want it there, run sluice skip --config TASK --position " + p + ", then start the task again"
		}
	}
	return "with the task stopped, run sluice replace --config TASK --position " + p + " --sql '<the equivalent DDL>' (or sluice skip --config TASK --position " + p + " after making the change on the target by hand), then start the task again; or exclude the table"
}

// dmlOutside reports whether a row change logged as a statement names only
// tables outside the replicated set, so that a task that does not
// replicate them can pass over it. A statement sluice cannot parse, or
// one that names a replicated table, is not outside. (A trigger or stored
// function it fires that writes a replicated table is not seen:
// docs/manual/apply.md says so.)
func (d *Decoder) dmlOutside(defaultSchema, q string) bool {
	stmts, err := d.tracker.Parse(q)
	if err != nil || len(stmts) == 0 {
		return false
	}
	var c tableNames
	for _, st := range stmts {
		st.Accept(&c)
	}
	if len(c.names) == 0 {
		return false // SELECT f(), CALL p(): no table, but it may write one
	}
	for _, tn := range c.names {
		ref := schema.RefOf(tn, defaultSchema)
		if ref.Schema == "" {
			return false
		}
		if !systemSchemas[strings.ToLower(ref.Schema)] && (d.cfg.Selected == nil || d.cfg.Selected(ref)) {
			return false
		}
	}
	return true
}

// tableNames collects every table name of a statement.
type tableNames struct{ names []*ast.TableName }

func (c *tableNames) Enter(n ast.Node) (ast.Node, bool) {
	if tn, ok := n.(*ast.TableName); ok {
		c.names = append(c.names, tn)
	}
	return n, false
}

func (c *tableNames) Leave(n ast.Node) (ast.Node, bool) { return n, true }
