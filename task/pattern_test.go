package task

import (
	"testing"

	"github.com/sluice-db/sluice"
)

// TestPatternLanguage: '*' matched no '/' (path.Match), so *.* skipped a
// table a/b in silence, and a schema x.y could only be named x?y.*.
func TestPatternLanguage(t *testing.T) {
	cases := []struct {
		pattern       string
		schema, table string
		want          bool
	}{
		{"*.*", "app", "a/b", true},
		{"*.*", "x.y", "t", true},
		{"app.*", "app", "a/b", true},
		{"app.a/b", "app", "a/b", true},
		{"app.a*", "app", "a/b", true},
		{"`x.y`.*", "x.y", "t", true},
		{"`x.y`.*", "x", "y.t", false},
		{`x\.y.*`, "x.y", "t", true},
		{`x\.y.*`, "xzy", "t", false},
		{"x.y.t", "x", "y.t", true}, // the first '.' splits; later ones are the table's
		{"x.y.t", "x.y", "t", false},
		{"`x.y`.`a/b`", "x.y", "a/b", true},
		{"`x.y`.`a/b`", "x.y", "a/c", false},
		{"`a``b`.t", "a`b", "t", true},
		{"APP.T1", "app", "t1", true},
		{"app.t?", "app", "t1", true},
		{"app.t?", "app", "t12", false},
		{"app.t[0-9]", "app", "t7", true},
		{"app.t[^0-9]", "app", "t7", false},
		{"app.t[!0-9]", "app", "tx", true},
		{`app.t\*`, "app", "t*", true},
		{`app.t\*`, "app", "tx", false},
		{"app.`t*`", "app", "tx", false},
	}
	for _, c := range cases {
		p, err := ParsePattern(c.pattern)
		if err != nil {
			t.Errorf("%q: %v", c.pattern, err)
			continue
		}
		if got := p.Match(c.schema, c.table); got != c.want {
			t.Errorf("%q on %s.%s: %v, want %v", c.pattern, c.schema, c.table, got, c.want)
		}
	}
	for _, bad := range []string{"app", ".t", "app.", "`x.y.*", `app.t\`, "app.t[a"} {
		if p, err := ParsePattern(bad); err == nil {
			t.Errorf("%q parsed as %+v, want an error", bad, p)
		}
	}
	c := &Config{Tables: Tables{Include: []string{"*.*"}}, Routes: []Route{{Schema: "x.y", Table: "a/*", TargetSchema: "z", TargetTable: "c"}}}
	if got := c.Route(sluice.TableRef{Schema: "x.y", Name: "a/b"}); got != (sluice.TableRef{Schema: "z", Name: "c"}) {
		t.Errorf("route of x.y.a/b: %v", got)
	}
	if !c.Selected(sluice.TableRef{Schema: "x.y", Name: "a/b"}) || c.Selected(sluice.TableRef{Schema: "sluice_meta", Name: "a/b"}) {
		t.Error("*.* must select x.y.a/b and never sluice_meta")
	}
}
