package dumpfmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
)

func TestAppendFieldEscapes(t *testing.T) {
	cases := []struct {
		in   []byte
		want string
	}{
		{nil, `\N`},
		{[]byte{}, ``},
		{[]byte(`\N`), `\\N`},
		{[]byte("a\tb\nc\rd\\e\x00f'\""), `a\tb\nc\rd\\e\0f'"`},
		{[]byte("😀"), "😀"},
	}
	for _, c := range cases {
		if got := string(AppendField(nil, c.in)); got != c.want {
			t.Errorf("AppendField(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRowRoundTrip(t *testing.T) {
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	rows := [][][]byte{
		{every, nil, []byte{}},
		{[]byte(`\N`), []byte("N"), []byte("\\")},
		{[]byte{}, []byte{}, []byte{}},
		{nil, nil, nil},
		{[]byte("\n"), []byte("\t\t"), []byte(strings.Repeat("x", 300000))},
	}
	var buf []byte
	for _, r := range rows {
		buf = AppendRow(buf, r)
	}
	if n := bytes.Count(buf, []byte{'\n'}); n != len(rows) {
		t.Fatalf("%d raw newlines for %d rows: a value's newline was not escaped", n, len(rows))
	}
	rd := NewReader(bytes.NewReader(buf), 3)
	for i, want := range rows {
		got, err := rd.Next()
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		for j := range want {
			if (want[j] == nil) != (got[j] == nil) {
				t.Fatalf("row %d col %d: NULL-ness differs: got %v want %v", i, j, got[j] == nil, want[j] == nil)
			}
			if !bytes.Equal(want[j], got[j]) {
				t.Fatalf("row %d col %d: got %q want %q", i, j, got[j], want[j])
			}
		}
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last row: %v, want EOF", err)
	}
}

func TestReaderRejectsTruncated(t *testing.T) {
	for _, in := range []string{"1\t2", "1\t2\t3\n", "1\\q\t2\n", "1\t2\\"} {
		rd := NewReader(strings.NewReader(in), 2)
		if _, err := rd.Next(); !errors.Is(err, ErrBadRow) {
			t.Errorf("%q: err = %v, want ErrBadRow", in, err)
		}
	}
}

func TestKeyJSONKeepsTypes(t *testing.T) {
	r := chunk.Range{Index: 3, Lo: []any{"é😀", []byte{0, 255}, nil}, Hi: []any{"", []byte{}, "x"}}
	b, err := json.Marshal(PlanOf([]chunk.Range{r, {Index: 4}}))
	if err != nil {
		t.Fatal(err)
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	got := p.Ranges()
	if !reflect.DeepEqual(got[0], r) {
		t.Fatalf("round trip: got %#v want %#v", got[0], r)
	}
	if got[1].Lo != nil || got[1].Hi != nil {
		t.Fatalf("open bounds came back as %#v", got[1])
	}
}

func TestFileNames(t *testing.T) {
	ref := sluice.TableRef{Schema: "a.b", Name: "c/d e"}
	if got := ChunkFile(ref, 7); got != "a%2Eb.c%2Fd%20e.00007.tsv" {
		t.Fatalf("ChunkFile = %q", got)
	}
	if a, b := TableSchemaFile(sluice.TableRef{Schema: "a.b", Name: "c"}), TableSchemaFile(sluice.TableRef{Schema: "a", Name: "b.c"}); a == b {
		t.Fatalf("different tables share the schema file %q", a)
	}
}

func TestKinds(t *testing.T) {
	cases := map[string]string{"float": "CAST(`c` AS DOUBLE)", "bit": "CAST(`c` AS UNSIGNED)", "year": "CAST(`c` AS UNSIGNED)", "double": "`c`", "json": "`c`"}
	for typ, want := range cases {
		if got := SelectExpr(sluice.Column{Name: "c", DataType: typ}); got != want {
			t.Errorf("SelectExpr(%s) = %q, want %q", typ, got, want)
		}
	}
	if LoadVia(sluice.Column{DataType: "json"}) == "" || LoadVia(sluice.Column{DataType: "varchar"}) != "" {
		t.Error("LoadVia: json must convert, varchar must not")
	}
	// MariaDB's UUID/INET6/INET4 read a binary string as native bytes:
	// their text form must be loaded as text.
	for _, typ := range []string{"uuid", "inet6", "inet4"} {
		if got := LoadVia(sluice.Column{DataType: typ}); got != "CONVERT(%s USING ascii)" {
			t.Errorf("LoadVia(%s) = %q", typ, got)
		}
	}
}
