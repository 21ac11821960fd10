package mysqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/internal/dbconn"
)

const maxAttempts = 5

// Apply applies a batch. New transactions go in with one multi-row INSERT
// and changed ones with one multi-row conditional UPDATE, each a single
// autocommit statement (one round trip, one redo fsync shared with every
// other session's commit). Only a batch that registers TCC branches, or
// changes one transaction twice, takes a multi-statement transaction.
// Deadlocks and lost connections retry the batch.
func (s *Store) Apply(ctx context.Context, muts []*dtx.Mutation) ([]error, error) {
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		var errs []error
		if needsTx(muts) {
			errs, err = s.applyTx(ctx, muts)
		} else {
			errs, err = s.applyFast(ctx, muts)
		}
		if err == nil {
			return errs, nil
		}
		if !dbconn.IsRetryable(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt*attempt) * 5 * time.Millisecond)
	}
	return nil, fmt.Errorf("dtx mysql store: %w", err)
}

func needsTx(muts []*dtx.Mutation) bool {
	seen := map[string]bool{}
	for _, m := range muts {
		if !m.Create && (m.Global == nil || len(m.NewBranches) > 0) {
			return true
		}
		if seen[m.Gid] {
			return true
		}
		seen[m.Gid] = true
	}
	return false
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *Store) applyFast(ctx context.Context, muts []*dtx.Mutation) ([]error, error) {
	errs := make([]error, len(muts))
	if err := createGlobals(ctx, s.db, muts, errs); err != nil {
		return nil, err
	}
	var idx []int
	for i, m := range muts {
		if !m.Create {
			idx = append(idx, i)
		}
	}
	if err := updateGlobals(ctx, s.db, muts, idx, errs); err != nil {
		return nil, err
	}
	return errs, nil
}

// applyTx applies the mutations one by one in a transaction, locking each
// row it checks; TCC branches are inserted with the check that allows them.
func (s *Store) applyTx(ctx context.Context, muts []*dtx.Mutation) ([]error, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	errs := make([]error, len(muts))
	for i, m := range muts {
		if m.Create {
			if err := createGlobals(ctx, tx, []*dtx.Mutation{m}, errs[i:i+1]); err != nil {
				return nil, err
			}
			continue
		}
		cur := &dtx.Global{Gid: m.Gid}
		err := tx.QueryRowContext(ctx, "SELECT status, owner FROM dtx_global WHERE gid=? FOR UPDATE", m.Gid).Scan(&cur.Status, &cur.Owner)
		if errors.Is(err, sql.ErrNoRows) {
			errs[i] = dtx.ErrNotFound
			continue
		}
		if err != nil {
			return nil, err
		}
		if errs[i] = m.Check(cur); errs[i] != nil {
			continue
		}
		if m.Global != nil {
			if err := updateGlobals(ctx, tx, muts, []int{i}, errs); err != nil {
				return nil, err
			}
		}
		if err := insertBranches(ctx, tx, m.NewBranches); err != nil {
			return nil, err
		}
	}
	return errs, tx.Commit()
}

func rowArgs(g *dtx.Global) ([]any, []byte, error) {
	doc, err := json.Marshal(g)
	if err != nil {
		return nil, nil, err
	}
	due, fin := columns(g)
	return []any{g.Gid, g.TransType, g.Status, g.Owner, ms(g.LeaseUntil), due, fin, doc}, doc, nil
}

