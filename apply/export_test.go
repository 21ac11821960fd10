package apply

// SetAfterDDLHook makes applyDDL call f after a DDL ran on the target and
// before its checkpoint; an error from f stops the applier there, as a crash
// in that window would. It returns a func that removes the hook.
func SetAfterDDLHook(f func() error) func() {
	afterDDLHook = f
	return func() { afterDDLHook = nil }
}
