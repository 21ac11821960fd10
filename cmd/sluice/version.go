package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
)

func init() { register(newVersionCmd) }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print sluice's version, commit and Go version",
		Example: `  sluice version
  sluice version | head -1`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			rev, when, dirty := buildVCS()
			if when != "" {
				when = " " + when
			}
			fmt.Fprintf(c.OutOrStdout(), "sluice %s\ncommit %s%s%s\n%s %s/%s\n", sluice.Version, rev, dirty, when, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// buildVCS reads the commit the binary was built from, as the go command
// records it (go build in a git checkout).
func buildVCS() (rev, when, dirty string) {
	rev = sluice.Commit
	if rev == "" {
		rev = "unknown"
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if sluice.Commit == "" {
				rev = s.Value
			}
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = " (modified)"
			}
		}
	}
	return
}
