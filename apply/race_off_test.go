//go:build !race

package apply_test

const raceEnabled = false
