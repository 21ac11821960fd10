package difftest

import (
	"os"
	"regexp"
	"strings"
)

// xaRefusals are the documented refusals of the XA class
// (docs/manual/apply.md, "Two-phase XA transactions"), each the whole last
// line of sluice's log. Both can only follow a copy that was interrupted
// and resumed from a new snapshot while the XA class runs:
//   - the resumed copy's snapshot found a prepared XA transaction;
//   - an XA COMMIT fell between the copy's first and last snapshot.
var xaRefusals = []*regexp.Regexp{
	regexp.MustCompile(`^sluice: dump: snapshot of source \S+: prepared XA transactions on the source \(XA RECOVER\): .+: a full copy followed by replication cannot start while a transaction is prepared, since its XA COMMIT could not be applied exactly \(fix: finish them on the source \(XA COMMIT <xid> or XA ROLLBACK <xid>, as the application that prepared them decides\) or wait until XA RECOVER shows none, then run again; nothing was copied\)$`),
	regexp.MustCompile(`^sluice: .*replicate after the full copy: invalid configuration: the XA transaction \S+ was committed on the source \(GTID \d+-\d+-\d+\) while the interrupted full copy was stopped, so part of the copy holds its rows and part does not \(fix: drop the copied tables and the task's rows in sluice_meta on the target and run sluice migrate --mode all again\)$`),
}

// xaRefused reports whether sluice's stop is a documented XA refusal that
// this seed can meet: the XA class is on and a kill interrupted the copy.
func (s *seedRun) xaRefused() bool {
	if s.w == nil || s.w.cls == nil || !s.w.cls.on[clsXA] || s.res.CopyKills == 0 {
		return false
	}
	last := lastLine(s.sl.log)
	for _, re := range xaRefusals {
		if re.MatchString(last) {
			return true
		}
	}
	return false
}

// snapshotTaken reports whether the task's copy has its first snapshot
// (the XA class waits for it: a transaction prepared before the snapshot
// is refused by design, and one a tester session keeps prepared while a
// statement waits for its rows holds FLUSH TABLES WITH READ LOCK off).
func (s *seedRun) snapshotTaken() bool {
	b, err := os.ReadFile(s.sl.log)
	if err != nil {
		return false
	}
	t := string(b)
	return strings.Contains(t, ", snapshot at ") || strings.Contains(t, "the full copy is complete") || strings.Contains(t, "nothing left to copy")
}

func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
