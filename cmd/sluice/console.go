package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/console"
	"github.com/sluice-db/sluice/task"
)

func init() { register(newConsoleCmd) }

func newConsoleCmd() *cobra.Command {
	cfg := console.DefaultConfig()
	var tokenFile string
	var dtxTokenFile string
	cmd := &cobra.Command{
		Use:   "console [--listen ADDR] [--tasks DIR]... [--etcd URL] [--dtx URL]... [--serve ADDR]...",
		Short: "Serve the web console: tasks, binlog services, workers and transactions on one page",
		Long: `console serves a web page that shows the tasks under --tasks (as sluice
task list finds them, worst first, with the error and fix of a stopped
one), the binlog services (serve tasks, and --serve metrics addresses),
the workers of an etcd cluster (--etcd) and the transactions of dtx
coordinators or dtm (--dtx, through the HTTP API dtm's admin uses). Its
actions run the CLI's own code: pause, resume, stop, skip, replace, and
force-stop of a transaction. It listens on loopback; another address
needs --token-file. See docs/manual/console.md.`,
		Example: `  sluice console --tasks /srv/sluice --dtx http://127.0.0.1:36789
  sluice console --listen 0.0.0.0:8686 --token-file /etc/sluice/console.token --tasks /srv/sluice --etcd http://10.0.0.5:2379`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) (err error) {
			if cfg.Token, err = readTokenFile("console --token-file", tokenFile); err != nil {
				return err
			}
			// The coordinators' token, as sluice dtx serve reads its own:
			// --dtx-token-file, else $SLUICE_DTX_TOKEN.
			if cfg.DtxToken, err = readTokenFile("console --dtx-token-file", dtxTokenFile); err != nil {
				return err
			}
			if dtxTokenFile == "" {
				cfg.DtxToken = strings.TrimSpace(os.Getenv("SLUICE_DTX_TOKEN"))
			}
			if len(cfg.TaskRoots) == 0 {
				// As sluice task list: $SLUICE_HOME, else here.
				cfg.TaskRoots = []string{"."}
				if h := os.Getenv("SLUICE_HOME"); h != "" {
					cfg.TaskRoots = []string{h}
				}
			}
			var eps []string
			for _, e := range cfg.Etcd {
				for _, p := range strings.Split(e, ",") {
					if p = strings.TrimSpace(p); p != "" {
						eps = append(eps, p)
					}
				}
			}
			cfg.Etcd = eps
			cfg.Actions = cliActions{}
			s, err := console.New(cfg)
			if err != nil {
				return err
			}
			return s.Serve(c.Context(), func(addr string) {
				u := "http://" + addr + "/"
				if cfg.Token != "" {
					u += " (open it with ?token= and the token of --token-file)"
				}
				fmt.Fprintf(c.OutOrStdout(), "sluice console on %s\n", u)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "address to serve on; a non-loopback one needs --token-file")
	f.StringVar(&tokenFile, "token-file", "", "require this file's first line as the token (Authorization: Bearer, or ?token= once)")
	f.StringArrayVar(&cfg.TaskRoots, "tasks", nil, "directory with task directories, as sluice task list --dir (repeatable; default $SLUICE_HOME, else the current directory)")
	f.StringArrayVar(&cfg.Etcd, "etcd", nil, "etcd endpoint(s) of a worker cluster")
	f.StringVar(&cfg.EtcdPrefix, "etcd-prefix", cfg.EtcdPrefix, "the worker cluster's key prefix")
	f.StringArrayVar(&cfg.Dtx, "dtx", nil, "a dtx coordinator's (or dtm's) URL, http://HOST:PORT (repeatable)")
	f.StringVar(&dtxTokenFile, "dtx-token-file", "", "the coordinators' bearer token (sluice dtx serve --token-file), this file's first line; else $SLUICE_DTX_TOKEN")
	f.StringArrayVar(&cfg.Serve, "serve", nil, "a binlog service's metrics address HOST:PORT (repeatable)")
	f.DurationVar(&cfg.SourceTimeout, "source-timeout", cfg.SourceTimeout, "how long a page waits for a coordinator, etcd or binlog service")
	f.IntVar(&cfg.PageSize, "page-size", cfg.PageSize, "rows per page")
	return cmd
}

// readTokenFile reads a token from the first line of path ("" for none).
// Tokens are never flag values, which ps would show.
func readTokenFile(op, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &sluice.Error{Op: op, Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "name a file sluice can read, holding the token on its first line"}
	}
	t, _, _ := strings.Cut(strings.TrimRight(string(b), "\r\n"), "\n")
	if t = strings.TrimSpace(t); t == "" {
		return "", &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s holds no token", sluice.ErrConfig, path), Hint: "write the token on the file's first line"}
	}
	return t, nil
}

// cliActions runs the console's actions with the CLI's own code: sluice
// pause, resume, stop, skip and replace.
type cliActions struct{}

// actionWait bounds how long an action waits for the task to follow, as
// the CLI's --wait does.
const actionWait = 30 * time.Second

func (cliActions) run(f func(out *strings.Builder) error) (string, error) {
	var b strings.Builder
	err := f(&b)
	return strings.TrimSpace(b.String()), err
}

func (a cliActions) Pause(_ context.Context, dir, name string) (string, error) {
	return a.run(func(out *strings.Builder) error {
		return pauseTask(&task.Config{Name: name, Dir: dir}, "pause", actionWait, out)
	})
}

func (a cliActions) Resume(_ context.Context, dir, name string) (string, error) {
	return a.run(func(out *strings.Builder) error {
		return pauseTask(&task.Config{Name: name, Dir: dir}, "resume", actionWait, out)
	})
}

func (a cliActions) Stop(_ context.Context, dir, name string) (string, error) {
	return a.run(func(out *strings.Builder) error { return stopTask(&task.Config{Name: name, Dir: dir}, actionWait, out) })
}

func (a cliActions) Skip(_ context.Context, dir, name, gtid, position string) (string, error) {
	return a.run(func(out *strings.Builder) error {
		return recordHandle(&task.Config{Name: name, Dir: dir}, "skip", gtid, position, nil, false, out)
	})
}

func (a cliActions) Replace(_ context.Context, dir, name, gtid, position string, sqls []string) (string, error) {
	return a.run(func(out *strings.Builder) error {
		return recordHandle(&task.Config{Name: name, Dir: dir}, "replace", gtid, position, sqls, false, out)
	})
}
