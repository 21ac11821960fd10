// Package decode turns binlog events into the replication stream the
// applier consumes: transactions as Begin / Rows / Commit items and DDL
// items rewritten for the target. Column names and keys come from the
// table map's full row metadata (binlog_row_metadata=FULL) when the source
// sends it, and otherwise from a schema.Tracker that follows the DDL in the
// stream, never from the source's current schema.
package decode

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// Config tells the decoder which tables to keep and how to name them on the
// target. The functions usually come from the task file (task.Config's
// Selected, Route, RouteSchema and SchemaSelected).
type Config struct {
	Flavor         string                                // "mariadb" (default) or "mysql"
	Selected       func(sluice.TableRef) bool            // nil: every non-system table
	Route          func(sluice.TableRef) sluice.TableRef // nil: unchanged
	RouteSchema    func(string) string                   // nil: unchanged
	SchemaSelected func(string) bool                     // nil: every non-system schema
	// GTIDPos is the source's GTID position at the start (MariaDB
	// gtid_binlog_pos form "0-1-100,1-2-5", or a MySQL GTID set). The
	// decoder extends it with each transaction, so every item's End carries
	// the position to resume from.
	GTIDPos string
	// Handle, when set, is asked about each statement (a DDL, by its
	// transaction's GTID and its own end position) and each transaction
	// with rows (by its GTID) whether the user told sluice to skip it or to
	// run other statements instead (sluice skip, sluice replace): the way
	// out of a statement sluice refuses. nil means neither.
	Handle func(gtid string, pos sluice.Position) *Handling
	// OnlineDDL names the online schema change tool run on the source:
	// "gh-ost", "pt-osc", or "none"/"" (the default: tables named like
	// its helpers are ordinary tables). See online.go.
	OnlineDDL string
}

// Handling is what the user told sluice to do with one source statement
// or transaction.
type Handling struct {
	Skip bool
	// SQL replaces the statement: DDL read by the schema tracker and
	// applied to the target, as if the source had run it.
	SQL []string
}

var systemSchemas = map[string]bool{"mysql": true, "information_schema": true, "performance_schema": true, "sys": true}

// DefaultConfig keeps every non-system table under its own name.
func DefaultConfig() Config { return Config{Flavor: "mariadb"} }

// Validate checks the config.
func (c Config) Validate() error {
	switch c.Flavor {
	case "", "mariadb", "mysql":
	default:
		return sluice.Errorf(sluice.ErrConfig, "decoder", "set flavor to mariadb or mysql", "unknown flavor %q", c.Flavor)
	}
	switch c.OnlineDDL {
	case "", OnlineNone, OnlineGhost, OnlinePTOSC:
	default:
		return sluice.Errorf(sluice.ErrConfig, "decoder", "set online-ddl to gh-ost, pt-osc or none", "unknown online-ddl tool %q", c.OnlineDDL)
	}
	return nil
}

// NewParser returns a go-mysql binlog parser set up the way the decoder
// expects its values: TIMESTAMPs as UTC text (the applier's sessions run in
// UTC), DATETIME and DECIMAL as exact text.
func NewParser(flavor string) *replication.BinlogParser {
	p := replication.NewBinlogParser()
	if flavor == "" {
		flavor = "mariadb"
	}
	p.SetFlavor(flavor)
	p.SetTimestampStringLocation(time.UTC)
	p.SetParseTime(false)
	p.SetUseDecimal(false)
	p.SetVerifyChecksum(false)
	p.SetRowsEventDecodeFunc(decodeRowsEvent)
	return p
}

// Decoder turns events into stream items. It is driven by one goroutine.
type Decoder struct {
	cfg     Config
	tracker *schema.Tracker

	inTxn bool
	// micros is the microsecond part of the current Query event's start
	// time (queryMicros).
	micros   uint32
	gtid     string // GTID of the current group
	ddlGroup bool   // the current group is a standalone (DDL) group
	// rowsDDL: the current MariaDB group is flagged DDL but is not
	// standalone: CREATE TABLE ... SELECT, logged as the CREATE TABLE
	// statement followed by the rows, committed together.
	rowsDDL bool
	// groupStart is the GTID position before the current group.
	groupStart string
	ddlTables  []sluice.TableRef // target tables named by the DDL being decoded
	maria      map[uint32]mysql.MariadbGTID
	mysqlSet   *mysql.MysqlGTIDSet
	gtidPos    string // formatted GTID position after the last finished group
	gtidDirty  bool

	ddlText // DDL sent as the source's text, in its session (ddltext.go)

	tables map[string]*tableEntry
	out    []sluice.StreamItem
	// key is entry's scratch buffer for the tables map's key: looking a
	// key up as string(d.key) does not allocate.
	key []byte
	// xas is the state of the XA group being read (xa.go).
	xas xaState
}

