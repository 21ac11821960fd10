package dumpfmt

import (
	"bytes"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// testSeed is SLUICE_SEED when set (to replay a failure), else the clock.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("SLUICE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_SEED=%q: not a number", s)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// slowField is the escaping AppendField did before its lookup table: a
// switch per byte, kept here as the reference.
func slowField(b, v []byte) []byte {
	if v == nil {
		return append(b, '\\', 'N')
	}
	for _, c := range v {
		switch c {
		case 0:
			b = append(b, '\\', '0')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\\':
			b = append(b, '\\', '\\')
		default:
			b = append(b, c)
		}
	}
	return b
}

// TestAppendValueMatchesFmt: AppendValue writes, for every kind of value
// the driver returns from a text row, the bytes the dump wrote before it
// (fmt.Append of the value, escaped by AppendField), on random values of
// every kind and their limits. Replay a failure with SLUICE_SEED.
func TestAppendValueMatchesFmt(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 18))
	var vals []driver.Value
	vals = append(vals, nil, []byte{}, []byte(nil), int64(0), int64(math.MinInt64), int64(math.MaxInt64),
		uint64(0), uint64(math.MaxUint64), 0.0, math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64,
		-math.MaxFloat64, 1e21, 1e20, 1e-5, 1e-4, 123456789.0, float32(math.MaxFloat32), float32(math.SmallestNonzeroFloat32),
		float32(0.1), "a\tb")
	special := []byte{0, '\t', '\n', '\r', '\\', 0xFF, 'N', 'a', 0x80}
	for i := 0; i < 20000; i++ {
		switch r.IntN(6) {
		case 0:
			vals = append(vals, int64(r.Uint64())>>r.IntN(64))
		case 1:
			vals = append(vals, r.Uint64()>>r.IntN(64))
		case 2:
			f := math.Float64frombits(r.Uint64())
			if math.IsNaN(f) || math.IsInf(f, 0) {
				f = r.NormFloat64()
			}
			vals = append(vals, f)
		case 3:
			f := math.Float32frombits(r.Uint32())
			if f != f || math.IsInf(float64(f), 0) {
				f = float32(r.NormFloat64())
			}
			vals = append(vals, f)
		default:
			b := make([]byte, r.IntN(40))
			for j := range b {
				if r.IntN(3) == 0 {
					b[j] = special[r.IntN(len(special))]
				} else {
					b[j] = byte(r.Uint32())
				}
			}
			vals = append(vals, b)
		}
	}
	for _, v := range vals {
		var want []byte
		switch x := v.(type) {
		case nil:
			want = slowField(nil, nil)
		case []byte:
			want = slowField(nil, x)
			if x == nil {
				// A nil []byte inside a driver.Value is not NULL for the
				// driver (NULL is a nil interface); the dump never gets one.
				continue
			}
		default:
			want = slowField(nil, fmt.Append(nil, x))
		}
		if got := AppendValue([]byte("x"), v); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("seed %d: AppendValue(%T %v) = %q, want %q", seed, v, v, got[1:], want)
		}
	}
}

// TestAppendFieldMatchesSwitch: the table-driven escaping gives what the
// per-byte switch gave, for every byte value and random byte strings.
func TestAppendFieldMatchesSwitch(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 19))
	for c := 0; c < 256; c++ {
		v := []byte{'a', byte(c), 'b', byte(c)}
		if got, want := AppendField(nil, v), slowField(nil, v); !bytes.Equal(got, want) {
			t.Fatalf("byte %#x: %q, want %q", c, got, want)
		}
	}
	for i := 0; i < 5000; i++ {
		v := make([]byte, r.IntN(300))
		for j := range v {
			v[j] = byte(r.Uint32())
			if r.IntN(4) == 0 {
				v[j] = "\x00\t\n\r\\"[r.IntN(5)]
			}
		}
		if got, want := AppendField([]byte("p"), v), slowField([]byte("p"), v); !bytes.Equal(got, want) {
			t.Fatalf("seed %d: AppendField(%q) = %q, want %q", seed, v, got, want)
		}
	}
}

// TestMayEscapeNeverMisses: every byte value at every position of a word
// whose other bytes are random: a byte LOAD DATA interprets is always
// flagged.
func TestMayEscapeNeverMisses(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 20))
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			for k := 0; k < 50; k++ {
				var w [8]byte
				for j := range w {
					w[j] = byte(r.Uint32())
				}
				w[pos] = byte(c)
				if escapes[c] != 0 && !mayEscape(binary.LittleEndian.Uint64(w[:])) {
					t.Fatalf("seed %d: byte %#x at %d of % x not flagged", seed, c, pos, w)
				}
			}
		}
	}
}

// BenchmarkAppendField: a sysbench row's text (digits and dashes), the
// common case of nothing to escape.
func BenchmarkAppendField(b *testing.B) {
	v := []byte("68487932199-96439406143-93774651418-41631865787-96406072701-20604855487-25459966574-28203206787-41238978918-19503783441")
	buf := make([]byte, 0, 1024)
	b.SetBytes(int64(len(v)))
	for i := 0; i < b.N; i++ {
		buf = AppendField(buf[:0], v)
	}
}
