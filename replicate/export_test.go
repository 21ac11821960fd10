package replicate

// Exports for the external tests.
var (
	Fence      = waitFence
	OpenFenced = openFenced
)
