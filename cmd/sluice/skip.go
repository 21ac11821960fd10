package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/task"
)

func init() {
	register(func() *cobra.Command { return newHandleCmd("skip") })
	register(func() *cobra.Command { return newHandleCmd("replace") })
}

// newHandleCmd makes sluice skip and sluice replace, DM's handle-error
// skip and replace: the way past a statement the task refuses.
func newHandleCmd(action string) *cobra.Command {
	var config, gtid, position string
	var sqls []string
	var force bool
	cmd := &cobra.Command{
		Use:   action + " --config task.yaml (--gtid G | --position FILE:POS)",
		Short: map[string]string{"skip": "Skip one source transaction or statement the task stopped at", "replace": "Run other DDL instead of a source statement the task stopped at"}[action],
		Long: `When replication stops at a statement it refuses (a DDL it does not
support, say ADD PARTITION) or a transaction it cannot apply, the error
names its GTID and position. With the task stopped,

  sluice skip    --config F --gtid G           skips that whole transaction;
  sluice skip    --config F --position F:P     skips that one statement;
  sluice replace --config F --gtid G --sql S   runs S (DDL, one or more
                                                statements) instead, on the
                                                target and in sluice's
                                                schema tracker;

then the same command that ran the task resumes it. A skipped row
transaction changes nothing on the target: its rows must then be made
equal by hand, or the tables copied again. Each instruction is recorded in
the task directory (` + replicate.HandlesFile + `) and shown by sluice status.`,
		Example: map[string]string{
			"skip": `  sluice skip --config task.yaml --gtid 0-1-4711
  sluice skip --config task.yaml --position mysql-bin.000042:1893`,
			"replace": `  sluice replace --config task.yaml --gtid 0-1-4712 --sql "ALTER TABLE app.t ADD COLUMN c INT"
  sluice replace --config task.yaml --position mysql-bin.000042:2107 --sql "CREATE TABLE app.t2 (id INT PRIMARY KEY)" --sql "DROP TABLE app.t1"`,
		}[action],
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := taskFromFlag(action, config)
			if err != nil {
				return err
			}
			return recordHandle(cfg, action, gtid, position, sqls, force, c.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "task file (YAML)")
	cmd.Flags().StringVar(&gtid, "gtid", "", "the transaction's GTID, as the error printed it")
	cmd.Flags().StringVar(&position, "position", "", "the statement's binlog position FILE:POS, as the error printed it")
	if action == "replace" {
		cmd.Flags().StringArrayVar(&sqls, "sql", nil, "a statement to run instead (repeat for several)")
	}
	cmd.Flags().BoolVar(&force, "force", false, "record it even though the task's last error names another statement")
	return cmd
}

var (
	gtidForm     = regexp.MustCompile(`^(\d+-\d+-\d+|[0-9a-fA-F-]{36}:\d+)$`)
	positionForm = regexp.MustCompile(`^[^:\s]+:\d+$`)
)

func recordHandle(cfg *task.Config, action, gtid, position string, sqls []string, force bool, out io.Writer) error {
	op := action + " in task " + cfg.Name
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	switch {
	case (gtid == "") == (position == ""):
		return bad("give --gtid or --position, one of them", "copy the GTID or position from the error the task stopped with")
	case gtid != "" && !gtidForm.MatchString(gtid):
		return bad(fmt.Sprintf("--gtid %q is not a GTID (domain-server-seq, or uuid:n)", gtid), "copy the GTID from the error the task stopped with")
	case position != "" && !positionForm.MatchString(position):
		return bad(fmt.Sprintf("--position %q is not FILE:POS", position), "copy the position from the error the task stopped with, e.g. mysql-bin.000042:1893")
	}
	for i := range sqls {
		sqls[i] = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sqls[i]), ";"))
	}
	if action == "replace" && (len(sqls) == 0 || sqls[0] == "") {
		return bad("--sql is required", `give the statement(s) to run instead: --sql "ALTER TABLE ..."`)
	}
	if action == "replace" {
		// The statements go through the schema tracker when the task
		// resumes: one it cannot read would stop the task again, at the
		// same place, after the user thought it fixed.
		if _, err := schema.NewTracker().Parse(strings.Join(sqls, ";\n")); err != nil {
			return bad(fmt.Sprintf("--sql does not parse: %v", err), "give DDL that MySQL's grammar reads (the schema tracker uses TiDB's parser); for MariaDB-only syntax make the change on the target by hand and use sluice skip")
		}
	}
	// A task that never ran stopped at nothing: a handle recorded for it
	// (a typo, the wrong task file) would skip whichever transaction
	// carries that GTID once the task runs, in silence.
	if _, err := os.Stat(filepath.Join(cfg.Dir, replicate.StatusFile)); errors.Is(err, os.ErrNotExist) && !force {
		return bad("the task has never run, so it stopped at no statement", "run this with the task file of the task that stopped; or pass --force to record it for a task that has not run")
	}
	if st, err := replicate.ReadStatus(cfg.Dir); err == nil && st.Error != "" && !force {
		// The last error names the statement the task stopped at: a typo
		// in the GTID or position would skip or replace another one.
		want := gtid
		if want == "" {
			want = position
		}
		if !regexp.MustCompile(`(^|[^0-9A-Za-z.-])` + regexp.QuoteMeta(want) + `($|[^0-9])`).MatchString(st.Error) {
			return bad(fmt.Sprintf("the task's last error does not name %s: %s", want, oneLine(st.Error, 300)),
				"copy the GTID or position from that error; or pass --force to record this one anyway")
		}
	}
	if _, running, err := replicate.Holder(cfg.Dir); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	} else if running {
		return bad("the task is running", "stop it first (sluice stop --config ...), then run this again and start the task")
	}
	h := replicate.Handle{GTID: gtid, Position: position, Action: action, SQL: sqls, Added: time.Now().UTC()}
	if err := replicate.AddHandle(cfg.Dir, h); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	fmt.Fprintf(out, "task %s: recorded %s; start the task with the command that ran it, and it goes on past that statement\n", cfg.Name, h)
	return nil
}

// oneLine folds s onto one line, cut at n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
