package dbconn

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// Flavor is the kind of server at the other end of a connection. It is
// read once when a component connects (VERSION()), and decides the few
// statements whose form differs: TiDB speaks the MySQL protocol and most
// of its SQL, but not all of MariaDB's (see docs/manual/tidb.md).
type Flavor int

const (
	MariaDB Flavor = iota
	MySQL
	TiDB
)

func (f Flavor) String() string {
	switch f {
	case MySQL:
		return "MySQL"
	case TiDB:
		return "TiDB"
	}
	return "MariaDB"
}

// RowQuerier is what ServerFlavor needs: a *sql.DB, *sql.Conn or *sql.Tx.
type RowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ServerFlavor reads the server's flavour and version: "10.11.6" for MariaDB
// 10.11.6-MariaDB-0+deb12u1, "v8.4.0" for TiDB's 8.0.11-TiDB-v8.4.0.
func ServerFlavor(ctx context.Context, q RowQuerier) (Flavor, string, error) {
	var v string
	if err := q.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return MariaDB, "", err
	}
	f, ver := ParseVersion(v)
	return f, ver, nil
}

// ParseVersion splits a VERSION() string into flavour and version.
func ParseVersion(v string) (Flavor, string) {
	if i := strings.Index(v, "-TiDB-"); i >= 0 {
		ver := v[i+len("-TiDB-"):]
		if j := strings.IndexAny(ver, "- "); j > 0 {
			ver = ver[:j]
		}
		return TiDB, ver
	}
	ver := v
	if j := strings.IndexAny(ver, "- "); j > 0 {
		ver = ver[:j]
	}
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return MariaDB, ver
	}
	return MySQL, ver
}

// TiDBTxnTooLarge turns TiDB's "Transaction is too large" (error 8004: the
// transaction passed the server's txn-total-size-limit) into an error with
// its fix; nil for any other error. A chunk of the full copy and a source
// transaction are each one target transaction, rolled back whole.
func TiDBTxnTooLarge(err error, op string) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 8004 {
		return nil
	}
	return &sluice.Error{Op: op,
		Err: fmt.Errorf("%w: the transaction is larger than the TiDB target's transaction size limit (nothing of it was committed): %v", sluice.ErrConfig, err),
		Hint: "raise txn-total-size-limit in the tidb-server config (up to 1 TB; TiDB 8 also bounds it by tidb_mem_quota_query) and restart tidb-server, " +
			"or for the full copy lower rows-per-chunk; then run the same command again"}
}
