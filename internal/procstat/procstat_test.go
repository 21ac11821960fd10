package procstat

import "testing"

func TestParse(t *testing.T) {
	busy, idle, ok := Parse([]byte("cpu  100 5 50 800 20 1 4 2 7 0\ncpu0 1 2 3 4 5 6 7 8\n"))
	if !ok || busy != 100+5+50+1+4+2 || idle != 800+20 {
		t.Fatalf("busy %v idle %v ok %v", busy, idle, ok)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4 5", "cpu 1 2"} {
		if _, _, ok := Parse([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
