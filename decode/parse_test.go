package decode_test

import (
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestRowsDecodeSameAsGoMySQL: the decoder's parser (NewParser, which
// decodes the rows of an all-signed table without go-mysql's per-row
// UnsignedMap) decodes every row image of a seeded random workload to the
// same values, of the same Go types, as go-mysql's own rows decoding, and
// leaves each table map's signedness bitmap as it found it. The workload
// covers a table whose numeric columns are all signed (the changed path)
// and one with unsigned columns holding values past the signed range (the
// unchanged path), in single- and multi-row INSERT, UPDATE and DELETE.
func TestRowsDecodeSameAsGoMySQL(t *testing.T) {
	seed := sandboxtest.Seed(t)
	r := rand.New(rand.NewSource(seed))
	src := sandboxtest.MustOpen(t, srcInst, "")
	sandboxtest.MustExec(t, src, "CREATE DATABASE IF NOT EXISTS parsesame", "FLUSH BINARY LOGS")
	file := masterStatus(t, src).File
	// YEAR counts as unsigned in the signedness bitmap: only the second
	// table has one, so the first takes the changed path.
	cols := "a TINYINT, b SMALLINT, c MEDIUMINT, d INT, e BIGINT, f DECIMAL(12,3), g FLOAT, h DOUBLE, j BIT(10), " +
		"k CHAR(20), l VARCHAR(40), m BLOB, n DATETIME(3), o TIMESTAMP(6) NULL, p ENUM('x','y','z'), q SET('x','y','z'), r JSON, s BINARY(6)"
	sandboxtest.MustExec(t, src,
		"CREATE TABLE parsesame.sg (id INT PRIMARY KEY, "+cols+", i INT)",
		"CREATE TABLE parsesame.us (id INT UNSIGNED PRIMARY KEY, "+strings.NewReplacer("INT,", "INT UNSIGNED,").Replace(cols)+", i YEAR)")
	val := func(col string, unsigned bool) string {
		if r.Intn(6) == 0 {
			return "NULL"
		}
		ints := map[string]uint{"a": 8, "b": 16, "c": 24, "d": 32, "e": 64}
		if bits, ok := ints[col]; ok {
			v := r.Uint64() >> (64 - bits)
			if unsigned {
				return fmt.Sprint(v)
			}
			return fmt.Sprint(int64(v<<(64-bits)) >> (64 - bits)) // sign-extended: negative half the time
		}
		switch col {
		case "f":
			return fmt.Sprintf("%d.%03d", r.Intn(1e9)-5e8, r.Intn(1000))
		case "g", "h":
			return fmt.Sprint(float32(r.NormFloat64() * math.Pow(10, float64(r.Intn(12)))))
		case "i": // YEAR in us, INT in sg
			return fmt.Sprint(1901 + r.Intn(254))
		case "j":
			return fmt.Sprint(r.Intn(1024))
		case "k", "l":
			return fmt.Sprintf("'%x'", r.Int63n(1<<uint(r.Intn(60)+1)))
		case "m", "s":
			return fmt.Sprintf("X'%016x", r.Uint64())[:2+2*(1+r.Intn(6))] + "'"
		case "n":
			return fmt.Sprintf("'20%02d-%02d-%02d 12:%02d:%02d.%03d'", r.Intn(30), 1+r.Intn(12), 1+r.Intn(28), r.Intn(60), r.Intn(60), r.Intn(1000))
		case "o":
			return fmt.Sprintf("'2020-%02d-%02d 01:02:03.%06d'", 1+r.Intn(12), 1+r.Intn(28), r.Intn(1e6))
		case "p":
			return fmt.Sprintf("'%c'", 'x'+r.Intn(3))
		case "q":
			return []string{"''", "'x'", "'x,z'", "'y,z'"}[r.Intn(4)]
		case "r":
			return fmt.Sprintf(`'{"k": %d, "s": "%x"}'`, r.Intn(100)-50, r.Int63())
		}
		panic(col)
	}
	names := strings.Fields("a b c d e f g h j k l m n o p q r s i")
	row := func(id int, unsigned bool) string {
		vs := []string{fmt.Sprint(id)}
		for _, c := range names {
			vs = append(vs, val(c, unsigned))
		}
		return "(" + strings.Join(vs, ",") + ")"
	}
	ids := map[string][]int{}
	for i := 0; i < 300; i++ {
		tb := []string{"sg", "us"}[r.Intn(2)]
		unsigned := tb == "us"
		switch op := r.Intn(10); {
		case op < 5 || len(ids[tb]) < 3:
			n := 1 + r.Intn(4)
			var rows []string
			for j := 0; j < n; j++ {
				ids[tb] = append(ids[tb], len(ids[tb])+1)
				rows = append(rows, row(len(ids[tb]), unsigned))
			}
			sandboxtest.MustExec(t, src, "INSERT INTO parsesame."+tb+" VALUES "+strings.Join(rows, ","))
		case op < 8:
			c := names[r.Intn(len(names))]
			sandboxtest.MustExec(t, src, fmt.Sprintf("UPDATE parsesame.%s SET %s = %s WHERE id %% %d = %d", tb, c, val(c, unsigned), 1+r.Intn(4), r.Intn(2)))
		default:
			sandboxtest.MustExec(t, src, fmt.Sprintf("DELETE FROM parsesame.%s WHERE id = %d", tb, ids[tb][r.Intn(len(ids[tb]))]))
		}
	}
	var dir string
	if err := src.QueryRow("SELECT @@log_bin_basename").Scan(&dir); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, src, "FLUSH BINARY LOGS")
	path := filepath.Join(filepath.Dir(dir), file)

	// go-mysql's own rows decoding: the decoder's parser without the hook.
	plain := decode.NewParser("mariadb")
	plain.SetRowsEventDecodeFunc(nil)
	want, _, _ := parseRows(t, plain, path)
	got, images, restored := parseRows(t, decode.NewParser("mariadb"), path)
	if images["sg signed"] < 100 || images["us unsigned"] < 100 || len(images) != 2 {
		t.Fatalf("the workload does not cover both paths (images per table and signedness): %v", images)
	}
	if len(got) != len(want) {
		t.Fatalf("%d row images, go-mysql decodes %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row image %d (seed %d):\n got  %s\n want %s", i, seed, got[i], want[i])
		}
	}
	if !restored {
		t.Fatal("a table map's signedness bitmap was not put back after its rows were decoded")
	}
}