// New returns a decoder. tracker may be nil when the source always sends
// full row metadata; it is required to follow DDL without it.
func New(cfg Config, tracker *schema.Tracker) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Flavor == "" {
		cfg.Flavor = "mariadb"
	}
	if tracker == nil {
		tracker = schema.NewTracker()
	}
	d := &Decoder{cfg: cfg, tracker: tracker, maria: map[uint32]mysql.MariadbGTID{}, tables: map[string]*tableEntry{}}
	if err := d.seedGTID(cfg.GTIDPos); err != nil {
		return nil, err
	}
	return d, nil
}

// Tracker is the schema tracker the decoder maintains.
func (d *Decoder) Tracker() *schema.Tracker { return d.tracker }

func (d *Decoder) seedGTID(pos string) error {
	pos = strings.TrimSpace(pos)
	if d.cfg.Flavor == "mysql" {
		s, err := mysql.ParseMysqlGTIDSet(pos)
		if err != nil {
			return sluice.Errorf(sluice.ErrConfig, "decoder", "pass the source's executed GTID set", "bad GTID set %q: %v", pos, err)
		}
		d.mysqlSet = s.(*mysql.MysqlGTIDSet)
		d.gtidPos = d.mysqlSet.String()
		return nil
	}
	if pos != "" {
		for _, part := range strings.Split(pos, ",") {
			g, err := mysql.ParseMariadbGTID(strings.TrimSpace(part))
			if err != nil {
				return sluice.Errorf(sluice.ErrConfig, "decoder", "pass a MariaDB GTID position like 0-1-100", "bad GTID position %q: %v", pos, err)
			}
			d.maria[g.DomainID] = *g
		}
	}
	d.gtidDirty = true
	d.formatGTID()
	return nil
}

func (d *Decoder) formatGTID() string {
	if !d.gtidDirty {
		return d.gtidPos
	}
	d.gtidDirty = false
	if d.cfg.Flavor == "mysql" {
		d.gtidPos = d.mysqlSet.String()
		return d.gtidPos
	}
	if len(d.maria) == 1 {
		for _, g := range d.maria {
			d.gtidPos = mariaGTIDString(&g)
		}
		return d.gtidPos
	}
	doms := make([]int, 0, len(d.maria))
	for k := range d.maria {
		doms = append(doms, int(k))
	}
	sort.Ints(doms)
	parts := make([]string, len(doms))
	for i, k := range doms {
		g := d.maria[uint32(k)]
		parts[i] = g.String()
	}
	d.gtidPos = strings.Join(parts, ",")
	return d.gtidPos
}

// endPos is pos with the GTID position after the current group.
func (d *Decoder) endPos(pos sluice.Position) sluice.Position {
	pos.GTIDSet = d.formatGTID()
	pos.Flavor = d.cfg.Flavor
	return pos
}

