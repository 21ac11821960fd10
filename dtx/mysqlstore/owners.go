package mysqlstore

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A coordinator's leases outlive it: after a kill -9 its in-flight
// transactions waited out the whole lease (30 s by default) before anyone
// resumed them (issue 30). Each coordinator therefore holds a named lock
// (GET_LOCK) on a connection of its own for as long as it runs, and lists
// itself in dtx_owner. The server releases the lock the moment that
// session ends, which a killed process's closed socket ends at once; any
// coordinator that finds a listed owner's lock free (IS_USED_LOCK is NULL)
// makes that owner's leased transactions due now, and recovery claims
// them. A coordinator restarted under the same --instance is a new owner
// (the incarnation carries a random part), so it resumes its predecessor's
// transactions the same way.

const ownerSchema = `CREATE TABLE IF NOT EXISTS dtx_owner (
  incarnation VARCHAR(128) NOT NULL PRIMARY KEY COMMENT 'the prefix of the owner tokens of one coordinator process',
  lock_name VARCHAR(64) NOT NULL COMMENT 'the GET_LOCK it holds while it runs',
  started BIGINT NOT NULL COMMENT 'unix ms'
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// ownerKeepEvery is how often the owner's session is checked, and
// re-established if it broke.
const ownerKeepEvery = 5 * time.Second

type ownerSession struct {
	incarnation, lock string
	mu                sync.Mutex
	conn              *sql.Conn
	stop              chan struct{}
	done              chan struct{}
}

func lockName(incarnation string) string {
	sum := sha1.Sum([]byte(incarnation))
	return "sluice_dtx_" + hex.EncodeToString(sum[:]) // 51 bytes: within GET_LOCK's 64
}

// RegisterOwner implements dtx.SessionLeases: it takes the incarnation's
// lock on a connection of its own and lists it, and keeps the session up
// until Close.
func (s *Store) RegisterOwner(ctx context.Context, incarnation string) error {
	o := &ownerSession{incarnation: incarnation, lock: lockName(incarnation), stop: make(chan struct{}), done: make(chan struct{})}
	if err := o.connect(ctx, s.db); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "REPLACE INTO dtx_owner (incarnation, lock_name, started) VALUES (?,?,?)",
		incarnation, o.lock, time.Now().UnixMilli()); err != nil {
		o.close()
		return err
	}
	s.ownerMu.Lock()
	s.owner = o
	s.ownerMu.Unlock()
	go o.keep(s.db)
	return nil
}

// connect opens the session and takes the lock.
func (o *ownerSession) connect(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", o.lock).Scan(&got); err != nil {
		conn.Close()
		return err
	}
	if !got.Valid || got.Int64 != 1 {
		conn.Close()
		return fmt.Errorf("dtx owner lock %s is held by another session (another process with the same incarnation?)", o.lock)
	}
	o.mu.Lock()
	o.conn = conn
	o.mu.Unlock()
	return nil
}

// keep checks the session every ownerKeepEvery and takes the lock again on
// a new one if it broke (meanwhile others may have resumed this process's
// transactions; its fenced writes then fail, as after a lapsed lease).
func (o *ownerSession) keep(db *sql.DB) {
	defer close(o.done)
	t := time.NewTicker(ownerKeepEvery)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ownerKeepEvery)
		o.mu.Lock()
		conn := o.conn
		o.mu.Unlock()
		var mine sql.NullBool
		err := conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", o.lock).Scan(&mine)
		if err != nil || !mine.Valid || !mine.Bool {
			conn.Close()
			_ = o.connect(ctx, db) // tried again at the next tick if it fails
		}
		cancel()
	}
}

func (o *ownerSession) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn != nil {
		o.conn.Close() // the session ends, and the lock with it
		o.conn = nil
	}
}

// likePrefix is a LIKE pattern for the strings that start with p.
func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// ReleaseDeadOwners implements dtx.SessionLeases: the leased transactions
// of every listed owner whose session has ended become due at now, and
// the owner is unlisted. It returns how many transactions it released.
func (s *Store) ReleaseDeadOwners(ctx context.Context, now time.Time) (int, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT incarnation FROM dtx_owner WHERE IS_USED_LOCK(lock_name) IS NULL")
	if err != nil {
		return 0, err
	}
	var dead []string
	for rows.Next() {
		var inc string
		if err := rows.Scan(&inc); err != nil {
			rows.Close()
			return 0, err
		}
		dead = append(dead, inc)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	total := 0
	for _, inc := range dead {
		n, err := s.releaseLeases(ctx, inc, now)
		if err != nil {
			return total, err
		}
		total += n
		if _, err := s.db.ExecContext(ctx, "DELETE FROM dtx_owner WHERE incarnation=? AND IS_USED_LOCK(lock_name) IS NULL", inc); err != nil {
			return total, err
		}
	}
	return total, nil
}

// releaseLeases makes the transactions leased by an incarnation's tokens
// due at now.
func (s *Store) releaseLeases(ctx context.Context, incarnation string, now time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE dtx_global SET due_at=?, lease_until=? WHERE owner LIKE ? ESCAPE '\\' AND due_at > ?`,
		ms(now), ms(now), likePrefix(incarnation+"-"), ms(now))
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// closeOwner ends the owner's session on a clean close: its transactions
// are due at once for the others (its drivers have stopped), and it is
// unlisted.
func (s *Store) closeOwner() {
	s.ownerMu.Lock()
	o := s.owner
	s.owner = nil
	s.ownerMu.Unlock()
	if o == nil {
		return
	}
	close(o.stop)
	<-o.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = s.releaseLeases(ctx, o.incarnation, time.Now())
	_, _ = s.db.ExecContext(ctx, "DELETE FROM dtx_owner WHERE incarnation=?", o.incarnation)
	o.close()
}
