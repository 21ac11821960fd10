package task

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

func TestOnMissingRow(t *testing.T) {
	base := "name: demo\ntables: {include: [\"db.*\"]}\nincremental: {on-missing-row: %s}\n"
	for yamlValue, want := range map[string]string{"stop": "stop", "skip": "skip", "''": ""} {
		c, err := Parse([]byte(fmt.Sprintf(base, yamlValue)))
		if err != nil {
			t.Fatalf("on-missing-row %s: %v", yamlValue, err)
		}
		if c.Incremental.OnMissingRow != want {
			t.Errorf("on-missing-row %s parsed as %q, want %q", yamlValue, c.Incremental.OnMissingRow, want)
		}
	}
	_, err := Parse([]byte(fmt.Sprintf(base, "ignore")))
	if !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), "on-missing-row") {
		t.Fatalf("on-missing-row ignore: got %v, want a config error naming the key", err)
	}
}