// Feed decodes one event. pos is the position just after the event (its
// file and the header's log position). The returned items are valid until
// the next call to Feed.
func (d *Decoder) Feed(ev *replication.BinlogEvent, pos sluice.Position) ([]sluice.StreamItem, error) {
	d.out = d.out[:0]
	ts := ev.Header.Timestamp
	switch e := ev.Event.(type) {
	case *replication.MariadbGTIDEvent:
		d.groupStart = d.formatGTID()
		d.gtid = mariaGTIDString(&e.GTID)
		d.maria[e.GTID.DomainID] = e.GTID
		d.gtidDirty = true
		d.ddlGroup = e.IsStandalone()
		d.rowsDDL = e.IsDDL() && !e.IsStandalone()
		if xa, err := d.xaGroup(ev.RawData, e, pos, ts); err != nil || xa {
			return d.out, err
		}
		if !d.ddlGroup {
			d.begin(ts)
		}
	case *replication.GtidTaggedLogEvent:
		return nil, d.refuseEvent(ev, pos, "a GTID with a tag (MySQL 8.4 gtid tags)",
			"replicate this source without GTID tags (the decoder keeps untagged GTID sets), or copy the tables again from a snapshot taken after it")
	case *replication.GTIDEvent:
		next, err := e.GTIDNext()
		if err != nil {
			return nil, fmt.Errorf("decode GTID event at %s: %w", pos, err)
		}
		d.gtid = next.String()
		if err := d.mysqlSet.Update(d.gtid); err != nil {
			return nil, fmt.Errorf("decode GTID event at %s: %w", pos, err)
		}
		d.gtidDirty = true
		d.ddlGroup, d.rowsDDL = false, false
	case *replication.QueryEvent:
		return d.out, d.query(e, pos, ts)
	case *replication.XIDEvent:
		d.commit(pos, ts)
	case *replication.TableMapEvent:
		// Kept by the parser and reached through each RowsEvent.Table.
		if err := d.compressedTableMap(ev, e, pos); err != nil { // compressed.go
			return nil, err
		}
	case *replication.RowsEvent:
		if ev.Header.EventType == replication.PARTIAL_UPDATE_ROWS_EVENT {
			return nil, d.refuseEvent(ev, pos, "a partial JSON update (binlog_row_value_options=PARTIAL_JSON)",
				"set binlog_row_value_options='' on the source (globally, and in every session that sets it), then copy the changed tables again from a snapshot taken after this position")
		}
		if e.Table != nil {
			// Its rows were not decoded (parse.go): never apply it.
			if err := d.compressedTableMap(ev, e.Table, pos); err != nil {
				return nil, err
			}
		}
		if !d.inTxn {
			d.begin(ts)
		}
		return d.out, d.rows(ev.Header.EventType, e, pos, ts)
	case *replication.TransactionPayloadEvent:
		// MySQL's binlog_transaction_compression: the whole transaction
		// is inside; its events all end at this event's position.
		for _, inner := range e.Events {
			out := append([]sluice.StreamItem(nil), d.out...) // Feed reuses d.out
			items, err := d.Feed(inner, pos)
			if err != nil {
				return nil, err
			}
			d.out = append(out, items...)
		}
	default:
		// Every other event type, typed by go-mysql or not (closed.go):
		// handled exactly or refused, never passed over unknown.
		return d.out, d.other(ev, pos, ts)
	}
	return d.out, nil
}

func (d *Decoder) begin(ts uint32) {
	d.inTxn = true
	d.out = append(d.out, sluice.StreamItem{Kind: sluice.ItemBegin, GTID: d.gtid, Timestamp: ts})
}

func (d *Decoder) commit(pos sluice.Position, ts uint32) {
	if !d.inTxn {
		return
	}
	d.inTxn = false
	d.out = append(d.out, sluice.StreamItem{Kind: sluice.ItemCommit, GTID: d.gtid, Timestamp: ts, End: d.endPos(pos)})
}

