package main

import (
	"runtime/debug"
	"testing"
)

// go install github.com/sluice-db/sluice/cmd/sluice@<commit> stamps no vcs.*
// settings, only the module's pseudo-version: the commit comes from it.
func TestVersionFromGoInstall(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261128031850-6873e00abcde"}}
	ver, rev, _, _ := fromBuildInfo(info, "dev", "")
	if ver != "v0.0.0-20261128031850-6873e00abcde" || rev != "6873e00abcde" {
		t.Fatalf("version %q commit %q", ver, rev)
	}
	// go build in a checkout: the full revision and its state.
	info = &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "6873e00abcdef0123456789"}, {Key: "vcs.modified", Value: "true"}}}
	ver, rev, _, dirty := fromBuildInfo(info, "dev", "")
	if ver != "dev" || rev != "6873e00abcdef0123456789" || dirty == "" {
		t.Fatalf("version %q commit %q dirty %q", ver, rev, dirty)
	}
	// make build's linked values win.
	ver, rev, _, _ = fromBuildInfo(info, "v1.2.3", "abc")
	if ver != "v1.2.3" || rev != "abc" {
		t.Fatalf("version %q commit %q", ver, rev)
	}
}
