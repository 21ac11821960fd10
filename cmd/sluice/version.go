package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

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
			ver, rev, when, dirty := buildVCS()
			if when != "" {
				when = " " + when
			}
			fmt.Fprintf(c.OutOrStdout(), "sluice %s\ncommit %s%s%s\n%s %s/%s\n", ver, rev, dirty, when, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// buildVCS reads the version and commit the binary was built from: what
// make build links in, else what the go command records (go build in a git
// checkout stamps vcs.*; go install module@version stamps only the module
// version, whose pseudo-version ends in the commit's first 12 digits).
func buildVCS() (ver, rev, when, dirty string) {
	ver, rev = sluice.Version, sluice.Commit
	info, ok := debug.ReadBuildInfo()
	if ok {
		ver, rev, when, dirty = fromBuildInfo(info, ver, rev)
	}
	if rev == "" {
		rev = "unknown"
	}
	return
}

func fromBuildInfo(info *debug.BuildInfo, ver, rev string) (string, string, string, string) {
	var when, dirty string
	linked := rev
	if mv := info.Main.Version; mv != "" && mv != "(devel)" {
		if ver == "" || ver == "dev" {
			ver = mv
		}
		if rev == "" {
			if i := strings.LastIndexByte(mv, '-'); i > 0 && len(mv)-i-1 == 12 {
				rev = strings.TrimSuffix(mv[i+1:], "+incompatible")
			}
		}
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if linked == "" {
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
	return ver, rev, when, dirty
}
