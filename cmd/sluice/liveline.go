package main

import (
	"fmt"
	"strings"

	"github.com/sluice-db/sluice/replicate"
)

// liveLine is the replication status line on a terminal, at most width-1
// columns. It was cut at the terminal's width, so a GTID such as
// 0-1-123456 could read 0-1-123: another, valid-looking transaction. Now
// whole fields are left out, least useful first, and none is ever cut:
// a number shown is the number.
func liveLine(s replicate.Status, width int) string {
	type field struct {
		text string
		keep int // the lowest-kept fields go first
	}
	fields := []field{
		{s.Stage, 5},
		{fmt.Sprintf("lag %.1f s", s.LagSeconds), 5},
		{fmt.Sprintf("%.0f events/s", s.EventsPerSec), 1},
		{fmt.Sprintf("%.0f txns/s", s.TxnsPerSec), 2},
		{fmt.Sprintf("applied %s:%d", s.Applied.File, s.Applied.Pos), 4},
	}
	if s.Applied.GTIDSet != "" {
		fields = append(fields, field{"gtid=" + s.Applied.GTIDSet, 3})
	}
	join := func() string {
		var parts []string
		for _, f := range fields {
			if f.text != "" {
				parts = append(parts, f.text)
			}
		}
		return strings.Join(parts, " | ")
	}
	for level := 1; level <= 5; level++ {
		line := join()
		if len([]rune(line)) <= width-1 || width <= 1 {
			return line
		}
		for i := range fields {
			if fields[i].keep == level {
				fields[i].text = ""
			}
		}
	}
	return ""
}
