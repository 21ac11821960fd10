package apply

import (
	"context"
	"database/sql"

	"github.com/sluice-db/sluice"
)

// Writeset resolves t on the target db as the scheduler does and returns
// the writeset of c and whether c makes its group a barrier (fkeys.go).
func Writeset(ctx context.Context, db *sql.DB, t *sluice.Table, c sluice.RowChange) ([]uint64, bool, error) {
	a := &Applier{db: db}
	info, err := a.resolve(ctx, t)
	if err != nil {
		return nil, false, err
	}
	c.Table = t
	s := &scheduler{a: a}
	s.h.SetSeed(hashSeed)
	return addWriteset(nil, info, &c, &s.h), info.fk.barrier(&c), nil
}
