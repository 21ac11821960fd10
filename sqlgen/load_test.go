package sqlgen

import (
	"testing"

	"github.com/sluice-db/sluice"
)

func TestLoadData(t *testing.T) {
	s := LoadSpec{Table: sluice.TableRef{Schema: "d", Name: "t`x"}, Columns: []LoadColumn{{Name: "a"}, {Name: "b", Via: "CAST(%s AS UNSIGNED)"}, {Name: "c"}}}
	got := LoadData("Reader::r1", s)
	want := "LOAD DATA LOCAL INFILE 'Reader::r1' INTO TABLE `d`.`t``x` CHARACTER SET binary FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (`a`, @sluice_v1, `c`) SET `b` = CAST(@sluice_v1 AS UNSIGNED)"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestInsertRows(t *testing.T) {
	s := LoadSpec{Table: sluice.TableRef{Schema: "d", Name: "t"}, Columns: []LoadColumn{{Name: "a"}, {Name: "b", Via: "CAST(%s AS UNSIGNED)"}}}
	b := s.AppendInsertHead(nil)
	b = s.AppendInsertRow(b, [][]byte{[]byte("x'\x00\\"), nil})
	b = append(b, ',')
	b = s.AppendInsertRow(b, [][]byte{{}, []byte("5")})
	want := "INSERT INTO `d`.`t` (`a`, `b`) VALUES (_binary'x\\'\\0\\\\',NULL),(_binary'',CAST(_binary'5' AS UNSIGNED))"
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestCreateTableAs(t *testing.T) {
	tgt := sluice.TableRef{Schema: "new`db", Name: "n"}
	cases := map[string]string{
		"CREATE TABLE `old` (\n  `a` int\n)":         "CREATE TABLE `new``db`.`n` (\n  `a` int\n)",
		"CREATE TABLE `o``ld` (`a` int)":             "CREATE TABLE `new``db`.`n` (`a` int)",
		"CREATE TABLE `s`.`old` (`a` int)":           "CREATE TABLE `new``db`.`n` (`a` int)",
		"CREATE TABLE plain (`a` int) ENGINE=InnoDB": "CREATE TABLE `new``db`.`n` (`a` int) ENGINE=InnoDB",
	}
	for in, want := range cases {
		got, err := CreateTableAs(in, tgt)
		if err != nil || got != want {
			t.Errorf("CreateTableAs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"CREATE VIEW v AS SELECT 1", "CREATE TABLE `unterminated (a int)"} {
		if _, err := CreateTableAs(bad, tgt); err == nil {
			t.Errorf("CreateTableAs(%q): no error", bad)
		}
	}
}
