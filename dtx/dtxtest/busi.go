// Package dtxtest is a real HTTP business service for the dtx tests and the
// benchmark: the TransOut/TransIn transfer of dtm's own examples, as saga,
// TCC and message branches, on MariaDB, optionally behind the barrier.
// Request bodies can ask a branch to answer FAILURE, ONGOING or an error, or
// to hang, so that tests can drive every path of the coordinator.
package dtxtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/sluice-db/sluice/dtx/barrier"
)

// Schema is the business database.
const Schema = "dtx_busi"

// Accounts: money moves from OutUser to InUser.
const (
	OutUser = 1
	InUser  = 2
)

// Req is a branch request body.
type Req struct {
	Amount int `json:"amount"`
	// Results maps a handler name (TransIn, TransOutCompensate, TransInTry...)
	// to what it answers instead of doing its work: FAILURE, FAILURE:reason
	// (409 with {"message": reason}), ONGOING, ERROR, or ERRORxN / ONGOINGxN
	// (for the first N calls of that gid, then normal).
	Results map[string]string `json:"results,omitempty"`
	// SleepMS makes a handler wait before answering.
	SleepMS map[string]int `json:"sleep_ms,omitempty"`
	// OutUser and InUser pick the accounts (default OutUser and InUser);
	// the benchmark spreads transfers over many accounts, as dtm's does.
	OutUser int `json:"out_user,omitempty"`
	InUser  int `json:"in_user,omitempty"`
}

// Config tunes the service.
type Config struct {
	// Barrier runs every branch behind the sub-transaction barrier.
	Barrier bool
	// SQLPerBranch is the business statements per branch: pairs of a
	// balance update and a log insert (2 = one pair, 10 = five).
	SQLPerBranch int
	// NoDB makes every branch answer SUCCESS without touching the database
	// (the benchmark's "0 SQL" rows).
	NoDB bool
}

// Busi is a running service.
type Busi struct {
	cfg Config
	db  *sql.DB
	srv *http.Server
	ln  net.Listener
	// URL is the base of the branch URLs, e.g. http://127.0.0.1:4321/api/busi.
	URL string

	mu     sync.Mutex
	errors map[string]int // gid/handler -> injected errors so far
	wg     sync.WaitGroup
	grpc   *grpc.Server // with ServeGRPC
}

// Setup creates the business tables and dtm's barrier table, and gives the
// out account balance and the in account 0.
func Setup(ctx context.Context, db *sql.DB, balance int64) error {
	stmts := []string{
		"CREATE DATABASE IF NOT EXISTS " + Schema,
		"CREATE TABLE IF NOT EXISTS " + Schema + ".user_account (user_id INT PRIMARY KEY, balance BIGINT NOT NULL, trading_balance BIGINT NOT NULL DEFAULT 0)",
		"CREATE TABLE IF NOT EXISTS " + Schema + ".user_log (id BIGINT AUTO_INCREMENT PRIMARY KEY, gid VARCHAR(128) NOT NULL, branch_id VARCHAR(64) NOT NULL, op VARCHAR(32) NOT NULL, handler VARCHAR(64) NOT NULL, user_id INT NOT NULL, amount BIGINT NOT NULL, KEY (gid))",
		"DELETE FROM " + Schema + ".user_account",
		"TRUNCATE " + Schema + ".user_log",
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("busi setup: %w", err)
		}
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO "+Schema+".user_account VALUES (?,?,0),(?,0,0)", OutUser, balance, InUser); err != nil {
		return err
	}
	if err := barrier.CreateTable(ctx, db, barrier.DefaultTable); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "TRUNCATE "+barrier.DefaultTable)
	return err
}

// AddAccounts creates accounts first..last with balance each (existing ones
// are left as they are).
func AddAccounts(ctx context.Context, db *sql.DB, first, last int, balance int64) error {
	for lo := first; lo <= last; lo += 1000 {
		var sb strings.Builder
		sb.WriteString("INSERT IGNORE INTO " + Schema + ".user_account VALUES ")
		for u := lo; u < lo+1000 && u <= last; u++ {
			if u > lo {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "(%d,%d,0)", u, balance)
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			return err
		}
	}
	return nil
}

