package apply

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
)

// Writesets must make two changes conflict whenever the target's unique
// index treats their key values as equal, and that is the column's
// collation's business: 'é', 'É' and 'E' are one key in utf8mb4_general_ci,
// 'ss' and 'ß' are one in utf8mb4_unicode_ci, 'a' and 'a ' are one in every
// PAD SPACE collation, _bin included. A missed conflict lets two
// transactions on one key run in parallel, and the target then stops on a
// duplicate key or, worse, applies them in the wrong order. A false conflict
// only costs parallelism. So each key column gets a fold that is exactly the
// collation where sluice knows it (binary, _bin, and the general_ci family,
// whose weights it reads from the target itself), and otherwise puts every
// value of that column in one class.

type foldKind uint8

const (
	foldDefault foldKind = iota // not resolved from the target: ASCII case and trailing spaces folded
	foldBytes                   // no collation (binary strings, numbers as text, temporal): exact bytes, trailing 0x00 trimmed
	foldBin                     // a _bin collation: exact bytes, trailing spaces trimmed unless NO PAD
	foldWeights                 // one weight per character, read from the target (general_ci family)
	foldAll                     // every value is one class (UCA and language collations, prefix key parts)
)

// keyFold is how one key column's values are hashed.
type keyFold struct {
	kind    foldKind
	pad     bool     // PAD SPACE: trailing spaces do not count
	single  bool     // a single-byte character set: each byte is one character
	weights []uint16 // foldWeights: by code point (BMP) or byte
	supp    uint16   // foldWeights: the weight of every supplementary character
}

func (f *keyFold) hash(h *maphash.Hash, s string) {
	if f == nil {
		foldString(h, s)
		return
	}
	switch f.kind {
	case foldAll:
		_ = h.WriteByte(3)
	case foldBytes:
		_ = h.WriteByte(2)
		h.WriteString(strings.TrimRight(s, "\x00"))
	case foldBin:
		_ = h.WriteByte(2)
		if f.pad {
			s = strings.TrimRight(s, " ")
		}
		h.WriteString(s)
	case foldWeights:
		_ = h.WriteByte(4)
		if f.pad {
			s = strings.TrimRight(s, " ")
		}
		var buf [2]byte
		if f.single {
			for i := 0; i < len(s); i++ {
				binary.LittleEndian.PutUint16(buf[:], f.weights[s[i]])
				h.Write(buf[:])
			}
			return
		}
		for _, r := range s {
			w := f.supp
			if r >= 0 && int(r) < len(f.weights) {
				w = f.weights[r]
			}
			binary.LittleEndian.PutUint16(buf[:], w)
			h.Write(buf[:])
		}
	default:
		foldString(h, s)
	}
}

// weightTables caches, per target collation, the weight table read from
// the target (nil: the collation is not one weight per character).
type weightTables struct {
	mu sync.Mutex
	m  map[string]*keyFold
}

