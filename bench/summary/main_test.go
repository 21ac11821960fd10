package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummaryRedrawsPage: the table between the markers is replaced (not
// appended to), has one row per seed with the ratio computed from the two
// figures, and every seed gets its chart.
func TestSummaryRedrawsPage(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "r.json")
	page := filepath.Join(dir, "p.md")
	must(t, os.WriteFile(in, []byte(`{"machine":"m","seeds":[
	 {"seed":"A","file":"a","what":"w","command":"c","date":"d","commit":"x","unit":"u","peer":"P","rows":[{"label":"l","sluice":30,"peer":10}],"goal":"g","met":"yes","detail":"a.md"},
	 {"seed":"B","file":"b","what":"w","command":"c","date":"d","commit":"x","unit":"u","peer":"Q","rows":[{"label":"l","sluice":5,"peer":20,"extra":{"floor":7}}],"goal":"g","met":"no","detail":"b.md"}]}`), 0o644))
	must(t, os.WriteFile(page, []byte("head\n"+begin+"\nold table\n"+end+"\ntail\n"), 0o644))
	for i := 0; i < 2; i++ { // twice: the second run must give the same page
		must(t, run(in, page, dir))
	}
	b, err := os.ReadFile(page)
	must(t, err)
	s := string(b)
	for _, want := range []string{"head\n", "tail\n", "| 3.00x |", "| 0.25x |", "(floor: 7)", "summary-a.svg", "summary-b.svg"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old table") || strings.Count(s, "| [A](a.md)") != 1 {
		t.Errorf("table not replaced exactly once:\n%s", s)
	}
	for _, f := range []string{"summary-a.svg", "summary-b.svg"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !strings.HasPrefix(string(b), "<svg") {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSummaryRefusesBadInput(t *testing.T) {
	for name, r := range map[string]Results{
		"no rows":   {Seeds: []Seed{{Seed: "A", File: "a", Command: "c", Date: "d", Goal: "g"}}},
		"zero peer": {Seeds: []Seed{{Seed: "A", File: "a", Command: "c", Date: "d", Goal: "g", Rows: []Row{{Label: "l", Sluice: 1}}}}},
		"dup file":  {Seeds: []Seed{{Seed: "A", File: "a", Command: "c", Date: "d", Goal: "g", Rows: []Row{{Sluice: 1, Peer: 1}}}, {Seed: "B", File: "a", Command: "c", Date: "d", Goal: "g", Rows: []Row{{Sluice: 1, Peer: 1}}}}},
		"no cmd":    {Seeds: []Seed{{Seed: "A", File: "a", Date: "d", Goal: "g", Rows: []Row{{Sluice: 1, Peer: 1}}}}},
	} {
		if err := r.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
