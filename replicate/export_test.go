package replicate

// Exports for the external tests.
var (
	Fence      = fence
	OpenFenced = openFenced
)