// Start serves the handlers on a free loopback port.
func Start(db *sql.DB, cfg Config) (*Busi, error) {
	if cfg.SQLPerBranch <= 0 {
		cfg.SQLPerBranch = 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Busi{cfg: cfg, db: db, ln: ln, URL: "http://" + ln.Addr().String() + "/api/busi", errors: map[string]int{}}
	mux := http.NewServeMux()
	for name, h := range b.handlers() {
		mux.HandleFunc("/api/busi/"+name, h)
	}
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = b.srv.Serve(ln)
	}()
	return b, nil
}

// Close stops the service.
func (b *Busi) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.srv.Shutdown(ctx)
	if b.grpc != nil {
		b.grpc.Stop()
	}
	b.wg.Wait()
}

// effect is one business change: delta to balance and trading balance of a user.
type effect struct {
	user           int
	balance, trade int64 // multiplied by the amount
	guard          bool  // refuse (FAILURE) when the available balance would go negative
}

// effects are the branches, by handler name.
var effects = map[string]effect{
	// saga and message
	"TransOut":           {user: OutUser, balance: -1, guard: true},
	"TransOutCompensate": {user: OutUser, balance: 1},
	"TransIn":            {user: InUser, balance: 1},
	"TransInCompensate":  {user: InUser, balance: -1},
	// TCC: try reserves in trading_balance, confirm moves it, cancel releases it
	"TransOutTry":     {user: OutUser, trade: -1, guard: true},
	"TransOutConfirm": {user: OutUser, balance: -1, trade: 1},
	"TransOutCancel":  {user: OutUser, trade: 1},
	"TransInTry":      {user: InUser, trade: 1},
	"TransInConfirm":  {user: InUser, balance: 1, trade: -1},
	"TransInCancel":   {user: InUser, trade: -1},
}

func (b *Busi) handlers() map[string]http.HandlerFunc {
	hs := effects
	out := map[string]http.HandlerFunc{}
	for name, e := range hs {
		out[name] = b.branch(name, e)
	}
	out["QueryPrepared"] = b.queryPrepared
	return out
}

func (b *Busi) branch(name string, e effect) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		code, msg, reason := b.exec(r.Context(), name, e, body, r.URL.Query())
		if reason != "" {
			// A business failure with its reason, as dtm's busi answers
			// "Insufficient balance".
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(map[string]string{"dtm_result": "FAILURE", "message": reason})
			return
		}
		if code != 0 {
			answer(w, code, msg)
		}
	}
}

// exec runs one branch call of any transport: body is the Req, q dtm's
// four parameters. It answers an HTTP status and result (0: the caller
// went away), or a business failure's reason.
func (b *Busi) exec(ctx context.Context, name string, e effect, body []byte, q url.Values) (code int, msg, reason string) {
	var req Req
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return http.StatusBadRequest, "bad body: " + err.Error(), ""
		}
	}
	gid := q.Get("gid")
	if ms := req.SleepMS[name]; ms > 0 {
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return 0, "", ""
		}
	}
	if reason, ok := strings.CutPrefix(req.Results[name], "FAILURE:"); ok {
		return http.StatusConflict, "FAILURE", reason
	}
	if code, msg, ok := b.injected(gid, name, req.Results[name]); ok {
		return code, msg, ""
	}
	if b.cfg.NoDB {
		return http.StatusOK, "SUCCESS", ""
	}
	if e.user == OutUser && req.OutUser != 0 { // e is this call's copy
		e.user = req.OutUser
	} else if e.user == InUser && req.InUser != 0 {
		e.user = req.InUser
	}
	work := func(tx *sql.Tx) error {
		return b.work(ctx, tx, gid, q.Get("branch_id"), q.Get("op"), name, e, int64(req.Amount))
	}
	var err error
	if b.cfg.Barrier {
		var bb *barrier.Barrier
		if bb, err = barrier.FromQuery(q); err == nil {
			err = bb.CallWithDB(ctx, b.db, work)
		}
	} else {
		var tx *sql.Tx
		if tx, err = b.db.BeginTx(ctx, nil); err == nil {
			if err = work(tx); err == nil {
				err = tx.Commit()
			} else {
				_ = tx.Rollback()
			}
		}
	}
	switch {
	case err == nil:
		return http.StatusOK, "SUCCESS", ""
	case errors.Is(err, barrier.ErrFailure):
		return http.StatusConflict, "FAILURE", ""
	}
	return http.StatusInternalServerError, err.Error(), ""
}

