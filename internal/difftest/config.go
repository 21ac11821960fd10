// Package difftest is a seeded randomized differential tester for sluice
// replication. For one seed it generates a schema over MariaDB's type set,
// runs `sluice migrate --mode all` as a child process, drives generated DML
// and DDL on the source at random concurrency, kills sluice with SIGKILL
// (and restarts the target) at moments placed by observed progress, waits
// for sluice to catch up, and compares source and target by means that do
// not share sluice's code: CHECKSUM TABLE and the HEX() of every column of
// every row. A seed reproduces the same schema, workload, DDL and kill
// decisions; the interleaving with the real servers still varies.
package difftest

import (
	"errors"
	"flag"
	"io"
	"strings"
	"time"
)

// Features switch off generator features that hit a known bug that is not
// fixed yet, so the hunt for other bugs can go on. The zero value turns
// everything on, which is the default.
type Features struct {
	NoUUID         bool // no UUID, INET4, INET6 columns (issue 13 bugs 1, 2, 7)
	NoFloatKeyless bool // no FLOAT/DOUBLE columns in tables without a key (bug 3)
	NoKeylessCase  bool // keyless tables get no case / trailing-space variants of text (bug 4)
	NoKeyVariants  bool // collated key columns get no non-ASCII case/accent variants (bug 5)
	// NoBinKeys keeps case-sensitive and NO PAD collations and binary
	// types out of key columns (compaction folds ASCII case and trailing
	// spaces of every key column).
	NoBinKeys     bool
	NoLatin1NoPad bool // no latin1 NO PAD collations (decode's latin1 list lacks them)
	NoBinaryN     bool // no BINARY(n) columns (the binlog strips their trailing 0x00)
	// PlainDDL keeps MariaDB-only syntax (INVISIBLE, spatial types, NO PAD
	// collations, UUID/INET) out of tables and columns created by DDL in
	// the stream, which TiDB's parser in the schema tracker cannot read.
	PlainDDL bool
	// NoDDLInCopy holds DDL back until the copy is done (a table dropped
	// while the dump starts fails it).
	NoDDLInCopy bool
	NoDDL       bool // no DDL between the DML
	// NoDropKey generates no DROP PRIMARY KEY / DROP INDEX (the decoder
	// keeps the old keys when only keys change).
	NoDropKey bool
	// NoSwap generates no RENAME swaps of two tables (a kill between the
	// swap and its checkpoint makes the restart swap them back).
	NoSwap bool
	// NoLossyGenCol gives text generated columns utf8mb4 and integer ones
	// DECIMAL(22,0), so INSERT IGNORE on the source never stores a lossy
	// generated value (which the strict target session refuses to compute).
	NoLossyGenCol bool
	// DDLKinds, if set, is a comma-separated list of the DDL kinds to
	// generate (see ddlKinds in ddl.go); a tool for reducing a failure.
	DDLKinds        string
	NoKills         bool // no kill -9 of sluice
	NoTargetRestart bool // no target restarts
	// RerunIncremental restarts sluice with --mode incremental once the
	// copy is done, instead of the same --mode all command (bug 8).
	RerunIncremental bool

	// The generator classes of issue 29 (classes.go): each is drawn on or
	// off per seed; a switch keeps a class off in every seed, for a class
	// whose fix has not landed. NoClasses turns them all off.
	NoClasses         bool
	NoFK              bool // FK trees with CASCADE, SET NULL and RESTRICT
	NoTriggers        bool // triggers on the source (their rows replicate, the triggers do not)
	NoTargetTriggers  bool // identical triggers put on the target near the end: an expected refusal
	NoXA              bool // XA in two phases and one, commit from another session, a prepare across a kill -9
	NoStatementFormat bool // a STATEMENT or MIXED session near the end: an expected stop
	NoSavepoints      bool // ROLLBACK TO SAVEPOINT with an Aria table in the transaction
	NoSequences       bool // sequences and NEXTVAL defaults
	NoSysVersioned    bool // WITH SYSTEM VERSIONING tables
	NoCheckOff        bool // CHECK constraints, and rows written with check_constraint_checks=0
	NoDDLSession      bool // DDL under NO_BACKSLASH_ESCAPES, ANSI_QUOTES, character_set_client=latin1
	NoHelperNames     bool // tables named like online-DDL helpers (_t_old, _t_gho...)
	NoDDLKills        bool // a kill -9 once a DDL reached the target but not its checkpoint; column swaps
	// A sequence or a system-versioned table created in the stream near
	// the end: an expected refusal (sluice replicates neither; the data
	// classes above test them replicated instead).
	NoSequenceStop     bool
	NoSysVersionedStop bool

	inDDL bool // set while generating DDL: PlainDDL applies
}

func (f Features) plain() bool { return f.PlainDDL && f.inDDL }

// Config is one run of the tester.
type Config struct {
	// Duration is how long the workload runs per seed.
	Duration time.Duration
	// Order is "source", "relaxed", or "" to alternate by seed.
	Order string
	// Features are the generator switches.
	Features Features
	// Out receives the per-seed lines and every kill and restart.
	Out io.Writer
	// Verbose prints every DDL statement as it runs.
	Verbose bool
	// CatchUp bounds the wait for sluice to reach the source's final
	// position once the workload stopped; a stall past it is a failure.
	CatchUp time.Duration
	// KeepDir keeps the task directories of failing seeds under WorkDir.
	WorkDir string
	// Oracle compares the target with a stock MariaDB replica of the same
	// source as well as with the source (oracle.go). The Env must have
	// been made with the replica (NewEnv's oracle argument).
	Oracle bool
}

