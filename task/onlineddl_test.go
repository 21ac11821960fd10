package task

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

// TestOnlineDDL: incremental.online-ddl names the online schema change
// tool; unset means none (issue 29, N5).
func TestOnlineDDL(t *testing.T) {
	base := "name: demo\ntables: {include: [\"db.*\"]}\nincremental: {online-ddl: %s}\n"
	for yamlValue, want := range map[string]string{"gh-ost": "gh-ost", "pt-osc": "pt-osc", "none": "none", "''": ""} {
		c, err := Parse([]byte(fmt.Sprintf(base, yamlValue)))
		if err != nil {
			t.Fatalf("online-ddl %s: %v", yamlValue, err)
		}
		if c.Incremental.OnlineDDL != want {
			t.Errorf("online-ddl %s parsed as %q, want %q", yamlValue, c.Incremental.OnlineDDL, want)
		}
	}
	_, err := Parse([]byte(fmt.Sprintf(base, "true")))
	if !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), "online-ddl") {
		t.Fatalf("online-ddl true: got %v, want a config error naming the key", err)
	}
}
