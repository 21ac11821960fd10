package sluice

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
)

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
}
