// Package dumpfmt is the data format shared by dump and load: how each
// column is read from the source, how a row is written as LOAD DATA text,
// how that text is read back, and the layout of a dump directory. Dump and
// load never import each other; both import this package.
package dumpfmt

import (
	"bufio"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluice-db/sluice"
)

// Kind says how a column travels, when its server text form is not already
// an exact, loadable representation.
type Kind uint8

const (
	// KindText columns travel as the server's text-protocol bytes, read
	// with character_set_results=binary so no conversion ever happens.
	KindText Kind = iota
	// KindFloat columns are FLOAT: the server prints only 6 significant
	// digits, so they are selected as DOUBLE, whose shortest round-trip
	// text holds every float exactly.
	KindFloat
	// KindBit columns are selected as an unsigned integer and converted
	// back on load, because LOAD DATA cannot take BIT values as text.
	KindBit
	// KindYear columns are YEAR: with binary results the server prints
	// year 0 as "0", which loads back as 2000 when read as text, so they
	// travel as a number, which loads back as itself.
	KindYear
	// KindJSON columns are loaded through CONVERT(... USING utf8mb4):
	// MySQL's JSON type rejects binary strings (MariaDB's JSON is LONGTEXT
	// and does not care).
	KindJSON
	// KindFixedBinary columns are MariaDB's UUID, INET6 and INET4. They
	// travel as their text form (what the server prints), and are loaded
	// through CONVERT(... USING ascii): these types take a binary string
	// as their native bytes and refuse one of any other length, so the
	// text must reach them as text. The text form is canonical and exact.
	KindFixedBinary
)

// KindOf classifies a column.
func KindOf(c sluice.Column) Kind {
	switch strings.ToLower(c.DataType) {
	case "float":
		return KindFloat
	case "bit":
		return KindBit
	case "json":
		return KindJSON
	case "year":
		return KindYear
	case "uuid", "inet6", "inet4":
		return KindFixedBinary
	}
	return KindText
}

// LoadVia is the expression (one %s for the raw value) that turns a dumped
// value back into column c on load, or "" when the raw value loads as is.
func LoadVia(c sluice.Column) string {
	switch KindOf(c) {
	case KindBit, KindYear:
		return "CAST(%s AS UNSIGNED)"
	case KindJSON:
		return "CONVERT(%s USING utf8mb4)"
	case KindFixedBinary:
		return "CONVERT(%s USING ascii)"
	}
	return ""
}

// SelectExpr is the expression that reads column c exactly.
func SelectExpr(c sluice.Column) string {
	q := sluice.QuoteIdent(c.Name)
	switch KindOf(c) {
	case KindFloat:
		return "CAST(" + q + " AS DOUBLE)"
	case KindBit, KindYear:
		return "CAST(" + q + " AS UNSIGNED)"
	}
	return q
}

// AppendField appends one value in LOAD DATA's default text format (fields
// terminated by tab, lines by newline, escaped by backslash). nil is NULL
// (\N), which stays distinct from an empty value; every byte that LOAD DATA
// would interpret (NUL, tab, newline, carriage return, backslash) is escaped.
func AppendField(b, v []byte) []byte {
	if v == nil {
		return append(b, '\\', 'N')
	}
	start := 0
	for i := 0; i < len(v); i++ {
		// Eight bytes at a time while none of them can need an escape:
		// most values (numbers, dates, most text) have none.
		for i+8 <= len(v) && !mayEscape(binary.LittleEndian.Uint64(v[i:])) {
			i += 8
		}
		if i == len(v) {
			break
		}
		e := escapes[v[i]]
		if e == 0 {
			continue
		}
		b = append(b, v[start:i]...)
		b = append(b, '\\', e)
		start = i + 1
	}
	return append(b, v[start:]...)
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// mayEscape reports whether any byte of w is below 0x0E (which holds NUL,
// tab, newline and carriage return) or is a backslash. It never misses
// one; bytes it flags for nothing (0x01, say) go through the table.
func mayEscape(w uint64) bool {
	// (x - lsb*n) & ^x & msb is non-zero when some byte of x is below n
	// (n <= 128); with x = w ^ lsb*c, when some byte of w equals c.
	low := (w - lsb*0x0E) & ^w & msb
	bs := w ^ lsb*'\\'
	return low|(bs-lsb)&^bs&msb != 0
}

// escapes maps each byte LOAD DATA would interpret to the letter of its
// escape, every other byte to 0: one load per byte instead of a switch, in
// the loop every dumped byte goes through.
var escapes = [256]byte{0: '0', '\t': 't', '\n': 'n', '\r': 'r', '\\': '\\'}

// AppendValue appends one value as the driver returned it from a text
// protocol row: nil (NULL) and []byte as AppendField does, and the numbers
// the driver parses from integer and floating point columns in their
// shortest exact decimal form (the same text fmt.Append gives, without
// its allocation and reflection: this runs for every value of a dump).
// Numbers need no escaping.
func AppendValue(b []byte, v driver.Value) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, '\\', 'N')
	case []byte:
		return AppendField(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case float32:
		return strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	case string:
		return AppendField(b, []byte(x))
	}
	return AppendField(b, fmt.Append(nil, v))
}

