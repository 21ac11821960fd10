package apply

import (
	"context"
	"database/sql"
	"hash/maphash"

	"github.com/sluice-db/sluice"
)

// SetAfterDDLHook makes applyDDL call f after a DDL ran on the target and
// before its checkpoint; an error from f stops the applier there, as a crash
// in that window would. It returns a func that removes the hook.
func SetAfterDDLHook(f func() error) func() {
	afterDDLHook = f
	return func() { afterDDLHook = nil }
}

// FoldHashes hashes each value the way a writeset hashes a key column in
// collation coll of character set cs on the target db.
func FoldHashes(ctx context.Context, db *sql.DB, coll, cs string, vals ...any) ([]uint64, error) {
	a := &Applier{db: db}
	f, err := a.foldOf(ctx, coll, cs)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(vals))
	for i, v := range vals {
		var h maphash.Hash
		h.SetSeed(hashSeed)
		hashValue(&h, v, f)
		out[i] = h.Sum64()
	}
	return out, nil
}

// SetAfterDDLItemHook makes applyDDL call f with the DDL's end position
// after it ran on the target and before its checkpoint. It returns a func
// that removes the hook.
func SetAfterDDLItemHook(f func(end sluice.Position)) func() {
	afterDDLItemHook = f
	return func() { afterDDLItemHook = nil }
}
