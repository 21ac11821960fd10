package apply

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

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

// errUnknownCharset is "Unknown character set" (1115).
const errUnknownCharset = 1115

// weightsUTF8 is readWeights' query for a target without utf32 (TiDB): every
// BMP code point but the surrogates, then two supplementary characters, as
// UTF-8 bytes.
func weightsUTF8(cs, coll string) string {
	var b strings.Builder
	buf := make([]byte, 4)
	hexr := func(r rune) {
		n := utf8.EncodeRune(buf, r)
		fmt.Fprintf(&b, "%X", buf[:n])
	}
	for r := rune(0); r < 0x10000; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		hexr(r)
	}
	hexr(0x1F600)
	hexr(0xE0001)
	return "SELECT WEIGHT_STRING(CONVERT(_binary X'" + b.String() + "' USING " + cs + ") COLLATE " + coll + ")"
}