// AppendRow appends a whole row and its line terminator.
func AppendRow(b []byte, vals [][]byte) []byte {
	for i, v := range vals {
		if i > 0 {
			b = append(b, '\t')
		}
		b = AppendField(b, v)
	}
	return append(b, '\n')
}

// ErrBadRow is returned by Reader for text that AppendRow cannot produce.
var ErrBadRow = errors.New("malformed data row")

// Reader reads rows written by AppendRow, for the multi-row INSERT path.
type Reader struct {
	r    *bufio.Reader
	cols int
	line []byte
	buf  []byte
	vals [][]byte
	n    int64
}

// NewReader reads rows of cols fields from r.
func NewReader(r io.Reader, cols int) *Reader {
	// buf starts non-nil so an empty field is an empty, not nil, slice.
	return &Reader{r: bufio.NewReaderSize(r, 256<<10), cols: cols, vals: make([][]byte, cols), buf: make([]byte, 0, 4096)}
}

// Next returns the next row's fields (nil for NULL), or io.EOF. The slices
// are valid until the next call.
func (r *Reader) Next() ([][]byte, error) {
	line, err := r.readLine()
	if err != nil {
		return nil, err
	}
	r.n++
	r.buf = r.buf[:0]
	// Decode into one buffer, then slice it, so a row costs no allocations
	// once the buffer has grown.
	ends := make([]int, 0, r.cols)
	nulls := make([]bool, 0, r.cols)
	field, null := 0, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch c {
		case '\t':
			ends, nulls = append(ends, len(r.buf)), append(nulls, null)
			field, null = field+1, false
			continue
		case '\\':
			i++
			if i == len(line) {
				return nil, fmt.Errorf("%w %d: trailing backslash", ErrBadRow, r.n)
			}
			switch line[i] {
			case '0':
				c = 0
			case 't':
				c = '\t'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case '\\':
				c = '\\'
			case 'N':
				null = true
				continue
			default:
				return nil, fmt.Errorf("%w %d: unknown escape \\%c", ErrBadRow, r.n, line[i])
			}
		}
		r.buf = append(r.buf, c)
	}
	ends, nulls = append(ends, len(r.buf)), append(nulls, null)
	if len(ends) != r.cols {
		return nil, fmt.Errorf("%w %d: %d fields, want %d", ErrBadRow, r.n, len(ends), r.cols)
	}
	start := 0
	for i, e := range ends {
		if nulls[i] {
			r.vals[i] = nil
		} else {
			r.vals[i] = r.buf[start:e:e]
		}
		start = e
	}
	return r.vals, nil
}

// readLine returns one line without its terminator. Escaped newlines never
// appear raw, so a raw '\n' always ends a row.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		frag, err := r.r.ReadSlice('\n')
		r.line = append(r.line, frag...)
		if err == nil {
			return r.line[:len(r.line)-1], nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(r.line) == 0 {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("%w %d: no line terminator (truncated data)", ErrBadRow, r.n+1)
		}
		return nil, err
	}
}
