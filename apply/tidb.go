package apply

import (
	"errors"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
)

// TiDB as a target (docs/manual/tidb.md). The applier's statements are
// TiDB's too: the versioned comment that turns MariaDB's CHECK constraint
// checks off is a plain comment there, and the lock monitor's
// INNODB_LOCK_WAITS query fails, so it rolls waiting workers back blindly
// (lockwait.go). What differs is a limit: TiDB refuses a transaction
// larger than its txn-total-size-limit (error 8004), and a source
// transaction is applied as one target transaction, however large.

// tidbLimit gives TiDB's transaction size error its fix; any other error is
// returned as it is.
func tidbLimit(err error) error {
	var se *sluice.Error
	if err == nil || errors.As(err, &se) {
		return err
	}
	if e := dbconn.TiDBTxnTooLarge(err, "apply to the TiDB target"); e != nil {
		return e
	}
	return err
}
