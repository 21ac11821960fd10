package decode

import (
	"bytes"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// TestFixedStringLen decodes MYSQL_TYPE_STRING metadata as the server
// writes it: BINARY(16)/UUID, a long CHAR whose high length bits hide in
// the type byte, and ENUM/SET, which are not fixed strings.
func TestFixedStringLen(t *testing.T) {
	tm := &replication.TableMapEvent{
		ColumnType: []byte{mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_VARCHAR},
		// 0xfe10: 16 bytes; 0xce fc: CHAR(255) utf8mb4 = 1020 bytes; ENUM; SET; 0xfe04: 4 bytes.
		ColumnMeta: []uint16{0xfe10, 0xcefc, 0xf701, 0xf801, 0xfe04, 36},
	}
	want := []int{16, 1020, 0, 0, 4, 0}
	for i, w := range want {
		if got := fixedStringLen(tm, i); got != w {
			t.Errorf("column %d: %d, want %d", i, got, w)
		}
	}
}

// TestFixedBinaryWithoutRowMetadata: without binlog_row_metadata=FULL the
// column types come from the schema tracker, and BINARY(N), UUID, INET6 and
// INET4 values are still padded back to their length.
func TestFixedBinaryWithoutRowMetadata(t *testing.T) {
	d, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Feed(queryEvent("db", "CREATE TABLE t (u UUID PRIMARY KEY, a INET6, b INET4, c BINARY(3), v VARBINARY(4), s CHAR(4))"), sluice.Position{File: "f", Pos: 10}); err != nil {
		t.Fatal(err)
	}
	tm := &replication.TableMapEvent{
		Schema: []byte("db"), Table: []byte("t"), ColumnCount: 6,
		ColumnType: []byte{mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_STRING},
		ColumnMeta: []uint16{0xfe10, 0xfe10, 0xfe04, 0xfe03, 4, 0xfe04},
	}
	e, err := d.entry(tm, sluice.Position{File: "f", Pos: 20})
	if err != nil {
		t.Fatal(err)
	}
	row := []any{"\x12\x3e", "", "\x01", nil, "\x01\x00", "ab"}
	convertRow(row, e.conv, e.fixedLen)
	want := []any{append([]byte{0x12, 0x3e}, make([]byte, 14)...), make([]byte, 16), []byte{1, 0, 0, 0}, nil, []byte{1, 0}, "ab"}
	for i := range want {
		wb, wok := want[i].([]byte)
		gb, gok := row[i].([]byte)
		if wok != gok || (wok && !bytes.Equal(wb, gb)) || (!wok && row[i] != want[i]) {
			t.Errorf("column %d: %#v, want %#v", i, row[i], want[i])
		}
	}
}
