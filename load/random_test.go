package load_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// randomTable has a column of every type family the dump reads as text or
// as a number (the driver parses integer and floating point columns of a
// text row, and the dump prints them back).
const randomTable = `CREATE TABLE %s.r (id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
  i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, iz INT(8) UNSIGNED ZEROFILL,
  dec1 DECIMAL(65,30), dec2 DECIMAL(10,2) UNSIGNED, dec0 DECIMAL(20,0),
  f FLOAT, d DOUBLE,
  dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), y YEAR,
  b1 BIT(1), b13 BIT(13), b64 BIT(64),
  e ENUM('a','b','c d','é'), st SET('x','y','z'), j JSON,
  c CHAR(20), v VARCHAR(300), tx TEXT, l1 VARCHAR(100) CHARACTER SET latin1,
  bn BINARY(6), vb VARBINARY(500), bl LONGBLOB) DEFAULT CHARSET=utf8mb4`

// rowGen makes SQL literals of random values, biased to the limits and to
// the bytes LOAD DATA interprets.
type rowGen struct{ r *rand.Rand }

func (g rowGen) intLit(bits int, unsigned bool) string {
	if unsigned {
		max := uint64(math.MaxUint64) >> (64 - bits)
		switch g.r.IntN(8) {
		case 0:
			return "0"
		case 1:
			return strconv.FormatUint(max, 10)
		}
		return strconv.FormatUint(g.r.Uint64()&max>>g.r.IntN(bits), 10)
	}
	min, max := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
	switch g.r.IntN(8) {
	case 0:
		return strconv.FormatInt(min, 10)
	case 1:
		return strconv.FormatInt(max, 10)
	}
	v := int64(g.r.Uint64()<<(64-bits)) >> (64 - bits) >> g.r.IntN(bits)
	return strconv.FormatInt(v, 10)
}

func (g rowGen) digits(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + g.r.IntN(10))
	}
	return string(b)
}

func (g rowGen) decimal(intDigits, frac int, unsigned bool) string {
	s := g.digits(1 + g.r.IntN(intDigits))
	if frac > 0 {
		s += "." + g.digits(1+g.r.IntN(frac))
	}
	if !unsigned && g.r.IntN(2) == 0 {
		s = "-" + s
	}
	return s
}

func (g rowGen) float(bits32 bool) string {
	for {
		var f float64
		if bits32 {
			f = float64(math.Float32frombits(g.r.Uint32()))
		} else {
			f = math.Float64frombits(g.r.Uint64())
		}
		if g.r.IntN(4) == 0 {
			f = math.Round(g.r.NormFloat64()*1e6) / 1e3 // short decimals too
		}
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
}

func (g rowGen) quoteHex(b []byte, charset string) string {
	if charset == "" {
		return "X'" + hex.EncodeToString(b) + "'"
	}
	return "CONVERT(X'" + hex.EncodeToString(b) + "' USING " + charset + ")"
}

// hardBytes are the bytes a text row must carry unchanged.
var hardBytes = []byte{0, '\t', '\n', '\r', '\\', 0xFF, 'N', '\'', '"', 0x1A, 0x80, ' '}

func (g rowGen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		if g.r.IntN(3) == 0 {
			b[i] = hardBytes[g.r.IntN(len(hardBytes))]
		} else {
			b[i] = byte(g.r.Uint32())
		}
	}
	return b
}

var hardRunes = []rune{0, '\t', '\n', '\r', '\\', 'N', '\'', 'é', 'ÿ', '😀', '𝄞', '中', ' '}

func (g rowGen) text(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		if g.r.IntN(3) == 0 {
			sb.WriteRune(hardRunes[g.r.IntN(len(hardRunes))])
		} else {
			sb.WriteRune(rune(32 + g.r.IntN(95)))
		}
	}
	return sb.String()
}

func (g rowGen) jsonValue(depth int) any {
	switch k := g.r.IntN(6); {
	case k == 0 && depth < 3:
		m := map[string]any{}
		for i := g.r.IntN(4); i > 0; i-- {
			m[g.text(g.r.IntN(6))] = g.jsonValue(depth + 1)
		}
		return m
	case k == 1 && depth < 3:
		var a []any
		for i := g.r.IntN(4); i > 0; i-- {
			a = append(a, g.jsonValue(depth+1))
		}
		return a
	case k == 2:
		return g.r.NormFloat64() * 1e3
	case k == 3:
		return nil
	case k == 4:
		return g.r.IntN(2) == 0
	}
	return g.text(g.r.IntN(20))
}

func (g rowGen) date() string {
	if g.r.IntN(20) == 0 {
		return "0000-00-00"
	}
	return fmt.Sprintf("%04d-%02d-%02d", 1000+g.r.IntN(9000), 1+g.r.IntN(12), 1+g.r.IntN(28))
}

func (g rowGen) clock() string {
	return fmt.Sprintf("%02d:%02d:%02d.%06d", g.r.IntN(24), g.r.IntN(60), g.r.IntN(60), g.r.IntN(1000000))
}

