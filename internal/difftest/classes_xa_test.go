package difftest

import (
	"testing"

	"github.com/sluice-db/sluice/dump"
)

// TestXARefusalPatterns: the XA class accepts exactly the documented
// refusals, whole lines as sluice prints them, and nothing near them.
func TestXARefusalPatterns(t *testing.T) {
	ok := []string{
		"sluice: " + dump.PreparedXAError("dump: snapshot of source 127.0.0.1:3306", []string{"'dt4_17'", "X'01',X'',1"}).Error(),
		"sluice: replicate after the full copy: invalid configuration: the XA transaction X'6474345f3137',X'',1 was committed on the source (GTID 0-40585-360) while the interrupted full copy was stopped, so part of the copy holds its rows and part does not (fix: drop the copied tables and the task's rows in sluice_meta on the target and run sluice migrate --mode all again)",
	}
	bad := []string{
		"sluice: dump: snapshot of source 127.0.0.1:3306: prepared XA transactions on the source (XA RECOVER): 'x': a full copy followed by replication cannot start",
		"sluice: apply source transaction 0-1-5: XA COMMIT X'01',X'',1 of a transaction whose prepare sluice never read (fix: copy the tables again)",
		"sluice: replicate after the full copy: invalid configuration: the XA transaction X'01',X'',1 was committed on the source (GTID 0-1-5) while the interrupted full copy was stopped, so part of the copy holds its rows and part does not",
	}
	match := func(line string) bool {
		for _, re := range xaRefusals {
			if re.MatchString(line) {
				return true
			}
		}
		return false
	}
	for _, l := range ok {
		if !match(l) {
			t.Errorf("the documented refusal is not accepted: %s", l)
		}
	}
	for _, l := range bad {
		if match(l) {
			t.Errorf("accepted as a documented XA refusal: %s", l)
		}
	}
}
