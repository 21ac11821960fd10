// Package barrier is the sub-transaction barrier a business service calls
// inside its local transaction. It gives idempotency (a repeated call does
// nothing), null compensation (a cancel or compensate whose try or action
// never ran does nothing) and anti-hanging (a try or action that arrives
// after its cancel or compensate does nothing). It uses dtm's barrier table
// with dtm's semantics, so a service can move between dtm and sluice.
package barrier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultTable is dtm's barrier table.
const DefaultTable = "dtm_barrier.barrier"

// Ops and ids dtm uses for 2-phase messages.
const (
	msgBranch  = "00"
	msgOp      = "msg"
	msgBarrier = "01"
	opRollback = "rollback"
)

var (
	// ErrFailure is what a business function returns to make the branch
	// answer FAILURE (HTTP 409); ErrFailure from QueryPrepared means the
	// message's local transaction rolled back.
	ErrFailure = errors.New("FAILURE")
	// ErrDuplicated: a message's local transaction ran twice, or after its
	// query-prepared check already decided it rolled back.
	ErrDuplicated = errors.New("DUPLICATED")
)

// originOp maps a rollback op to the op it undoes.
var originOp = map[string]string{"cancel": "try", "compensate": "action", opRollback: "action"}

// Barrier is one branch call's barrier.
type Barrier struct {
	TransType string
	Gid       string
	BranchID  string
	Op        string
	// Table is the barrier table, "db.table" (default dtm's).
	Table     string
	barrierID int
}

// New builds the barrier of one branch call.
func New(transType, gid, branchID, op string) (*Barrier, error) {
	b := &Barrier{TransType: transType, Gid: gid, BranchID: branchID, Op: op, Table: DefaultTable}
	if transType == "" || gid == "" || branchID == "" || op == "" {
		return nil, fmt.Errorf("barrier: incomplete branch info: trans_type=%q gid=%q branch_id=%q op=%q", transType, gid, branchID, op)
	}
	return b, nil
}

// FromQuery builds the barrier from the query string the coordinator sends
// with every branch call (trans_type, gid, branch_id, op).
func FromQuery(q url.Values) (*Barrier, error) {
	get := func(k string) string {
		return strings.NewReplacer("\n", "", "\r", "", ";", "").Replace(q.Get(k))
	}
	return New(get("trans_type"), get("gid"), get("branch_id"), get("op"))
}

func (b *Barrier) String() string {
	return fmt.Sprintf("barrier %s %s %s %s", b.TransType, b.Gid, b.BranchID, b.Op)
}

// Execer is what insert needs: a *sql.Tx or a *sql.DB.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (b *Barrier) table() string {
	if b.Table == "" {
		return DefaultTable
	}
	return b.Table
}

// insert adds a barrier row unless it exists, and says whether it did.
func (b *Barrier) insert(ctx context.Context, db Execer, branchID, op, barrierID, reason string) (int64, error) {
	if op == "" {
		return 0, nil
	}
	res, err := db.ExecContext(ctx, "INSERT IGNORE INTO "+b.table()+"(trans_type, gid, branch_id, op, barrier_id, reason) VALUES (?,?,?,?,?,?)",
		b.TransType, b.Gid, branchID, op, barrierID, reason)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Call runs fn in tx behind the barrier and commits tx (or rolls it back if
// anything failed). fn runs at most once per (gid, branch, op), never for a
// null compensation, and never for a try/action that arrives after its
// rollback. Each Call on the same Barrier is a separate barrier id, as in dtm.
func (b *Barrier) Call(ctx context.Context, tx *sql.Tx, fn func(*sql.Tx) error) (err error) {
	b.barrierID++
	bid := fmt.Sprintf("%02d", b.barrierID)
	defer func() {
		if err != nil {
			_ = tx.Rollback()
			return
		}
		err = tx.Commit()
	}()
	// The origin row is written by a rollback op on behalf of the op it
	// undoes: if that op comes later it finds its row taken and does nothing.
	originAffected, oerr := b.insert(ctx, tx, b.BranchID, originOp[b.Op], bid, b.Op)
	currentAffected, err := b.insert(ctx, tx, b.BranchID, b.Op, bid, b.Op)
	if err == nil && b.Op == msgOp && currentAffected == 0 {
		return ErrDuplicated
	}
	if err == nil {
		err = oerr
	}
	if err != nil {
		return err
	}
	if originOp[b.Op] != "" && originAffected > 0 { // null compensation
		return nil
	}
	if currentAffected == 0 { // repeated, or hanging after its rollback
		return nil
	}
	return fn(tx)
}

// CallWithDB begins a transaction on db and runs Call in it. Racing
// duplicates of one branch call can deadlock on the barrier's unique key;
// InnoDB then rolls the loser back whole, and it is retried here (as the
// coordinator would retry it) a few times.
func (b *Barrier) CallWithDB(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	for attempt := 1; ; attempt++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		id := b.barrierID
		err = b.Call(ctx, tx, fn)
		var me *mysql.MySQLError
		if attempt >= 5 || !errors.As(err, &me) || me.Number != 1213 {
			return err
		}
		b.barrierID = id
		time.Sleep(time.Duration(attempt) * time.Millisecond)
	}
}

// QueryPrepared answers a 2-phase message's back-check: nil if the local
// transaction committed, ErrFailure if it rolled back (or never ran: from
// now on it cannot commit, since its barrier row is taken).
func (b *Barrier) QueryPrepared(ctx context.Context, db *sql.DB) error {
	_, err := b.insert(ctx, db, msgBranch, msgOp, msgBarrier, opRollback)
	if err != nil {
		return err
	}
	var reason string
	err = db.QueryRowContext(ctx, "SELECT reason FROM "+b.table()+" WHERE gid=? AND branch_id=? AND op=? AND barrier_id=?",
		b.Gid, msgBranch, msgOp, msgBarrier).Scan(&reason)
	if err != nil {
		return err
	}
	if reason == opRollback {
		return ErrFailure
	}
	return nil
}

// ForMsg is the barrier a message's own local transaction runs behind
// (dtm's DoAndSubmit), so that QueryPrepared can tell if it committed.
func ForMsg(gid string) *Barrier {
	return &Barrier{TransType: "msg", Gid: gid, BranchID: msgBranch, Op: msgOp, Table: DefaultTable}
}

// CreateTable creates dtm's barrier table (and its database) if missing.
func CreateTable(ctx context.Context, db *sql.DB, table string) error {
	if table == "" {
		table = DefaultTable
	}
	if i := strings.IndexByte(table, '.'); i > 0 {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+table[:i]); err != nil {
			return err
		}
	}
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
  id bigint(22) PRIMARY KEY AUTO_INCREMENT,
  trans_type varchar(45) default '',
  gid varchar(128) default '',
  branch_id varchar(128) default '',
  op varchar(45) default '',
  barrier_id varchar(45) default '',
  reason varchar(45) default '' comment 'the branch type who insert this record',
  create_time datetime DEFAULT now(),
  update_time datetime DEFAULT now(),
  key(create_time),
  key(update_time),
  UNIQUE key(gid, branch_id, op, barrier_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`)
	return err
}