// row returns the values of row id as SQL literals, NULL one time in eight.
func (g rowGen) row(id int) string {
	vals := []string{strconv.Itoa(id)}
	add := func(lit func() string) {
		if g.r.IntN(8) == 0 {
			vals = append(vals, "NULL")
			return
		}
		vals = append(vals, lit())
	}
	for _, bits := range []int{8, 16, 24, 32, 64} {
		add(func() string { return g.intLit(bits, false) })
		add(func() string { return g.intLit(bits, true) })
	}
	add(func() string { return g.intLit(27, true) }) // zerofill: 8 digits shown, more stored
	add(func() string { return g.decimal(35, 30, false) })
	add(func() string { return g.decimal(8, 2, true) })
	add(func() string { return g.decimal(20, 0, false) })
	add(func() string { return g.float(true) })
	add(func() string { return g.float(false) })
	add(func() string { return "'" + g.date() + "'" })
	add(func() string { return "'" + g.date()[:10] + " " + g.clock() + "'" })
	add(func() string {
		// TIMESTAMP's range, in the session's UTC.
		s := 1 + g.r.Int64N(math.MaxInt32-1)
		return "'" + time.Unix(s, int64(g.r.IntN(1000000))*1000).UTC().Format("2006-01-02 15:04:05.000000") + "'"
	})
	add(func() string {
		h := g.r.IntN(839)
		frac := g.r.IntN(1000000)
		if h == 838 {
			frac = 0
		}
		sign := ""
		if g.r.IntN(2) == 0 {
			sign = "-"
		}
		return fmt.Sprintf("'%s%d:%02d:%02d.%06d'", sign, h, g.r.IntN(60), g.r.IntN(60), frac)
	})
	add(func() string {
		if g.r.IntN(10) == 0 {
			return "0"
		}
		return strconv.Itoa(1901 + g.r.IntN(255))
	})
	for _, bits := range []int{1, 13, 64} {
		add(func() string { return strconv.FormatUint(g.r.Uint64()>>(64-bits), 10) })
	}
	add(func() string { return "'" + []string{"a", "b", "c d", "é"}[g.r.IntN(4)] + "'" })
	add(func() string {
		var s []string
		for _, m := range []string{"x", "y", "z"} {
			if g.r.IntN(2) == 0 {
				s = append(s, m)
			}
		}
		return "'" + strings.Join(s, ",") + "'"
	})
	add(func() string {
		j, err := json.Marshal(g.jsonValue(0))
		if err != nil {
			panic(err)
		}
		return g.quoteHex(j, "utf8mb4")
	})
	add(func() string { return g.quoteHex([]byte(g.text(g.r.IntN(21))), "utf8mb4") })
	add(func() string { return g.quoteHex([]byte(g.text(g.r.IntN(301))), "utf8mb4") })
	add(func() string { return g.quoteHex([]byte(g.text(g.r.IntN(2000))), "utf8mb4") })
	add(func() string { return g.quoteHex(g.bytes(g.r.IntN(101)), "latin1") })
	add(func() string { return g.quoteHex(g.bytes(g.r.IntN(7)), "") })
	add(func() string { return g.quoteHex(g.bytes(g.r.IntN(501)), "") })
	add(func() string {
		n := g.r.IntN(3000)
		if g.r.IntN(40) == 0 {
			n = 100<<10 + g.r.IntN(300<<10) // across the dump's buffers
		}
		return g.quoteHex(g.bytes(n), "")
	})
	return "(" + strings.Join(vals, ",") + ")"
}

// createRandomTable fills schema.r with rows random values from seed.
func createRandomTable(t *testing.T, schema string, seed uint64, rows int) {
	t.Helper()
	db := sandboxtest.MustOpen(t, srcInst, "")
	sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema, fmt.Sprintf(randomTable, schema))
	g := rowGen{rand.New(rand.NewPCG(seed, 7))}
	var batch []string
	size := 0
	flush := func() {
		if len(batch) > 0 {
			sandboxtest.MustExec(t, db, "INSERT INTO "+schema+".r VALUES "+strings.Join(batch, ","))
		}
		batch, size = nil, 0
	}
	for id := 1; id <= rows; id++ {
		r := g.row(id)
		batch, size = append(batch, r), size+len(r)
		if size > 1<<20 {
			flush()
		}
	}
	flush()
}

// TestRandomRowsRoundTrip: seeded random rows of every type (NULLs, the
// bytes LOAD DATA interprets, limits of each integer, random float and
// double bits, values larger than the dump's buffers) go through the dump
// to files and back, and through migrate's stream with one bulk LOAD DATA
// per table and with a LOAD DATA per chunk; the target must hold the same
// bytes in every column (HEX) and the same CHECKSUM TABLE. A failure prints
// its seed; SLUICE_SEED=N replays it, SLUICE_RANDOM_ROWS sets the size.
func TestRandomRowsRoundTrip(t *testing.T) {
	sandboxtest.SkipShort(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_SEED=%q: not a number", s)
		}
		seed = n
	}
	rows := 1500
	if s := os.Getenv("SLUICE_RANDOM_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_RANDOM_ROWS=%q: want a positive number", s)
		}
		rows = n
	}
	t.Logf("seed %d, %d rows", seed, rows)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed with seed %d: replay with SLUICE_SEED=%d", seed, seed)
		}
	})
	createRandomTable(t, "rnd", seed, rows)
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")

	t.Run("dir", func(t *testing.T) {
		cfg := taskFile(t, "rnd_dir", "rnd.*", "routes: [{schema: rnd, target-schema: rnd_dir}]\nthreads: 3\npool-size: 3\nrows-per-chunk: 200")
		dir := t.TempDir()
		mustSluice(t, "dump", "--config", cfg, "--dir", dir+"/d")
		mustSluice(t, "load", "--config", cfg, "--dir", dir+"/d")
		sameTables(t, src, dst, "rnd", "rnd_dir")
	})
	for _, unit := range []string{"auto", "chunk"} {
		t.Run(unit, func(t *testing.T) {
			name := "rnd_" + unit
			cfg := taskFile(t, name, "rnd.*", "routes: [{schema: rnd, target-schema: "+name+"}]\nthreads: 2\npool-size: 2\nrows-per-chunk: 300")
			mustSluice(t, "migrate", "--config", cfg, "--mode", "full", "--commit-unit", unit)
			sameTables(t, src, dst, "rnd", name)
		})
	}
}
