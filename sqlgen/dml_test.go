package sqlgen

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

func table(pk bool) *sluice.Table {
	t := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: "t"}, Columns: []sluice.Column{
		{Name: "id", DataType: "int"}, {Name: "v", DataType: "varchar", Nullable: true}, {Name: "f", DataType: "float"},
		{Name: "g", DataType: "int", Generated: true},
	}}
	if pk {
		t.PK = []int{0}
	}
	return t
}

func TestDML(t *testing.T) {
	to := sluice.TableRef{Schema: "d", Name: "t`x"}
	s := NewTableSpec(table(true), to)
	r1 := []any{int32(1), "a", float32(1.5), int32(9)}
	r2 := []any{int32(2), nil, float32(2), int32(9)}
	cases := []struct{ got, want string }{
		{string(s.AppendInsert(nil, r1, r2)), "INSERT INTO `d`.`t``x` (`id`,`v`,`f`) VALUES (1,'a',1.5),(2,NULL,2)"},
		{string(s.AppendDelete(nil, r1)), "DELETE FROM `d`.`t``x` WHERE `id`=1"},
		{string(s.AppendDeleteIn(nil, r1, r2)), "DELETE FROM `d`.`t``x` WHERE `id` IN (1,2)"},
	}
	up, ok := s.AppendUpdate(nil, r1, []any{int32(1), "b", float32(1.5), int32(10)})
	cases = append(cases, struct{ got, want string }{string(up), "UPDATE `d`.`t``x` SET `v`='b' WHERE `id`=1"})
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got  %s\nwant %s", c.got, c.want)
		}
	}
	if !ok {
		t.Fatal("update reported no change")
	}
	r3 := []any{int32(3), "c", float32(3), int32(9)}
	if got, want := string(s.AppendUpdateJoin(nil, [][]any{r1, r2}, [][]any{{int32(1), nil, float32(2), int32(9)}, r3})),
		"UPDATE (SELECT 1 AS `k0`,1 AS `c0`,NULL AS `c1`,2 AS `c2` UNION ALL SELECT 2,3,'c',3) AS `v` STRAIGHT_JOIN `d`.`t``x` AS `t` ON `t`.`id`=`v`.`k0` SET `t`.`v`=`v`.`c1`,`t`.`f`=`v`.`c2`"; got != want {
		t.Errorf("update join\ngot  %s\nwant %s", got, want)
	}
	if b, ok := s.AppendUpdate([]byte("x"), r1, r1); ok || string(b) != "x" {
		t.Fatalf("no-op update produced %q, %v", b, ok)
	}

	k := NewTableSpec(table(false), to)
	if got, want := string(k.AppendDelete(nil, r2)), "DELETE FROM `d`.`t``x` WHERE `id`<=>2 AND `v`<=>NULL AND `f`<=>2e+00 LIMIT 1"; got != want {
		t.Errorf("keyless delete\ngot  %s\nwant %s", got, want)
	}
	q, args := k.Update(r1, r2)
	if want := "UPDATE `d`.`t``x` SET `id`=?,`v`=?,`f`=? WHERE `id`<=>? AND CAST(`v` AS BINARY)<=>? AND `f`<=>? LIMIT 1"; q != want {
		t.Errorf("placeholder update\ngot  %s\nwant %s", q, want)
	}
	if want := []any{int32(2), nil, float32(2), int32(1), []byte("a"), float64(1.5)}; !reflect.DeepEqual(args, want) {
		t.Errorf("args %v, want %v", args, want)
	}
	// Keyless rows are matched by exact bytes and exact float values.
	if got, want := string(k.AppendDelete(nil, []any{int32(1), "a ", float32(0.1), int32(0)})),
		"DELETE FROM `d`.`t``x` WHERE `id`<=>1 AND CAST(`v` AS BINARY)<=>_binary'a ' AND `f`<=>1.0000000149011612e-01 LIMIT 1"; got != want {
		t.Errorf("keyless exact delete\ngot  %s\nwant %s", got, want)
	}
	q, args = s.Insert(r1)
	if q != "INSERT INTO `d`.`t``x` (`id`,`v`,`f`) VALUES (?,?,?)" || len(args) != 3 {
		t.Errorf("placeholder insert %s %v", q, args)
	}
}

// TestFloatKeyIsMatchedExactly: a WHERE by a FLOAT key writes the stored
// value as its exact double. The shortest form (1.0000001) is a DECIMAL
// that the FLOAT column, read as the double 1.0000001192092896, does not
// equal: an UPDATE by such a key matched no row (difftest seed 2535).
func TestFloatKeyIsMatchedExactly(t *testing.T) {
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: "t"}, Columns: []sluice.Column{
		{Name: "f", DataType: "float"}, {Name: "v", DataType: "int", Nullable: true}}, PK: []int{0}}
	s := NewTableSpec(tb, tb.Ref)
	row := []any{float32(1.0000001), int32(7)}
	for name, got := range map[string]string{
		"delete":    string(s.AppendDelete(nil, row)),
		"delete in": string(s.AppendDeleteIn(nil, row)),
		"exists":    string(s.AppendRowExists(nil, row)),
	} {
		if !strings.Contains(got, "`f`=1.0000001192092896e+00") && !strings.Contains(got, "IN (1.0000001192092896e+00)") {
			t.Errorf("%s: %s does not compare the key with its exact double", name, got)
		}
	}
}
