package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
)

// cobraErrorsAsSluice makes cobra's own errors (a bad flag value, an
// unknown flag, a wrong number of arguments, an unknown command) end in
// sluice's one line with a fix, as every other bad input does: cobra gave
// "unknown flag: --treads" with no fix, and "unknown command" for the root
// over four lines (issue 30's bad-input table).
func cobraErrorsAsSluice(root *cobra.Command) {
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return sluice.Errorf(sluice.ErrConfig, cmdName(cmd), "run '"+cmd.CommandPath()+" --help' for its flags", "%v", err)
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Args == nil {
			return
		}
		args := c.Args
		c.Args = func(cmd *cobra.Command, a []string) error {
			err := args(cmd, a)
			if err == nil || isSluiceError(err) {
				return err
			}
			return sluice.Errorf(sluice.ErrConfig, cmdName(cmd), "run '"+cmd.CommandPath()+" --help' for its usage", "%v", err)
		}
	}
	walk(root)
	// The root has no Args of its own, and cobra answers a mistyped command
	// with a message of several lines and no fix.
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		hint := "run 'sluice --help' for the list"
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			hint = "did you mean 'sluice " + s[0] + "'?"
		}
		return sluice.Errorf(sluice.ErrConfig, "command line", hint, "unknown command %q", args[0])
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// cmdName is the command as the user typed it, without "sluice ".
func cmdName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return "command line"
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

func isSluiceError(err error) bool {
	_, ok := err.(*sluice.Error)
	return ok
}

// checkDtxServeFlags refuses the dtx serve flags that a negative value
// silently turned into "no limit" (issue 30's bad-input table).
func checkDtxServeFlags(sec dtxSecurity) error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"max-conns", int64(sec.maxConns)}, {"memory-limit", sec.memLimit}} {
		if f.v < 0 {
			return sluice.Errorf(sluice.ErrConfig, "dtx serve", "give 0 for no limit, or a positive number", "--%s %d is negative", f.name, f.v)
		}
	}
	return nil
}
