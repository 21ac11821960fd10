package sluice

import "errors"

// ErrUnsupportedEvent: the binlog holds an event or a statement that
// sluice cannot apply exactly, so the task stops rather than drop it.
var ErrUnsupportedEvent = errors.New("unsupported binlog event")

// StreamKind says what a StreamItem carries.
type StreamKind uint8

const (
	// ItemBegin opens a source transaction. GTID and Timestamp are set.
	ItemBegin StreamKind = iota + 1
	// ItemRows carries the row changes of one row event of the open transaction.
	ItemRows
	// ItemCommit closes the open transaction. End is the position after it.
	ItemCommit
	// ItemDDL is one DDL statement, already rewritten for the target (routes,
	// filters, idempotent form). It is its own transaction; End is set.
	ItemDDL
	// ItemSavepoint is a SAVEPOINT, ROLLBACK TO SAVEPOINT or RELEASE
	// SAVEPOINT inside the open transaction (Savepoint says which; the
	// ROLLBACK that ends a transaction is an ItemRollback). MariaDB writes ROLLBACK TO into a group only
	// when the transaction must keep some of its changes (it touched a
	// non-transactional table); otherwise it cuts the rolled-back rows out
	// of the group itself. A replica runs the statement, so the rows
	// between the SAVEPOINT and the ROLLBACK TO must not stay applied.
	ItemSavepoint
	// ItemXAPrepare closes the open transaction as a prepared XA
	// transaction (XID set): its rows are held, durably, and are applied
	// only by the ItemXACommit of the same XID, or discarded by its
	// ItemXARollback. End is set. When the source says so at the start
	// (MariaDB's GTID event), the Begin of such a transaction carries the
	// XID too, so that a consumer knows its rows are not to be applied yet;
	// MySQL's XA START does not tell a prepare from a one-phase commit.
	ItemXAPrepare
	// ItemXACommit applies the prepared XA transaction XID, as one
	// transaction at this point of the source order (GTID, End set).
	ItemXACommit
	// ItemXARollback discards the prepared XA transaction XID (GTID, End
	// set).
	ItemXARollback
	// ItemRollback closes the open transaction and discards its rows: the
	// source's group ended in ROLLBACK. MariaDB writes such a group for an
	// XA transaction rolled back before XA PREPARE that also changed a
	// non-transactional table (whose changes are a group of their own);
	// a replica runs it and rolls it back. End is set.
	ItemRollback
)

// EndsTxn reports whether an item of kind k ends a source event group:
// it carries End, the position to resume from after it.
func (k StreamKind) EndsTxn() bool {
	switch k {
	case ItemCommit, ItemDDL, ItemXAPrepare, ItemXACommit, ItemXARollback, ItemRollback:
		return true
	}
	return false
}

// SavepointOp says what an ItemSavepoint does.
type SavepointOp uint8

const (
	// SavepointSet: SAVEPOINT name.
	SavepointSet SavepointOp = iota + 1
	// SavepointRollback: ROLLBACK TO SAVEPOINT name.
	SavepointRollback
	// SavepointRelease: RELEASE SAVEPOINT name.
	SavepointRelease
)

// Savepoint is the statement of an ItemSavepoint.
type Savepoint struct {
	Op   SavepointOp
	Name string
}

// SQL is the statement a target runs for s.
func (s Savepoint) SQL() string {
	switch {
	case s.Op == SavepointSet:
		return "SAVEPOINT " + QuoteIdent(s.Name)
	case s.Op == SavepointRollback:
		return "ROLLBACK TO SAVEPOINT " + QuoteIdent(s.Name)
	case s.Op == SavepointRelease:
		return "RELEASE SAVEPOINT " + QuoteIdent(s.Name)
	}
	return ""
}

func (k StreamKind) String() string {
	switch k {
	case ItemBegin:
		return "begin"
	case ItemRows:
		return "rows"
	case ItemCommit:
		return "commit"
	case ItemDDL:
		return "ddl"
	case ItemSavepoint:
		return "savepoint"
	case ItemXAPrepare:
		return "xa-prepare"
	case ItemXACommit:
		return "xa-commit"
	case ItemXARollback:
		return "xa-rollback"
	case ItemRollback:
		return "rollback"
	}
	return "unknown"
}

// StreamItem is one step of the decoded replication stream, in source order.
// A transaction arrives as Begin, any number of Rows, Commit, so that a
// transaction larger than memory can be applied while it is still being
// read. The decoder emits these; the applier consumes them.
type StreamItem struct {
	Kind      StreamKind
	GTID      string // Begin, DDL: the transaction's GTID ("domain-server-seq" on MariaDB)
	Timestamp uint32 // source time of the event, unix seconds
	// Micros is the microsecond part of a DDL statement's start time on
	// the source (ItemDDL): the target runs the statement at that time,
	// Timestamp.Micros, as a replica does, so that values the statement
	// takes from the clock are the source's.
	Micros  uint32
	Changes []RowChange
	// End is the position just after the transaction (Commit, DDL). Its
	// GTIDSet is the source's executed GTID position including this
	// transaction, so it can be used to resume by GTID.
	End Position
	// DDL holds the target statements to run, in order (ItemDDL). Schema is
	// the target default schema to run them in (may be empty).
	DDL    []string
	Schema string
	// SchemaState is the decoder's schema tracker state after this DDL,
	// saved with the checkpoint so that a restart decodes with the schema
	// that was current at the checkpoint (ItemDDL; may be nil).
	SchemaState []byte
	// Source is the source statement of a DDL, for messages.
	Source string
	// Tables are the target tables a DDL names, routed (ItemDDL; empty for
	// statements on whole schemas).
	Tables []TableRef
	// Session is the session context the source ran the DDL in (ItemDDL),
	// from its Query event: the target runs the statement in it, as a
	// native replica does.
	Session DDLSession
	// SameShape says the DDL renames columns among themselves and may leave
	// the table's definition reading as before (ItemDDL): after a crash the
	// target's definition cannot tell whether it ran.
	SameShape bool
	// Savepoint is the statement of an ItemSavepoint.
	Savepoint Savepoint
	// XID names an XA transaction (the XA items, and ItemBegin of a
	// transaction known to end in ItemXAPrepare), in MariaDB's binlog form
	// X'gtrid-hex',X'bqual-hex',formatID.
	XID string
}

// DDLSession is the part of a source session a DDL statement depends on,
// as the Query event's status variables carry it. Zero values mean the
// event did not say.
type DDLSession struct {
	SQLMode    uint64 // the server's sql_mode bits
	HasSQLMode bool
	// Charset holds character_set_client, collation_connection and
	// collation_server as collation ids (0: not sent).
	Charset  [3]uint16
	TimeZone string // time_zone, "" when not sent
	// NoFKChecks: foreign_key_checks was 0; ExplicitTimestamp:
	// explicit_defaults_for_timestamp was 1 (MariaDB only; HasFlags: the
	// flags were sent).
	NoFKChecks        bool
	ExplicitTimestamp bool
	HasFlags          bool
	// AutoIncIncrement and AutoIncOffset are auto_increment_increment and
	// auto_increment_offset (0: not sent).
	AutoIncIncrement, AutoIncOffset uint16
	// SetStatement holds the assignments of a SET STATEMENT var=value[,
	// ...] FOR <DDL> as the source wrote them (without SET STATEMENT and
	// FOR): the DDL runs on the target under them, as on a native replica.
	SetStatement string
}
