// Package mysqlstore is the production dtx store on MySQL or MariaDB.
// A transaction's whole state is one row, so Apply writes a batch of
// mutations (from many global transactions) with one statement per kind,
// and one fsync of the redo log makes all of them durable. Several coordinators can share one database: Claim leases
// due transactions in batches with a single locking UPDATE.
package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/internal/dbconn"
)

// Config says where the store lives.
type Config struct {
	Endpoint sluice.Endpoint
	Database string
	// MaxOpen bounds the connection pool.
	MaxOpen int
}

// DefaultConfig is a local root connection to database "sluice_dtx".
func DefaultConfig() Config {
	return Config{Endpoint: sluice.Endpoint{Host: "127.0.0.1", Port: 3306, User: "root"}, Database: "sluice_dtx", MaxOpen: 32}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Endpoint.Host == "" || c.Endpoint.Port <= 0 || c.Database == "" || c.MaxOpen <= 0 {
		return sluice.Errorf(sluice.ErrConfig, "dtx mysql store", "use mysql://user:password@host:port/db", "host, port and database are required")
	}
	if strings.ContainsAny(c.Database, "`/\\. ") {
		return sluice.Errorf(sluice.ErrConfig, "dtx mysql store", "use a plain database name", "bad database name %q", c.Database)
	}
	return nil
}

// envPassword matches a password given as ${VAR} in a store URL.
var envPassword = regexp.MustCompile(`^(mysql://[^:@/]*):\$\{([A-Za-z_][A-Za-z0-9_]*)\}@`)

