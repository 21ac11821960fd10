package difftest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-db/sluice/replicate"
)

// sluiceProc is the sluice child process of a seed. Every start, kill and
// restart goes through it; its output is appended to one log file.
type sluiceProc struct {
	bin, taskFile, log string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *sluiceProc) start(mode string) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s sluice migrate --mode %s\n", time.Now().UTC().Format(time.RFC3339Nano), mode)
	cmd := exec.Command(p.bin, "migrate", "--config", p.taskFile, "--mode", mode)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start sluice: %w", err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.err = cmd, done, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func (p *sluiceProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *sluiceProc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// exited reports whether the process ended by itself.
func (p *sluiceProc) exited() bool {
	p.mu.Lock()
	started := p.done != nil
	p.mu.Unlock()
	return started && !p.running()
}

func (p *sluiceProc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *sluiceProc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	p.mu.Lock()
	p.done = nil
	p.mu.Unlock()
}

// stop sends SIGTERM and waits for a clean exit.
func (p *sluiceProc) stop(timeout time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return errors.New("not running")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("still running %s after SIGTERM", timeout)
	}
	p.mu.Lock()
	p.done = nil
	p.mu.Unlock()
	return p.exitErr()
}

// tail is the end of the log: sluice's own error when it stopped.
func (p *sluiceProc) tail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 6 {
		lines = lines[len(lines)-6:]
	}
	return strings.Join(lines, " | ")
}

// binlogPos is a position in the source's binlog.
type binlogPos struct {
	file string
	pos  uint64
}

func (p binlogPos) String() string { return fmt.Sprintf("%s:%d", p.file, p.pos) }

// less orders by the file's numeric suffix, then the offset (text order
// of file names breaks at mysql-bin.999999).
func (p binlogPos) less(q binlogPos) bool {
	a, b := fileSeq(p.file), fileSeq(q.file)
	if a != b {
		return a < b
	}
	return p.pos < q.pos
}

func fileSeq(f string) int64 {
	i := strings.LastIndexByte(f, '.')
	n, _ := strconv.ParseInt(f[i+1:], 10, 64)
	return n
}

func sourcePos(ctx context.Context, db *sql.DB) (binlogPos, error) {
	rows, err := db.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return binlogPos{}, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		return binlogPos{}, errors.New("SHOW MASTER STATUS: no row")
	}
	vals := make([]any, len(cols))
	var p binlogPos
	vals[0], vals[1] = &p.file, &p.pos
	for i := 2; i < len(vals); i++ {
		vals[i] = new(sql.RawBytes)
	}
	return p, rows.Scan(vals...)
}

// appliedPos reads the target's checkpoint: the row with the highest seq
// is the resume point. ok is false while there is none (the copy runs).
func appliedPos(ctx context.Context, db *sql.DB, task string) (binlogPos, bool, error) {
	var p binlogPos
	err := db.QueryRowContext(ctx, "SELECT binlog_file, binlog_pos FROM sluice_meta.apply_checkpoint WHERE task=? ORDER BY seq DESC LIMIT 1", task).Scan(&p.file, &p.pos)
	if errors.Is(err, sql.ErrNoRows) {
		return p, false, nil
	}
	return p, err == nil, err
}

// progress is the number of source transactions applied: the domain-0
// sequence number of the checkpoint's GTID position, or -1.
func progress(ctx context.Context, db *sql.DB, task string) int64 {
	var g string
	if err := db.QueryRowContext(ctx, "SELECT gtid_set FROM sluice_meta.apply_checkpoint WHERE task=? ORDER BY seq DESC LIMIT 1", task).Scan(&g); err != nil {
		return -1
	}
	for _, part := range strings.Split(g, ",") {
		f := strings.Split(strings.TrimSpace(part), "-")
		if len(f) == 3 && f[0] == "0" {
			n, _ := strconv.ParseInt(f[2], 10, 64)
			return n
		}
	}
	return -1
}

