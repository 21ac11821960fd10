package decode_test

import (
	"database/sql"
	"os"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// The decoder's real-server tests read a source's binlog (and its
// collations) directly. Tests that replicate through the whole task
// (reader, relay, decoder, applier) and check what the target stores live
// in e2e/.
var srcInst *sandbox.Instance

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Run(m, sandboxtest.Want{Name: "src", Inst: &srcInst}))
}

func masterStatus(tb testing.TB, db *sql.DB) sluice.Position { return sandboxtest.MasterStatus(tb, db) }