// foldsFor returns the fold of every column of the target table by column
// name (lower case). Columns that are part of a unique key only through a
// prefix (UNIQUE (c(10))) fold to one class: values that differ after the
// prefix are still one key.
//
// The prefix parts are read in a query of their own: as a correlated
// EXISTS over information_schema.STATISTICS the server scanned every table
// of every schema for each column (94 ms a table against 1 ms for both
// queries on a target of 20 tables, in the scheduler's path for each new
// table version: a DDL-heavy differential test seed spent most of its run
// there).
func (a *Applier) foldsFor(ctx context.Context, schemaName, table string) (map[string]*keyFold, error) {
	prefixed := map[string]bool{}
	rows, err := a.db.QueryContext(ctx, `SELECT COLUMN_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 AND SUB_PART IS NOT NULL`, schemaName, table)
	if err != nil {
		return nil, fmt.Errorf("read the target's key prefixes of %s.%s: %w", schemaName, table, err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		prefixed[strings.ToLower(name)] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = a.db.QueryContext(ctx, `SELECT COLUMN_NAME, IFNULL(COLLATION_NAME, ''), IFNULL(CHARACTER_SET_NAME, '')
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, schemaName, table)
	if err != nil {
		return nil, fmt.Errorf("read the target's collations of %s.%s: %w", schemaName, table, err)
	}
	type col struct{ name, coll, cs string }
	var cols []col
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.name, &c.coll, &c.cs); err != nil {
			rows.Close()
			return nil, err
		}
		cols = append(cols, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make(map[string]*keyFold, len(cols))
	for _, c := range cols {
		f, err := a.foldOf(ctx, c.coll, c.cs)
		if err != nil {
			return nil, err
		}
		name := strings.ToLower(c.name)
		if prefixed[name] {
			f = &keyFold{kind: foldAll}
		}
		out[name] = f
	}
	return out, nil
}

// foldOf returns the fold of a collation (cs its character set).
func (a *Applier) foldOf(ctx context.Context, coll, cs string) (*keyFold, error) {
	lc := strings.ToLower(coll)
	pad := !strings.Contains(lc, "nopad")
	switch {
	case lc == "" || lc == "binary":
		return &keyFold{kind: foldBytes}, nil
	case strings.HasSuffix(lc, "_bin"):
		return &keyFold{kind: foldBin, pad: pad}, nil
	case !(strings.HasSuffix(lc, "_general_ci") || strings.HasSuffix(lc, "_general_nopad_ci") ||
		lc == "latin1_swedish_ci" || lc == "latin1_swedish_nopad_ci"):
		return &keyFold{kind: foldAll}, nil
	}
	single := cs == "latin1"
	if !single && cs != "utf8mb4" && cs != "utf8mb3" {
		return &keyFold{kind: foldAll}, nil
	}
	a.weights.mu.Lock()
	defer a.weights.mu.Unlock()
	if f, ok := a.weights.m[lc]; ok {
		return f, nil
	}
	w, supp, err := readWeights(ctx, a.db, coll, cs, single)
	if err != nil {
		return nil, err
	}
	f := &keyFold{kind: foldAll}
	if w != nil {
		f = &keyFold{kind: foldWeights, pad: pad, single: single, weights: w, supp: supp}
	}
	if a.weights.m == nil {
		a.weights.m = map[string]*keyFold{}
	}
	a.weights.m[lc] = f
	return f, nil
}

// readWeights asks the target for the weight of every character of cs in
// collation coll: WEIGHT_STRING of one string holding each character once.
// It returns nil when the collation does not give every character exactly
// one weight of the expected width (expansions, contractions or ignorable
// characters), which a per-character table cannot express.
func readWeights(ctx context.Context, db *sql.DB, coll, cs string, single bool) ([]uint16, uint16, error) {
	var q string
	n := 256
	width := 1
	if single {
		var b strings.Builder
		for i := 0; i < 256; i++ {
			fmt.Fprintf(&b, "%02X", i)
		}
		q = "SELECT WEIGHT_STRING(CONVERT(_binary X'" + b.String() + "' USING " + cs + ") COLLATE " + coll + ")"
	} else {
		// Every BMP code point but the surrogates, then two supplementary
		// characters, which must weigh the same.
		var b strings.Builder
		n = 0
		for r := 0; r < 0x10000; r++ {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			fmt.Fprintf(&b, "%08X", r)
			n++
		}
		b.WriteString("0001F600000E0001")
		n += 2
		width = 2
		q = "SELECT WEIGHT_STRING(CONVERT(_utf32 X'" + b.String() + "' USING " + cs + ") COLLATE " + coll + ")"
	}
	var ws []byte
	err := db.QueryRowContext(ctx, q).Scan(&ws)
	if err != nil && !single && isMySQLErr(err, errUnknownCharset) {
		// TiDB has no utf32: the same characters in UTF-8 (tidb.go). If
		// that fails too, every value is one class: slower, never wrong.
		if db.QueryRowContext(ctx, weightsUTF8(cs, coll)).Scan(&ws) != nil {
			return nil, 0, nil
		}
		err = nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the weights of collation %s from the target: %w", coll, err)
	}
	if len(ws) != n*width {
		return nil, 0, nil
	}
	if single {
		out := make([]uint16, 256)
		for i := range out {
			out[i] = uint16(ws[i])
		}
		return out, 0, nil
	}
	out := make([]uint16, 0x10000)
	i := 0
	for r := 0; r < 0x10000; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			out[r] = 0xFFFF // never a valid character in a value
			continue
		}
		out[r] = binary.BigEndian.Uint16(ws[i*2:])
		i++
	}
	s1, s2 := binary.BigEndian.Uint16(ws[i*2:]), binary.BigEndian.Uint16(ws[i*2+2:])
	if s1 != s2 {
		return nil, 0, nil
	}
	return out, s1, nil
}
