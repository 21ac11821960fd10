package load

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// sequenceMissing explains a CREATE TABLE that failed because a column's
// DEFAULT NEXT VALUE FOR names a sequence the target lacks (1146) or has
// as a table (4089): sluice copies no sequence (issue 29, N11; the generic
// "target" hint sent users the wrong way). nil for any other failure.
func sequenceMissing(err error, src *sluice.Table, tgt sluice.TableRef) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1146 && me.Number != 4089 || !strings.Contains(strings.ToLower(src.CreateSQL), "nextval(") {
		return nil
	}
	return &sluice.Error{Op: "load: create " + tgt.String(), Err: fmt.Errorf("%w: a column of %s defaults to the next value of a sequence: %s", sluice.ErrSchemaMismatch, src.Ref, me.Message),
		Hint: "sluice copies no sequence: create that sequence on the target (SHOW CREATE SEQUENCE on the source), starting past the source's values, then run again; or exclude " + src.Ref.String()}
}
