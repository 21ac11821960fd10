package dump

// SetAfterInspectHook sets the hook run between reading the tables and the
// snapshot; nil clears it.
func SetAfterInspectHook(f func(attempt int)) { afterInspectHook = f }
