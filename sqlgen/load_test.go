package sqlgen

import (
	"testing"

	"github.com/sluice-db/sluice"
)

func TestLoadData(t *testing.T) {
	head := " CHARACTER SET binary FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' ("
	cases := []struct {
		name string
		file string
		spec LoadSpec
		want string
	}{
		{"plain", "Reader::r1", LoadSpec{Table: sluice.TableRef{Schema: "d", Name: "t"}, Columns: []LoadColumn{{Name: "a"}, {Name: "b"}}},
			"LOAD DATA LOCAL INFILE 'Reader::r1' INTO TABLE `d`.`t`" + head + "`a`, `b`)"},
		{"via", "Reader::r1", LoadSpec{Table: sluice.TableRef{Schema: "d", Name: "t`x"}, Columns: []LoadColumn{{Name: "a"}, {Name: "b", Via: "CAST(%s AS UNSIGNED)"}, {Name: "c"}}},
			"LOAD DATA LOCAL INFILE 'Reader::r1' INTO TABLE `d`.`t``x`" + head + "`a`, @sluice_v1, `c`) SET `b` = CAST(@sluice_v1 AS UNSIGNED)"},
		// The variable is numbered by the column's place, so two of them never clash.
		{"two vias", "f", LoadSpec{Table: sluice.TableRef{Schema: "d", Name: "t"}, Columns: []LoadColumn{{Name: "b1", Via: "CAST(%s AS UNSIGNED)"}, {Name: "x"}, {Name: "g", Via: "ST_GeomFromWKB(%s)"}}},
			"LOAD DATA LOCAL INFILE 'f' INTO TABLE `d`.`t`" + head + "@sluice_v0, `x`, @sluice_v2) SET `b1` = CAST(@sluice_v0 AS UNSIGNED), `g` = ST_GeomFromWKB(@sluice_v2)"},
		{"quoted names", "it's\\", LoadSpec{Table: sluice.TableRef{Schema: "a.b", Name: "ü"}, Columns: []LoadColumn{{Name: "c`d"}, {Name: "e.f", Via: "UNHEX(%s)"}}},
			"LOAD DATA LOCAL INFILE 'it\\'s\\\\' INTO TABLE `a.b`.`ü`" + head + "`c``d`, @sluice_v1) SET `e.f` = UNHEX(@sluice_v1)"},
	}
	for _, c := range cases {
		if got := LoadData(c.file, c.spec); got != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestLoadSpecInsert(t *testing.T) {
	s := LoadSpec{Table: sluice.TableRef{Schema: "d", Name: "t`x"}, Columns: []LoadColumn{{Name: "a"}, {Name: "b", Via: "CAST(%s AS UNSIGNED)"}}}
	cases := []struct {
		name string
		rows [][][]byte
		want string
	}{
		{"one row", [][][]byte{{[]byte("1"), []byte("2")}},
			"INSERT INTO `d`.`t``x` (`a`, `b`) VALUES (_binary'1',CAST(_binary'2' AS UNSIGNED))"},
		// NULL skips the conversion; an empty value is an empty literal.
		{"NULL and empty", [][][]byte{{[]byte("x'\x00\\"), nil}, {{}, []byte("5")}},
			"INSERT INTO `d`.`t``x` (`a`, `b`) VALUES (_binary'x\\'\\0\\\\',NULL),(_binary'',CAST(_binary'5' AS UNSIGNED))"},
		{"all NULL", [][][]byte{{nil, nil}},
			"INSERT INTO `d`.`t``x` (`a`, `b`) VALUES (NULL,NULL)"},
		{"bytes", [][][]byte{{{0xff, 0x00, '\n'}, {0x1a}}},
			"INSERT INTO `d`.`t``x` (`a`, `b`) VALUES (_binary'\xff\\0\\n',CAST(_binary'\\Z' AS UNSIGNED))"},
	}
	for _, c := range cases {
		b := s.AppendInsertHead(nil)
		for i, r := range c.rows {
			if i > 0 {
				b = append(b, ',')
			}
			b = s.AppendInsertRow(b, r)
		}
		if string(b) != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, b, c.want)
		}
	}
}