// ParseURL reads mysql://user:password@host:port/db. The password need not
// be in the URL, where ps shows it: mysql://user:${VAR}@... reads it from
// the environment, and ?password-file=PATH from a file (its first line).
// Errors never print it.
func ParseURL(raw string) (Config, error) {
	c := DefaultConfig()
	var fromEnv string
	if m := envPassword.FindStringSubmatch(raw); m != nil {
		fromEnv = m[2]
		raw = m[1] + ":-@" + raw[len(m[0]):]
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "mysql" {
		return c, sluice.Errorf(sluice.ErrConfig, "dtx --store", "use mysql://user:password@host:port/db (the password may be ${VAR}, or ?password-file=PATH)", "bad URL")
	}
	if u.User != nil {
		c.Endpoint.User = u.User.Username()
		c.Endpoint.Password, _ = u.User.Password()
	}
	if fromEnv != "" {
		v, ok := os.LookupEnv(fromEnv)
		if !ok {
			return c, sluice.Errorf(sluice.ErrConfig, "dtx --store", "export "+fromEnv+" before starting sluice", "the password's variable ${%s} is not set", fromEnv)
		}
		c.Endpoint.Password = v
	}
	if f := u.Query().Get("password-file"); f != "" {
		if fromEnv != "" || c.Endpoint.Password != "" {
			return c, sluice.Errorf(sluice.ErrConfig, "dtx --store", "give the password once: in the URL, as ${VAR}, or as ?password-file=PATH", "two passwords")
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return c, sluice.Errorf(sluice.ErrConfig, "dtx --store", "make password-file name a file sluice can read", "read password file: %v", err)
		}
		c.Endpoint.Password, _, _ = strings.Cut(strings.TrimRight(string(b), "\r\n"), "\n")
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, "3306"
	}
	c.Endpoint.Host = host
	if c.Endpoint.Port, err = strconv.Atoi(port); err != nil {
		return c, sluice.Errorf(sluice.ErrConfig, "dtx --store", "use mysql://user:password@host:port/db", "bad port %q", port)
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		c.Database = db
	}
	return c, c.Validate()
}

// Store is a dtx.Store on MySQL/MariaDB.
type Store struct {
	db *sql.DB

	ownerMu sync.Mutex
	owner   *ownerSession // with RegisterOwner (owners.go)
}

var schema = []string{
	`CREATE TABLE IF NOT EXISTS dtx_global (
  gid VARCHAR(128) NOT NULL PRIMARY KEY,
  trans_type VARCHAR(16) NOT NULL,
  status VARCHAR(16) NOT NULL,
  owner VARCHAR(128) NOT NULL DEFAULT '',
  lease_until BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms',
  due_at BIGINT NULL COMMENT 'unix ms when recovery may claim it; NULL: never (finished or stuck)',
  finished_at BIGINT NULL COMMENT 'unix ms, for retention',
  doc MEDIUMBLOB NOT NULL COMMENT 'the transaction as JSON',
  KEY due (due_at),
  KEY finished (finished_at),
  KEY owner (owner)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// Only TCC branches are rows here (a saga's or message's are derived from
	// its steps); every branch status lives in the transaction's doc.
	`CREATE TABLE IF NOT EXISTS dtx_branch (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  gid VARCHAR(128) NOT NULL,
  branch_id VARCHAR(128) NOT NULL,
  op VARCHAR(32) NOT NULL,
  url VARCHAR(2048) NOT NULL DEFAULT '',
  bin_data MEDIUMBLOB,
  status VARCHAR(16) NOT NULL,
  create_time BIGINT NOT NULL DEFAULT 0,
  finish_time BIGINT NOT NULL DEFAULT 0,
  UNIQUE KEY gid_branch_op (gid, branch_id, op)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// dtm's key-value entries (topics), kv.go.
	`CREATE TABLE IF NOT EXISTS dtx_kv (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  cat VARCHAR(128) NOT NULL,
  k VARCHAR(128) NOT NULL,
  v MEDIUMTEXT NOT NULL,
  version BIGINT NOT NULL,
  create_time BIGINT NOT NULL COMMENT 'unix ms',
  update_time BIGINT NOT NULL COMMENT 'unix ms',
  UNIQUE KEY cat_k (cat, k)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	ownerSchema,
}

// Open connects, creates the database and tables if missing.
func Open(ctx context.Context, c Config) (*Store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	boot, err := dbconn.Open(ctx, "dtx store", c.Endpoint, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return nil, err
	}
	_, err = boot.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+sluice.QuoteIdent(c.Database)+" DEFAULT CHARACTER SET utf8mb4")
	boot.Close()
	if err != nil {
		return nil, dbconn.Classify(err, "dtx store", c.Endpoint)
	}
	mc := dbconn.Config(c.Endpoint, dbconn.Options{Database: c.Database})
	mc.ClientFoundRows = true // affected rows = matched rows: a precondition that held
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(c.MaxOpen + 1) // +1: the owner session's (owners.go)
	db.SetMaxIdleConns(c.MaxOpen + 1)
	db.SetConnMaxIdleTime(5 * time.Minute)
	for _, s := range schema {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			return nil, dbconn.Classify(err, "dtx store", c.Endpoint)
		}
	}
	return &Store{db: db}, nil
}

// Close closes the pool.
func (s *Store) Close() error {
	s.closeOwner()
	return s.db.Close()
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// columns derives the indexed columns from a transaction.
func columns(g *dtx.Global) (due, finished any) {
	if g.Finished() {
		finished = ms(g.FinishTime)
	} else if g.Stuck == "" && !g.NextCronTime.IsZero() {
		d := g.NextCronTime
		if g.LeaseUntil.After(d) {
			d = g.LeaseUntil
		}
		due = ms(d)
	}
	return due, finished
}

func scanGlobal(doc []byte, owner string, lease int64) (*dtx.Global, error) {
	g := &dtx.Global{}
	if err := json.Unmarshal(doc, g); err != nil {
		return nil, err
	}
	// The columns are authoritative: Claim changes them without the document.
	g.Owner, g.LeaseUntil = owner, fromMS(lease)
	return g, nil
}

// Get returns a transaction and its branches in order. A saga's or
// message's branches are derived from its steps, a TCC's come from
// dtx_branch; their statuses come from the transaction row.
func (s *Store) Get(ctx context.Context, gid string) (*dtx.Global, []dtx.Branch, error) {
	var doc []byte
	var owner string
	var lease int64
	err := s.db.QueryRowContext(ctx, "SELECT doc, owner, lease_until FROM dtx_global WHERE gid=?", gid).Scan(&doc, &owner, &lease)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, dtx.ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	g, err := scanGlobal(doc, owner, lease)
	if err != nil {
		return nil, nil, err
	}
	var bs []dtx.Branch
	if dtx.KeepsBranches(g.TransType) {
		if bs, err = s.tccBranches(ctx, gid); err != nil {
			return nil, nil, err
		}
	} else {
		bs = dtx.GenBranches(g)
		for i := range bs {
			bs[i].CreateTime = g.CreateTime
		}
	}
	g.OverlayStatus(bs)
	return g, bs, nil
}

func (s *Store) tccBranches(ctx context.Context, gid string) ([]dtx.Branch, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT branch_id, op, url, bin_data, status, create_time, finish_time FROM dtx_branch WHERE gid=? ORDER BY id", gid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var bs []dtx.Branch
	for rows.Next() {
		b := dtx.Branch{Gid: gid}
		var ct, ft int64
		if err := rows.Scan(&b.BranchID, &b.Op, &b.URL, &b.BinData, &b.Status, &ct, &ft); err != nil {
			return nil, err
		}
		b.CreateTime, b.FinishTime = fromMS(ct), fromMS(ft)
		bs = append(bs, b)
	}
	return bs, rows.Err()
}

// Claim leases due transactions with one locking UPDATE: concurrent claims
// by other coordinators wait for its row locks and then no longer see the
// rows as due, so no transaction is handed to two of them.
func (s *Store) Claim(ctx context.Context, token string, now, leaseUntil time.Time, limit int) ([]*dtx.Global, error) {
	// Two coordinators claiming at once scan the same due_at range while
	// moving rows in it, which InnoDB may resolve by picking one statement
	// as a deadlock victim. The victim's UPDATE was rolled back whole, so
	// running it again is safe.
	var res sql.Result
	var err error
	for try := 0; ; try++ {
		res, err = s.db.ExecContext(ctx, "UPDATE dtx_global SET owner=?, lease_until=?, due_at=? WHERE due_at <= ? ORDER BY due_at LIMIT ?",
			token, ms(leaseUntil), ms(leaseUntil), ms(now), limit)
		var me *mysql.MySQLError
		if err == nil || try == 4 || !errors.As(err, &me) || me.Number != 1213 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, nil
	}
	return s.query(ctx, "SELECT doc, owner, lease_until FROM dtx_global WHERE owner=?", token)
}

func (s *Store) query(ctx context.Context, q string, args ...any) ([]*dtx.Global, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*dtx.Global
	for rows.Next() {
		var doc []byte
		var owner string
		var lease int64
		if err := rows.Scan(&doc, &owner, &lease); err != nil {
			return nil, err
		}
		g, err := scanGlobal(doc, owner, lease)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// List pages through transactions in gid order.
func (s *Store) List(ctx context.Context, after string, limit int, status, transType string) ([]*dtx.Global, error) {
	q := "SELECT doc, owner, lease_until FROM dtx_global WHERE gid > ?"
	args := []any{after}
	if status != "" {
		q += " AND status=?"
		args = append(args, status)
	}
	if transType != "" {
		q += " AND trans_type=?"
		args = append(args, transType)
	}
	q += " ORDER BY gid LIMIT ?"
	return s.query(ctx, q, append(args, limit)...)
}

// Purge removes finished transactions that finished before `before`.
func (s *Store) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT gid FROM dtx_global WHERE finished_at < ? ORDER BY finished_at LIMIT ?", before.UnixMilli(), limit)
	if err != nil {
		return 0, err
	}
	var gids []any
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return 0, err
		}
		gids = append(gids, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(gids) == 0 {
		return 0, err
	}
	in := "(?" + strings.Repeat(",?", len(gids)-1) + ")"
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "DELETE FROM dtx_branch WHERE gid IN "+in, gids...); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, "DELETE FROM dtx_global WHERE finished_at IS NOT NULL AND gid IN "+in, gids...)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), tx.Commit()
}