// injected applies a result from the request body.
func (b *Busi) injected(gid, name, res string) (int, string, bool) {
	switch {
	case res == "":
		return 0, "", false
	case res == "FAILURE":
		return http.StatusConflict, "FAILURE", true
	case res == "ONGOING":
		return http.StatusTooEarly, "ONGOING", true
	case res == "ERROR":
		return http.StatusInternalServerError, "injected error", true
	case strings.HasPrefix(res, "ERRORx"), strings.HasPrefix(res, "ONGOINGx"):
		kind, count, _ := strings.Cut(res, "x")
		n, _ := strconv.Atoi(count)
		b.mu.Lock()
		defer b.mu.Unlock()
		k := gid + "/" + name
		if b.errors[k] < n {
			b.errors[k]++
			if kind == "ONGOING" {
				return http.StatusTooEarly, "ONGOING", true
			}
			return http.StatusInternalServerError, "injected error", true
		}
	}
	return 0, "", false
}

func (b *Busi) work(ctx context.Context, tx *sql.Tx, gid, branchID, op, name string, e effect, amount int64) error {
	for i := 0; i < b.cfg.SQLPerBranch/2; i++ {
		q := "UPDATE " + Schema + ".user_account SET balance = balance + ?, trading_balance = trading_balance + ? WHERE user_id = ?"
		args := []any{e.balance * amount, e.trade * amount, e.user}
		if e.guard {
			q += " AND balance + trading_balance >= ?"
			args = append(args, amount)
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("insufficient balance: %w", barrier.ErrFailure)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+Schema+".user_log (gid, branch_id, op, handler, user_id, amount) VALUES (?,?,?,?,?,?)",
			gid, branchID, op, name, e.user, amount); err != nil {
			return err
		}
	}
	return nil
}

func (b *Busi) queryPrepared(w http.ResponseWriter, r *http.Request) {
	bb, err := barrier.FromQuery(r.URL.Query())
	if err == nil {
		err = bb.QueryPrepared(r.Context(), b.db)
	}
	switch {
	case err == nil:
		answer(w, http.StatusOK, "SUCCESS")
	case errors.Is(err, barrier.ErrFailure):
		answer(w, http.StatusConflict, "FAILURE")
	default:
		answer(w, http.StatusInternalServerError, err.Error())
	}
}

// MsgLocal runs a message's local transaction (the money leaving OutUser)
// behind the message barrier, as dtm's DoAndSubmit does.
func (b *Busi) MsgLocal(ctx context.Context, gid string, amount int64) error {
	return barrier.ForMsg(gid).CallWithDB(ctx, b.db, func(tx *sql.Tx) error {
		return b.work(ctx, tx, gid, "00", "msg", "MsgLocal", effect{user: OutUser, balance: -1, guard: true}, amount)
	})
}

func answer(w http.ResponseWriter, code int, result string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	key := "dtm_result"
	if code == http.StatusInternalServerError || code == http.StatusBadRequest {
		key = "error"
	}
	_ = json.NewEncoder(w).Encode(map[string]string{key: result})
}

// Balances returns the balance and trading balance of accounts OutUser
// and InUser (tests that name other accounts leave these alone).
func Balances(ctx context.Context, db *sql.DB) (out, in, outTrade, inTrade int64, err error) {
	rows, err := db.QueryContext(ctx, "SELECT user_id, balance, trading_balance FROM "+Schema+".user_account WHERE user_id IN (?, ?)", OutUser, InUser)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id int
		var bal, tr int64
		if err = rows.Scan(&id, &bal, &tr); err != nil {
			return
		}
		if id == OutUser {
			out, outTrade = bal, tr
		} else {
			in, inTrade = bal, tr
		}
	}
	err = rows.Err()
	return
}

// Effects counts the business effects (log rows) per handler of one gid.
func Effects(ctx context.Context, db *sql.DB, gid string) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, "SELECT handler, COUNT(*) FROM "+Schema+".user_log WHERE gid=? GROUP BY handler", gid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var h string
		var n int
		if err := rows.Scan(&h, &n); err != nil {
			return nil, err
		}
		out[h] = n
	}
	return out, rows.Err()
}
