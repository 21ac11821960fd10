package task

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-db/sluice"
)

func TestCommitOrder(t *testing.T) {
	base := "name: demo\ntables: {include: [\"db.*\"]}\nincremental: {commit-order: %s}\n"
	for yamlValue, want := range map[string]string{"source": "source", "relaxed": "relaxed", "''": ""} {
		c, err := Parse([]byte(fmt.Sprintf(base, yamlValue)))
		if err != nil {
			t.Fatalf("commit-order %s: %v", yamlValue, err)
		}
		if c.Incremental.CommitOrder != want {
			t.Errorf("commit-order %s parsed as %q, want %q", yamlValue, c.Incremental.CommitOrder, want)
		}
	}
	if Default().Incremental.CommitOrder != "" {
		t.Error("the default must keep source order")
	}
	if _, err := Parse([]byte(fmt.Sprintf(base, "fast"))); !errors.Is(err, sluice.ErrConfig) {
		t.Fatalf("commit-order fast: got %v, want a config error", err)
	}
}