// parseRows decodes the rows events of a binlog file with p: every row
// image as text (each value's Go type and value), the image count per
// table, and whether every table map with numeric columns kept a
// signedness bitmap after its rows were decoded. A table counts as
// signed when its bitmap marks no column unsigned.
func parseRows(t *testing.T, p *replication.BinlogParser, path string) ([]string, map[string]int, bool) {
	t.Helper()
	var out []string
	images := map[string]int{}
	restored := true
	err := p.ParseFile(path, 0, func(ev *replication.BinlogEvent) error {
		re, ok := ev.Event.(*replication.RowsEvent)
		if !ok || string(re.Table.Schema) != "parsesame" {
			return nil
		}
		numeric := false
		for i := range re.Table.ColumnType {
			numeric = numeric || re.Table.IsNumericColumn(i)
		}
		restored = restored && (!numeric || len(re.Table.SignednessBitmap) > 0)
		kind := " signed"
		for _, b := range re.Table.SignednessBitmap {
			if b != 0 {
				kind = " unsigned"
			}
		}
		for _, row := range re.Rows {
			var b strings.Builder
			b.WriteString(string(re.Table.Table))
			for _, v := range row {
				fmt.Fprintf(&b, " %T:%#v", v, v)
			}
			out = append(out, b.String())
			images[string(re.Table.Table)+kind]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, images, restored
}

// TestMariaGTIDText: the decoder's GTID text is go-mysql's.
func TestMariaGTIDText(t *testing.T) {
	r := rand.New(rand.NewSource(sandboxtest.Seed(t)))
	gs := []mysql.MariadbGTID{{}, {DomainID: 0, ServerID: 1, SequenceNumber: 0}, {DomainID: math.MaxUint32, ServerID: math.MaxUint32, SequenceNumber: math.MaxUint64}}
	for i := 0; i < 1000; i++ {
		gs = append(gs, mysql.MariadbGTID{DomainID: r.Uint32() >> r.Intn(32), ServerID: r.Uint32() >> r.Intn(32), SequenceNumber: r.Uint64() >> r.Intn(64)})
	}
	for _, g := range gs {
		if got, want := decode.MariaGTIDString(&g), g.String(); got != want {
			t.Fatalf("%+v: %q, go-mysql says %q", g, got, want)
		}
	}
}