// sluiceRunning reports whether the current sluice process says, in its
// status file, that it is replicating.
func (s *seedRun) sluiceRunning() bool {
	st, err := replicate.ReadStatus(filepath.Join(s.dir, "state"))
	return err == nil && st.PID == s.sl.pid() && st.Stage == replicate.StageRunning
}

// ddlPending reports whether the checkpoint marks a DDL statement as about
// to run (or running): a kill then lands between a DDL and its checkpoint.
func ddlPending(ctx context.Context, db *sql.DB, task string) bool {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice_meta.apply_checkpoint WHERE task=? AND IFNULL(ddl_pending,'') <> ''", task).Scan(&n)
	return err == nil && n > 0
}

func copyChunks(ctx context.Context, db *sql.DB, task string) int {
	var n int
	if db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice_meta.load_checkpoint WHERE task=?", task).Scan(&n) != nil {
		return 0
	}
	return n
}

// faults runs the fault schedule until ctx ends: each fault fires once the
// applier has committed K more source transactions than at the previous
// one (or, for a first kill in the copy, once a chunk is loaded). Its
// decisions come from the seed. It returns early when sluice stops by
// itself.
func (s *seedRun) faults(ctx context.Context) error {
	r := s.faultRng
	db := s.e.DstDB
	inCopy := s.copyKill
	base := int64(-1)
	k := int64(1 + r.Intn(60))
	target, onDDL := false, false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
		if s.sl.exited() {
			return nil
		}
		if s.cfg.Features.NoKills && (s.cfg.Features.NoTargetRestart || target) {
			continue
		}
		cur := progress(ctx, db, s.task)
		fire := false
		switch {
		case inCopy:
			fire = cur < 0 && copyChunks(ctx, db, s.task) > 0
			if cur >= 0 {
				inCopy = false // the copy ended before a chunk was seen
			}
		case cur < 0:
		case base < 0:
			base = cur
		case onDDL:
			// Wait for K transactions, then for the next DDL to be marked.
			fire = cur-base >= k && ddlPending(ctx, db, s.task)
		default:
			fire = cur-base >= k
		}
		if !fire {
			continue
		}
		s.slMu.Lock()
		if !s.sl.running() {
			s.slMu.Unlock()
			continue // stopped by itself: the loop's next check returns
		}
		if target && !s.cfg.Features.NoTargetRestart && !s.sluiceRunning() {
			// A target outage while sluice starts up stops it with exit 2
			// by design (start-up checks fail fast); restart the target
			// only once this process runs. Checked under slMu: another
			// fault (a class's kill -9) may have restarted sluice since
			// the check above (seed 2715).
			s.slMu.Unlock()
			continue
		}
		switch {
		case target && !s.cfg.Features.NoTargetRestart:
			s.out("target restart #%d at applied gtid seq %d", s.res.TargetRestarts+1, cur)
			// Not ctx: the end of the workload must not leave the target down.
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			err := s.e.restartTarget(rctx)
			cancel()
			if err != nil {
				s.slMu.Unlock()
				return err
			}
			s.res.TargetRestarts++
		case !s.cfg.Features.NoKills:
			s.sl.kill()
			s.res.Kills++
			what := fmt.Sprintf("applied gtid seq %d", cur)
			if onDDL {
				what += " with a DDL pending"
			}
			if inCopy {
				s.res.CopyKills++
				what = fmt.Sprintf("in the copy, %d chunks loaded", copyChunks(ctx, db, s.task))
			}
			mode := s.restartMode(ctx)
			s.out("kill -9 #%d %s; restart --mode %s", s.res.Kills, what, mode)
			if err := s.sl.start(mode); err != nil {
				s.slMu.Unlock()
				return err
			}
		}
		s.slMu.Unlock()
		inCopy = false
		base = progress(ctx, db, s.task)
		k = int64(1 + r.Intn(80))
		target = r.Intn(6) == 0
		onDDL = !target && !s.cfg.Features.NoDDL && r.Intn(4) == 0
	}
}