// createGlobals inserts the new transactions in one statement; if one of
// them exists it falls back to one insert each to tell which.
func createGlobals(ctx context.Context, db execer, muts []*dtx.Mutation, errs []error) error {
	var idx []int
	for i, m := range muts {
		if m.Create {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	insert := func(idx []int) error {
		q := "INSERT INTO dtx_global (gid, trans_type, status, owner, lease_until, due_at, finished_at, doc) VALUES (?,?,?,?,?,?,?,?)" +
			strings.Repeat(",(?,?,?,?,?,?,?,?)", len(idx)-1)
		args := make([]any, 0, 8*len(idx))
		for _, i := range idx {
			a, _, err := rowArgs(muts[i].Global)
			if err != nil {
				return err
			}
			args = append(args, a...)
		}
		_, err := db.ExecContext(ctx, q, args...)
		return err
	}
	err := insert(idx)
	if !isDuplicate(err) {
		return err
	}
	for _, i := range idx {
		err := insert([]int{i})
		switch {
		case isDuplicate(err):
			errs[i] = dtx.ErrExists
		case err != nil:
			return err
		}
	}
	return nil
}

func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// updateGlobals writes muts[idx] with one UPDATE whose WHERE holds every
// mutation's precondition. When fewer rows matched than mutations, it reads
// the rows back: a row whose doc is the one written was applied, any other
// failed its precondition.
func updateGlobals(ctx context.Context, db execer, muts []*dtx.Mutation, idx []int, errs []error) error {
	if len(idx) == 0 {
		return nil
	}
	cols := []string{"status", "owner", "lease_until", "due_at", "finished_at", "doc"}
	sets := make([][]any, len(cols)) // per column: gid, value pairs
	var where []string
	var whereArgs []any
	docs := make(map[string][]byte, len(idx))
	for _, i := range idx {
		m := muts[i]
		a, doc, err := rowArgs(m.Global)
		if err != nil {
			return err
		}
		docs[m.Gid] = doc
		for c := range cols {
			sets[c] = append(sets[c], m.Gid, a[2+c])
		}
		w := "(gid=?"
		whereArgs = append(whereArgs, m.Gid)
		if len(m.IfStatus) > 0 {
			w += " AND status IN (?" + strings.Repeat(",?", len(m.IfStatus)-1) + ")"
			for _, st := range m.IfStatus {
				whereArgs = append(whereArgs, st)
			}
		}
		if m.IfOwner != "" {
			w += " AND owner=?"
			whereArgs = append(whereArgs, m.IfOwner)
		}
		where = append(where, w+")")
	}
	var q strings.Builder
	var args []any
	q.WriteString("UPDATE dtx_global SET ")
	for c, col := range cols {
		if c > 0 {
			q.WriteString(", ")
		}
		if len(idx) == 1 {
			q.WriteString(col + "=?")
			args = append(args, sets[c][1])
			continue
		}
		q.WriteString(col + "=CASE gid" + strings.Repeat(" WHEN ? THEN ?", len(idx)) + " END")
		args = append(args, sets[c]...)
	}
	q.WriteString(" WHERE " + strings.Join(where, " OR "))
	res, err := db.ExecContext(ctx, q.String(), append(args, whereArgs...)...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); int(n) == len(idx) {
		return nil
	}
	gids := make([]any, len(idx))
	for k, i := range idx {
		gids[k] = muts[i].Gid
	}
	rows, err := db.QueryContext(ctx, "SELECT gid, status, owner, doc FROM dtx_global WHERE gid IN (?"+strings.Repeat(",?", len(gids)-1)+")", gids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cur := map[string]*dtx.Global{}
	curDoc := map[string][]byte{}
	for rows.Next() {
		g := &dtx.Global{}
		var doc []byte
		if err := rows.Scan(&g.Gid, &g.Status, &g.Owner, &doc); err != nil {
			return err
		}
		cur[g.Gid], curDoc[g.Gid] = g, doc
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, i := range idx {
		m := muts[i]
		c := cur[m.Gid]
		switch {
		case c == nil:
			errs[i] = dtx.ErrNotFound
		case bytes.Equal(curDoc[m.Gid], docs[m.Gid]):
			errs[i] = nil
		default:
			if errs[i] = m.Check(c); errs[i] == nil {
				errs[i] = &dtx.ConflictError{Gid: m.Gid, Status: c.Status} // changed meanwhile
			}
		}
	}
	return nil
}

// insertBranches adds registered TCC branches in order; a branch that is
// already there (a retried registerBranch) is left as it is.
func insertBranches(ctx context.Context, db execer, bs []dtx.Branch) error {
	if len(bs) == 0 {
		return nil
	}
	now := time.Now().UnixMilli()
	q := "INSERT IGNORE INTO dtx_branch (gid, branch_id, op, url, bin_data, status, create_time, finish_time) VALUES (?,?,?,?,?,?,?,?)" +
		strings.Repeat(",(?,?,?,?,?,?,?,?)", len(bs)-1)
	args := make([]any, 0, len(bs)*8)
	for _, b := range bs {
		args = append(args, b.Gid, b.BranchID, b.Op, b.URL, b.BinData, b.Status, now, ms(b.FinishTime))
	}
	_, err := db.ExecContext(ctx, q, args...)
	return err
}