// DefaultConfig returns a Config for short runs.
func DefaultConfig() Config {
	return Config{Duration: 30 * time.Second, Out: io.Discard, CatchUp: 3 * time.Minute, Oracle: true}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Duration <= 0 {
		return errors.New("difftest: duration must be positive")
	}
	switch c.Order {
	case "", "source", "relaxed":
	default:
		return errors.New("difftest: order must be source, relaxed or empty (alternate)")
	}
	if c.CatchUp <= 0 {
		return errors.New("difftest: catch-up bound must be positive")
	}
	if c.Out == nil {
		return errors.New("difftest: Out is nil")
	}
	return nil
}

// orderFor picks the commit order of a seed: the configured one, or
// alternating by seed.
func (c Config) orderFor(seed int64) string {
	if c.Order != "" {
		return c.Order
	}
	if seed%2 == 0 {
		return "source"
	}
	return "relaxed"
}

// BindFlags registers the feature switches on fs.
func (f *Features) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.NoUUID, "no-uuid", false, "generate no UUID/INET4/INET6 columns")
	fs.BoolVar(&f.NoFloatKeyless, "no-float-keyless", false, "no FLOAT/DOUBLE columns in keyless tables")
	fs.BoolVar(&f.NoKeylessCase, "no-keyless-case", false, "no case/trailing-space text variants in keyless tables")
	fs.BoolVar(&f.NoKeyVariants, "no-key-variants", false, "no non-ASCII case/accent variants in collated key columns")
	fs.BoolVar(&f.NoBinKeys, "no-bin-keys", false, "no _bin, NO PAD or binary key columns")
	fs.BoolVar(&f.NoLatin1NoPad, "no-latin1-nopad", false, "no latin1 NO PAD collations")
	fs.BoolVar(&f.NoBinaryN, "no-binary-n", false, "no BINARY(n) columns")
	fs.BoolVar(&f.PlainDDL, "plain-ddl", false, "no MariaDB-only syntax in tables and columns created by DDL in the stream")
	fs.BoolVar(&f.NoDDLInCopy, "no-ddl-in-copy", false, "no DDL until the copy is done")
	fs.StringVar(&f.DDLKinds, "ddl-kinds", "", "only these DDL kinds (comma-separated: "+strings.Join(ddlKinds, ",")+")")
	fs.BoolVar(&f.NoDropKey, "no-drop-key", false, "no DROP PRIMARY KEY / DROP INDEX")
	fs.BoolVar(&f.NoSwap, "no-swap", false, "no RENAME swaps of two tables")
	fs.BoolVar(&f.NoLossyGenCol, "no-lossy-gencol", false, "generated columns that cannot lose a value (utf8mb4 text, DECIMAL(22,0))")
	fs.BoolVar(&f.NoDDL, "no-ddl", false, "no DDL between the DML")
	fs.BoolVar(&f.NoKills, "no-kills", false, "no kill -9 of sluice")
	fs.BoolVar(&f.NoTargetRestart, "no-target-restart", false, "no target restarts")
	fs.BoolVar(&f.RerunIncremental, "rerun-incremental", false, "restart with --mode incremental once the copy is done")
	fs.BoolVar(&f.NoClasses, "no-classes", false, "none of the generator classes below")
	fs.BoolVar(&f.NoFK, "no-fk", false, "no FK trees (CASCADE, SET NULL, RESTRICT)")
	fs.BoolVar(&f.NoTriggers, "no-triggers", false, "no triggers on the source")
	fs.BoolVar(&f.NoTargetTriggers, "no-target-triggers", false, "no triggers put on the target (an expected refusal)")
	fs.BoolVar(&f.NoXA, "no-xa", false, "no XA transactions")
	fs.BoolVar(&f.NoStatementFormat, "no-statement-format", false, "no STATEMENT/MIXED session (an expected stop)")
	fs.BoolVar(&f.NoSavepoints, "no-savepoints", false, "no savepoints with an Aria table in the transaction")
	fs.BoolVar(&f.NoSequences, "no-sequences", false, "no sequences or NEXTVAL defaults")
	fs.BoolVar(&f.NoSysVersioned, "no-sys-versioned", false, "no system-versioned tables")
	fs.BoolVar(&f.NoCheckOff, "no-check-off", false, "no CHECK constraints or check_constraint_checks=0 rows")
	fs.BoolVar(&f.NoDDLSession, "no-ddl-session", false, "no DDL under a non-default sql_mode or character_set_client")
	fs.BoolVar(&f.NoHelperNames, "no-helper-names", false, "no tables named like online-DDL helpers")
	fs.BoolVar(&f.NoDDLKills, "no-ddl-kills", false, "no kill -9 between a DDL on the target and its checkpoint, no column swaps")
	fs.BoolVar(&f.NoSequenceStop, "no-sequence-stop", false, "no sequence created in the stream (an expected refusal)")
	fs.BoolVar(&f.NoSysVersionedStop, "no-sys-versioned-stop", false, "no system-versioned table created in the stream (an expected refusal)")
}
