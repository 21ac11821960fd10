package main

import "strings"

// roundOrder is the order of the rows in round (1-based): rotated by one
// row per round, a "sluice B" row kept next to its twin, and the twins'
// order swapped every other round.
func roundOrder(selected []row, round int) []row {
	var groups [][]row
	for _, r := range selected {
		if n := len(groups); n > 0 && r.coordinator == "sluice-b" && groups[n-1][0].name == "sluice"+strings.TrimPrefix(r.name, "sluice B") {
			if round%2 == 0 {
				groups[n-1] = []row{r, groups[n-1][0]}
			} else {
				groups[n-1] = append(groups[n-1], r)
			}
			continue
		}
		groups = append(groups, []row{r})
	}
	if len(groups) == 0 {
		return nil
	}
	var out []row
	for i := range groups {
		out = append(out, groups[(round-1+i)%len(groups)]...)
	}
	return out
}
