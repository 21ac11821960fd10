//go:build race

package apply_test

// raceEnabled: the race detector multiplies memory use, so the memory
// test measures a child built without it.
const raceEnabled = true
