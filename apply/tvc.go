package apply

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-db/sluice/internal/dbconn"
)

// Multi-row UPDATEs join the target table with a derived table of the new
// values. On MariaDB 10.3 and later its rows after the first go as one
// table value constructor (sqlgen AppendUpdateJoinValues), which the
// server runs as two SELECTs instead of one per row: about a third less
// of its CPU for a 200-row statement (issue 34). MySQL writes a table
// value constructor another way (VALUES ROW(...)) and other servers may
// have none, so it is used only where the target says it is MariaDB.

// readTarget reads the target's flavour and version once (dbconn.ServerFlavor):
// they decide the table value constructors here and TiDB's DDL session
// (tidbddl.go).
func (a *Applier) readTarget(ctx context.Context) error {
	var v string
	if err := a.serial.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return fmt.Errorf("read the target's version: %w", err)
	}
	f, _ := dbconn.ParseVersion(v)
	a.tidb = f == dbconn.TiDB
	a.valuesOK = valuesOK(v)
	return nil
}

// valuesOK: version (as VERSION() shows it) is MariaDB 10.3 or later.
func valuesOK(version string) bool {
	// A MySQL-compatible prefix ("5.5.5-10.6.12-MariaDB") comes first in
	// some builds' handshake; VERSION() shows the real one, but skip such a
	// prefix all the same.
	f, ver := dbconn.ParseVersion(strings.TrimPrefix(version, "5.5.5-"))
	if f != dbconn.MariaDB {
		return false
	}
	parts := strings.SplitN(ver, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return major > 10 || major == 10 && minor >= 3
}

// appendUpdateJoin writes a multi-row UPDATE in the target's best form.
func (a *Applier) appendUpdateJoin(b []byte, info *tableInfo, befores, afters [][]any) []byte {
	if a.valuesOK {
		return info.spec.AppendUpdateJoinValues(b, befores, afters)
	}
	return info.spec.AppendUpdateJoin(b, befores, afters)
}
