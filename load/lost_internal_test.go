package load

import (
	"testing"

	"github.com/sluice-db/sluice"
)

func TestParseKey(t *testing.T) {
	for _, ref := range []sluice.TableRef{{Schema: "s", Name: "t"}, {Schema: "a.b", Name: "c`d"}, {Schema: "x``", Name: "."}} {
		got, err := parseKey(tblKey(ref))
		if err != nil || got != ref {
			t.Errorf("parseKey(%q) = %v, %v; want %v", tblKey(ref), got, err, ref)
		}
	}
	for _, bad := range []string{"", "s.t", "`s`", "`s`.`t", "`s`.`t`.`u`"} {
		if got, err := parseKey(bad); err == nil {
			t.Errorf("parseKey(%q) = %v, want an error", bad, got)
		}
	}
}
