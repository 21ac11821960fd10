package difftest

import (
	"strings"
	"testing"
)

// TestDrawClasses: a seed draws the same classes every time, every class
// and every stop class is drawn by some seed, and a class's switch turns
// off that class only, leaving the other classes of each seed as they were.
func TestDrawClasses(t *testing.T) {
	seen := map[string]bool{}
	for seed := int64(1); seed <= 200; seed++ {
		a, b := drawClasses(seed, Features{}), drawClasses(seed, Features{})
		if strings.Join(a.names(), ",") != strings.Join(b.names(), ",") {
			t.Fatalf("seed %d: drew %v, then %v", seed, a.names(), b.names())
		}
		for _, n := range a.names() {
			seen[n] = true
		}
		off := drawClasses(seed, Features{NoXA: true, NoStatementFormat: true})
		for id := classID(0); id < nClasses; id++ {
			want := a.on[id] && id != clsXA
			if off.on[id] != want {
				t.Fatalf("seed %d: -no-xa changed class %s", seed, classInfo[id].name)
			}
		}
		if a.stop != nil && a.stop.name != "statement" && a.stop.name != "mixed" && off.stop != a.stop {
			t.Fatalf("seed %d: -no-statement-format changed the %s stop", seed, a.stop.name)
		}
		if off.stop != nil && (off.stop.name == "statement" || off.stop.name == "mixed") {
			t.Fatalf("seed %d: -no-statement-format drew a %s stop", seed, off.stop.name)
		}
		if n := drawClasses(seed, Features{NoClasses: true}).names(); len(n) != 0 {
			t.Fatalf("seed %d: -no-classes drew %v", seed, n)
		}
	}
	for i := range classInfo {
		if !seen[classInfo[i].name] {
			t.Errorf("no seed of 1..200 draws class %s", classInfo[i].name)
		}
	}
	for _, r := range refusals {
		if !seen["stop:"+r.name] {
			t.Errorf("no seed of 1..200 draws stop class %s", r.name)
		}
	}
}

// TestRefusalPatterns: each stop class's pattern takes the refusal it
// documents and not an unrelated stop.
func TestRefusalPatterns(t *testing.T) {
	unrelated := "apply source transaction 0-1-49: Error 1062: Duplicate entry '1' for key 'PRIMARY'"
	for _, c := range []struct{ class, msg string }{
		{"statement", "replicate at mysql-bin.000001:500 (GTID 0-1-7): a statement-format event (UPDATE t ...) cannot be applied exactly (fix: set binlog_format=ROW)"},
		{"mixed", "event in MIXED format: binlog_format must be ROW"},
		{"target-triggers", "check: target table dt.k_tr has triggers k_tr_ai"},
		{"sequence", "replicate DDL at mysql-bin.000001:9 (CREATE SEQUENCE dt.k_seqs): sequence dt.k_seqs: sluice replicates no sequence; add it to tables.exclude"},
		{"sequence", "refused tables: sluice copies and replicates no sequence: dt.k_seqs"},
		{"sequence", "sluice: migrate dt2850: refused before starting: checks failed: refused tables: invalid configuration: column id of dt_2850.k_sqs defaults to NEXT VALUE FOR dt_2850.k_seqs, and the target has no sequence dt_2850.k_seqs (sluice copies no sequence) (sluice check --config lists every check) (fix: create sequence dt_2850.k_seqs on the target first (SHOW CREATE SEQUENCE on the source), starting past the source's values, or exclude dt_2850.k_sqs)"},
		{"sysversioned", "refused tables: sluice copies and replicates no system-versioned table: dt.k_svs"},
		{"sysversioned", "replicate DDL at mysql-bin.000001:9 (CREATE TABLE dt.k_svs (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING): unsupported DDL"},
	} {
		var sc *stopClass
		for i := range refusals {
			if refusals[i].name == c.class {
				sc = &refusals[i]
			}
		}
		if sc == nil || !sc.pattern.MatchString(c.msg) {
			t.Errorf("class %s: pattern does not take %q", c.class, c.msg)
		}
		if sc != nil && sc.pattern.MatchString(unrelated) {
			t.Errorf("class %s: pattern takes an unrelated stop", c.class)
		}
	}
}

func TestSeedClassesList(t *testing.T) {
	if !testing.Verbose() {
		t.Skip("prints the classes of seeds 1..40 with -v")
	}
	for seed := int64(1); seed <= 40; seed++ {
		t.Logf("seed %d: %v", seed, drawClasses(seed, Features{}).names())
	}
}
