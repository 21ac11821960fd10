package apply

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/sqlgen"
)

// tableInfo is what the applier knows about one version of a table.
type tableInfo struct {
	spec *sqlgen.TableSpec
	// keys are the unique keys (column indexes into the row) whose values
	// make up a row's writeset.
	keys [][]int
	// folds[k][p] hashes part p of keys[k] the way the target's collation
	// compares it (nil: the default fold).
	folds [][]*keyFold
	// id seeds the key hashes so equal values in different tables differ.
	id uint64
	// fk: the table's foreign keys in both directions (fkeys.go); nil
	// when it has none.
	fk *fkInfo
	// nontx: the target table's engine has no transactions (nontx.go).
	nontx bool
}

var hashSeed = maphash.MakeSeed()

// resolve builds the tableInfo of t, merging what the stream says about
// the table with the target's definition: unique keys the source's table
// map does not carry and generated columns that must not be written. The
// target's shape matches the stream at this point, because DDL is applied
// in order with every earlier transaction committed.
func (a *Applier) resolve(ctx context.Context, t *sluice.Table) (*tableInfo, error) {
	if v, ok := a.tables.Load(t); ok {
		return v.(*tableInfo), nil
	}
	// The target's collations are read beside its definition: each is a
	// round trip, and the scheduler waits for them (at a distant target,
	// for every table of the stream as it first appears).
	type foldsRead struct {
		folds map[string]*keyFold
		err   error
	}
	fc := make(chan foldsRead, 1)
	go func() {
		f, err := a.foldsFor(ctx, t.Ref.Schema, t.Ref.Name)
		fc <- foldsRead{f, err}
	}()
	xc := make(chan fkRead, 1)
	go func() { xc <- a.readFKs(ctx, t.Ref) }()
	tgt, err := schema.Inspect(ctx, a.db, t.Ref)
	fr, xr := <-fc, <-xc
	if err != nil {
		if errors.Is(err, sluice.ErrUnknownTable) {
			return nil, &sluice.Error{Op: "apply rows to " + t.Ref.String(), Err: err,
				// Never "create it by hand": an empty table under rows the
				// source already has would lose them silently. A rerun of
				// --mode all reloads a copied table the target lost.
				Hint: "if the table was copied, rerun sluice migrate --mode all, which reloads a copied table the target lost; otherwise check routes and tables.include"}
		}
		return nil, fmt.Errorf("inspect target table %s: %w", t.Ref, err)
	}
	eff := *t
	eff.Columns = append([]sluice.Column(nil), t.Columns...)
	for i := range eff.Columns {
		if j := tgt.ColumnIndex(eff.Columns[i].Name); j >= 0 && tgt.Columns[j].Generated {
			eff.Columns[i].Generated = true
		}
	}
	mapKey := func(k []int) []int {
		out := make([]int, 0, len(k))
		for _, ci := range k {
			j := eff.ColumnIndex(tgt.Columns[ci].Name)
			if j < 0 {
				return nil
			}
			out = append(out, j)
		}
		return out
	}
	if !eff.HasKey() && tgt.HasKey() {
		if k := mapKey(tgt.PK); k != nil {
			eff.PK = k
		}
	}
	info := &tableInfo{spec: sqlgen.NewTableSpec(&eff, t.Ref)}
	if info.nontx, err = a.targetNonTransactional(ctx, t.Ref); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	add := func(k []int) {
		if len(k) == 0 {
			return
		}
		s := fmt.Sprint(k)
		if !seen[s] {
			seen[s] = true
			info.keys = append(info.keys, k)
		}
	}
	add(eff.PK)
	for _, k := range t.UniqueKeys {
		add(k)
	}
	for _, k := range tgt.UniqueKeys {
		add(mapKey(k))
	}
	if fr.err != nil {
		return nil, fr.err
	}
	if xr.err != nil {
		return nil, xr.err
	}
	if len(xr.triggers) > 0 {
		return nil, triggersError(t.Ref, xr.triggers)
	}
	folds := fr.folds
	info.fk = buildFK(&eff, t.Ref, xr, folds)
	for _, k := range info.keys {
		fk := make([]*keyFold, len(k))
		for p, ci := range k {
			fk[p] = folds[strings.ToLower(eff.Columns[ci].Name)]
		}
		info.folds = append(info.folds, fk)
	}
	var h maphash.Hash
	h.SetSeed(hashSeed)
	h.WriteString(strings.ToLower(t.Ref.String()))
	info.id = h.Sum64()
	a.tables.Store(t, info)
	return info, nil
}

// addWriteset appends the key hashes of one row change. A table without
// any key contributes one table-wide key, so its changes apply serially.
func addWriteset(keys []uint64, info *tableInfo, c *sluice.RowChange, h *maphash.Hash) []uint64 {
	keys = addFKWriteset(keys, info.fk, c, h)
	if info.spec.Keyless || len(info.keys) == 0 {
		return append(keys, info.id)
	}
	for _, row := range [2][]any{c.Before, c.After} {
		if row == nil {
			continue
		}
	key:
		for ki, k := range info.keys {
			h.Reset()
			var buf [8]byte
			binary.LittleEndian.PutUint64(buf[:], info.id+uint64(ki))
			h.Write(buf[:])
			var folds []*keyFold
			if ki < len(info.folds) {
				folds = info.folds[ki]
			}
			for p, ci := range k {
				if row[ci] == nil {
					continue key // NULLs never collide in a unique key
				}
				var f *keyFold
				if p < len(folds) {
					f = folds[p]
				}
				hashValue(h, row[ci], f)
			}
			keys = append(keys, h.Sum64())
		}
	}
	return keys
}

// hashValue hashes a key value so that values the target's collation
// considers equal hash equally (f, see keyfold.go; nil: ASCII case and
// trailing spaces folded). Folding more than the collation can only add
// false conflicts, which cost parallelism, never correctness.
func hashValue(h *maphash.Hash, v any, f *keyFold) {
	var buf [9]byte
	switch x := v.(type) {
	case string:
		f.hash(h, x)
		return
	case []byte:
		f.hash(h, string(x))
		return
	case int8:
		binary.LittleEndian.PutUint64(buf[1:], uint64(int64(x)))
	case int16:
		binary.LittleEndian.PutUint64(buf[1:], uint64(int64(x)))
	case int32:
		binary.LittleEndian.PutUint64(buf[1:], uint64(int64(x)))
	case int64:
		binary.LittleEndian.PutUint64(buf[1:], uint64(x))
	case int:
		binary.LittleEndian.PutUint64(buf[1:], uint64(int64(x)))
	case uint8:
		binary.LittleEndian.PutUint64(buf[1:], uint64(x))
	case uint16:
		binary.LittleEndian.PutUint64(buf[1:], uint64(x))
	case uint32:
		binary.LittleEndian.PutUint64(buf[1:], uint64(x))
	case uint64:
		binary.LittleEndian.PutUint64(buf[1:], x)
	case float32:
		binary.LittleEndian.PutUint64(buf[1:], math.Float64bits(float64(x)))
	case float64:
		binary.LittleEndian.PutUint64(buf[1:], math.Float64bits(x))
	default:
		foldString(h, fmt.Sprint(x))
		return
	}
	buf[0] = 1
	h.Write(buf[:])
}

func foldString(h *maphash.Hash, s string) {
	s = strings.TrimRight(s, " ")
	_ = h.WriteByte(2)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		_ = h.WriteByte(c)
	}
	_ = h.WriteByte(0)
}
