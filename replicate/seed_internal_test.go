package replicate

import (
	"testing"

	"github.com/sluice-db/sluice"
)

func TestParseQuoted(t *testing.T) {
	for _, ref := range []sluice.TableRef{{Schema: "a", Name: "b"}, {Schema: "we`ird", Name: "x.y"}, {Schema: "``", Name: "`"}, {Schema: "é", Name: " "}} {
		got, ok := parseQuoted(ref.Quoted())
		if !ok || got != ref {
			t.Errorf("parseQuoted(%s) = %v %v, want %v", ref.Quoted(), got, ok, ref)
		}
	}
	for _, bad := range []string{"", "a.b", "`a`", "`a`.", "`a`.`b", "`a`.`b`x", "`a`x`b`"} {
		if got, ok := parseQuoted(bad); ok {
			t.Errorf("parseQuoted(%q) = %v, want refusal", bad, got)
		}
	}
}