// query handles a Query event by its statement's class (classify.go):
// each class is applied exactly, or the task stops and names it.
func (d *Decoder) query(e *replication.QueryEvent, pos sluice.Position, ts uint32) error {
	q := strings.TrimSpace(string(e.Query))
	d.micros, _ = queryMicros(e.StatusVars)
	d.session = querySession(e.StatusVars)
	d.session.SetStatement = setStatementVars(q) // setstatement.go
	cls, name := classify(q)
	if cls == classXA {
		// Before the Handle check: xa.go answers sluice skip and replace
		// of XA statements itself.
		return d.xa(e, q, pos, ts)
	}
	switch cls {
	case classBegin:
		if !d.inTxn {
			d.begin(ts)
		}
		return nil
	case classCommit:
		d.commit(pos, ts)
		return nil
	case classRollback:
		// A group that ends in ROLLBACK (MariaDB keeps one when the
		// transaction cannot be cut from the binlog): a replica runs its
		// statements and rolls them back, so its rows must not stay
		// (ItemRollback, xa.go).
		d.rollback(pos, ts)
		return nil
	case classSavepoint, classRollbackTo, classRelease:
		// Outside a transaction a savepoint has nothing to act on (the
		// server runs SAVEPOINT in autocommit as a no-op).
		if d.inTxn {
			op := map[stmtClass]sluice.SavepointOp{classSavepoint: sluice.SavepointSet, classRollbackTo: sluice.SavepointRollback, classRelease: sluice.SavepointRelease}[cls]
			if name == "" {
				return d.refuseStatement(pos, q, "a savepoint statement without a savepoint name", "report it: sluice cannot read the name; "+skipHint(pos))
			}
			d.savepoint(op, name, ts)
		}
		return nil
	}
	if d.cfg.Handle != nil {
		if h := d.cfg.Handle(d.gtid, pos); h != nil {
			if h.Skip || len(h.SQL) == 0 {
				return nil
			}
			return d.ddl(string(e.Schema), strings.Join(h.SQL, ";\n"), pos, ts, nil)
		}
	}
	switch cls {
	case classDML:
		if d.dmlOutside(string(e.Schema), innerStatement(q)) {
			return nil // changes only tables the task does not replicate
		}
		return d.statementDML(pos, q)
	case classUnknown:
		return d.refuseStatement(pos, q, "a statement sluice does not know",
			"if it changes no replicated table, run "+skipHint(pos)+"; if it does, apply its change to the target by hand first")
	}
	q = innerStatement(q)
	if d.inTxn && !d.ddlGroup {
		switch {
		case d.rowsDDL && cls == classDDL:
			return d.createSelect(string(e.Schema), q, pos, ts)
		case cls == classTemp, cls == classNoData:
			// Known to change no replicated table: a temporary table in a
			// MIXED session, a grant.
			return nil
		}
		return d.refuseStatement(pos, q, "a "+cls.String()+" statement inside a row transaction",
			"apply the statement to the target by hand if it changes a replicated table, then run "+skipHint(pos))
	}
	if cls == classNoData || cls == classTemp {
		return nil // temporary tables are not replicated
	}
	return d.ddl(string(e.Schema), q, pos, ts, nil)
}

// savepoint emits a savepoint statement of the open transaction.
func (d *Decoder) savepoint(op sluice.SavepointOp, name string, ts uint32) {
	if d.cfg.Handle != nil && d.gtid != "" {
		if h := d.cfg.Handle(d.gtid, sluice.Position{}); h != nil && h.Skip {
			return // sluice skip of the transaction: its rows are gone too
		}
	}
	d.out = append(d.out, sluice.StreamItem{Kind: sluice.ItemSavepoint, GTID: d.gtid, Timestamp: ts, Savepoint: sluice.Savepoint{Op: op, Name: name}})
}

// createSelect handles the statement of a MariaDB group that is flagged DDL
// but has rows: CREATE TABLE ... SELECT, which MariaDB logs as a plain
// CREATE TABLE with the full column list, then the selected rows as row
// events, then the commit, all under one GTID. It becomes a DDL item (the
// CREATE, made idempotent as any DDL) followed by a new transaction that
// carries the rows.
//
// Exactly once across a crash: the DDL item ends at this statement, inside
// the group, and its GTID position is the one before the group, since the
// rows are not applied yet. A restart from that checkpoint reads on from
// the rows, which then commit with their own checkpoint; a restart from
// before it runs the CREATE again, which does nothing on a table that
// exists, and then applies the rows once. (A decoder that starts inside the
// group has not seen its GTID: the rows' checkpoint then carries the GTID
// position before the group until the next transaction of that domain.
// Restarts position by file and offset, so nothing is read twice.)
func (d *Decoder) createSelect(defaultSchema, q string, pos sluice.Position, ts uint32) error {
	before := len(d.out)
	if err := d.ddl(defaultSchema, q, pos, ts, &d.groupStart); err != nil {
		var se *sluice.Error
		if errors.As(err, &se) && errors.Is(err, sluice.ErrUnsupportedDDL) {
			// The statement's rows follow it in the same transaction: the
			// plain DDL hint (resume after the statement) would lose them.
			se.Op = "replicate CREATE TABLE ... SELECT (GTID " + d.gtid + ") at " + posString(pos) + " (" + oneLine(q) + ")"
			se.Hint = "create the table on the target by hand and copy its rows as they were after this transaction, then resume from the position after the whole transaction; or exclude the table"
		}
		return err
	}
	if len(d.out) > before {
		// The DDL item closed the applier's open transaction; the rows
		// that follow need their own.
		d.begin(ts)
	}
	return nil
}

// Pos formats a position for messages.
func posString(p sluice.Position) string { return p.File + ":" + strconv.FormatUint(uint64(p.Pos), 10) }
