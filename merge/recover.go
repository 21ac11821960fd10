package merge

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dumpfmt"
)

// After a crash the output (the relay log) has truncated its torn tail:
// the merged binlog ends after its last complete transaction. The merge
// continues from there:
//
//   - the GTID state at the end (the last file's Gtid_list and every GTID
//     after it) says, per domain, the last source transaction merged; a
//     source's transactions at or below it are skipped when read again;
//   - the checkpoint (merge.state) says where each source's relay was
//     merged up to when it was written, after an fsync of the merged data:
//     it is at or before the truth, so reading resumes there and the
//     skipping above does the rest. Without it, each relay is read from
//     its start;
//   - table ids continue above the highest one in the file, and a file
//     that ended with its Rotate is followed by the file it names.

// CheckpointName is the checkpoint file in the merge's directory.
const CheckpointName = "merge.state"

type checkpoint struct {
	Sources map[string]sluice.Position `json:"sources"`
	GTID    string                     `json:"gtid"`
	// XA: the XIDs prepared in the merged binlog and not completed (xa.go).
	XA map[string]xaOwner `json:"xa,omitempty"`
}

// recover reads the output's state and returns where to read each
// source's relay from.
func (m *Merger) recover() ([]sluice.Position, error) {
	starts := make([]sluice.Position, len(m.feeds))
	end := m.out.End()
	var st state
	var err error
	if end.File == "" {
		st, err = m.startState()
	} else {
		st, err = m.scanLast(end)
		if err == nil {
			var ck checkpoint
			ck, err = readCheckpoint(m.cfg.Dir)
			for _, f := range m.feeds {
				starts[f.i] = ck.Sources[f.src.Name]
			}
			m.xa.restore(ck.XA)
		}
	}
	if err != nil {
		return nil, err
	}
	for _, f := range m.feeds {
		f.skip = st[f.src.DomainID].Seq
	}
	m.mu.Lock()
	m.st = st
	m.mu.Unlock()
	return starts, nil
}

// startState is the GTID state of a new merged binlog: each source's
// position where its relay starts, in the source's merged domain.
func (m *Merger) startState() (state, error) {
	st := state{}
	for _, f := range m.feeds {
		if f.src.Start == "" {
			continue
		}
		s, err := mysql.ParseMariadbGTIDSet(f.src.Start)
		if err != nil {
			return nil, fmt.Errorf("merge: source %s: start GTID %q: %w", f.src.Name, f.src.Start, err)
		}
		sets := s.(*mysql.MariadbGTIDSet).Sets
		if len(sets) > 1 {
			return nil, &sluice.Error{Op: "global binlog", Err: fmt.Errorf("%w: source %s starts at %q, a position in %d GTID domains", sluice.ErrConfig, f.src.Name, f.src.Start, len(sets)),
				Hint: "each source of a global binlog must write one GTID domain; start it at a position of its own domain only (sources[].gtid-set)"}
		}
		for d, g := range sets {
			f.native = int64(d)
			st[f.src.DomainID] = gtid{ServerID: g.ServerID, Seq: g.SequenceNumber}
		}
	}
	return st, nil
}

// fileScan is what recovery learns from a merged file.
type fileScan struct {
	st       state // the Gtid_list's state, then each GTID
	sawFDE   bool
	sawList  bool
	sawCkpt  bool
	maxTable uint64
	last     replication.EventType
	lastBody []byte
}

// scanFile reads a merged file up to limit (all of it when limit < 0).
func scanFile(path string, limit int64) (fileScan, error) {
	sc := fileScan{st: state{}}
	fh, err := os.Open(path)
	if err != nil {
		return sc, fmt.Errorf("merge: recover: %w", err)
	}
	defer fh.Close()
	if limit < 0 {
		st, err := fh.Stat()
		if err != nil {
			return sc, fmt.Errorf("merge: recover: %w", err)
		}
		limit = st.Size()
	}
	r := bufio.NewReaderSize(io.LimitReader(fh, limit), 1<<20)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(r, head); err != nil || string(head) != string(magic) {
		return sc, fmt.Errorf("merge: recover: %s is not a binlog file", path)
	}
	off := int64(len(magic))
	crc := true
	var f format
	for off < limit {
		hb, err := r.Peek(headerSize)
		if err != nil {
			return sc, fmt.Errorf("merge: recover %s at %d: %w", path, off, err)
		}
		h, err := parseHeader(hb)
		if err != nil {
			return sc, fmt.Errorf("merge: recover %s at %d: %w", path, off, err)
		}
		raw := make([]byte, h.Size)
		if _, err := io.ReadFull(r, raw); err != nil {
			return sc, fmt.Errorf("merge: recover %s at %d: %w", path, off, err)
		}
		off += int64(h.Size)
		b := body(raw, crc)
		switch h.Type {
		case replication.FORMAT_DESCRIPTION_EVENT:
			if f, err = parseFDE(raw); err != nil {
				return sc, fmt.Errorf("merge: recover %s: %w", path, err)
			}
			crc, sc.sawFDE = f.crc, true
		case replication.MARIADB_GTID_LIST_EVENT:
			parseGTIDList(b, sc.st)
			sc.sawList = true
		case replication.MARIADB_BINLOG_CHECKPOINT_EVENT:
			sc.sawCkpt = true
		case replication.MARIADB_GTID_EVENT:
			if seq, d, ok := gtidOf(b); ok {
				sc.st[d] = gtid{ServerID: h.ServerID, Seq: seq}
			}
		case replication.TABLE_MAP_EVENT:
			if w := f.tableIDWidth(h.Type); len(b) >= w {
				sc.maxTable = max(sc.maxTable, getUint(b, w))
			}
		}
		sc.last, sc.lastBody = h.Type, b
	}
	return sc, nil
}

// scanLast reads the last merged file up to end and sets up the output
// to continue it; it returns the GTID state at end.
func (m *Merger) scanLast(end sluice.Position) (state, error) {
	n, ok := fileNumber(end.File)
	if !ok {
		return nil, fmt.Errorf("merge: recover: %s is not named %s.NNNNNN", end.File, m.cfg.Base)
	}
	sc, err := scanFile(filepath.Join(m.cfg.Dir, end.File), int64(end.Pos))
	if err != nil {
		return nil, err
	}
	st := sc.st
	if !sc.sawList {
		// The crash cut the file's head before its Gtid_list (so no
		// transaction follows): the state is the previous file's end.
		prev := fmt.Sprintf("%s.%06d", m.cfg.Base, n-1)
		if p, err := scanFile(filepath.Join(m.cfg.Dir, prev), -1); err == nil {
			st = p.st
		} else if st, err = m.startState(); err != nil {
			return nil, err
		}
	}
	m.fileNo, m.nextTable, m.tables = n, sc.maxTable, map[tableKey]uint64{}
	m.file, m.size = end.File, int64(end.Pos)
	switch {
	case sc.last == replication.ROTATE_EVENT && len(sc.lastBody) > 8:
		// The file is finished: the next one was never opened.
		m.file, m.pendingNext = "", string(sc.lastBody[8:])
		return st, nil
	case !sc.sawFDE:
		// Opened, but its format description event did not survive: the
		// file is written again from its start.
		m.file, m.pendingNext, m.fileNo = "", end.File, n-1
		return st, nil
	}
	// The relay's writer reopens the file at its end; a head cut short
	// by the crash is completed (no transaction followed it).
	if err := m.out.Write(ArtificialRotate(m.file, uint64(m.size), m.cfg.ServerID)); err != nil {
		return nil, err
	}
	ts := uint32(time.Now().Unix())
	if !sc.sawList {
		if err := m.write(gtidListEvent(st, m.cfg.ServerID, ts, m.size)); err != nil {
			return nil, err
		}
	}
	if !sc.sawCkpt {
		if err := m.write(checkpointEvent(m.file, m.cfg.ServerID, ts, m.size)); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// write writes one event the merge made at the end of the current file.
func (m *Merger) write(ev []byte) error {
	if err := m.out.Write(ev); err != nil {
		return err
	}
	m.size += int64(len(ev))
	m.dirty = true
	return nil
}

func fileNumber(name string) (int, bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	return n, err == nil
}

func readCheckpoint(dir string) (checkpoint, error) {
	var ck checkpoint
	b, err := os.ReadFile(filepath.Join(dir, CheckpointName))
	if errors.Is(err, os.ErrNotExist) {
		return ck, nil
	}
	if err != nil {
		return ck, fmt.Errorf("merge: %w", err)
	}
	if err := json.Unmarshal(b, &ck); err != nil {
		// Written by rename, so never torn; a damaged one only costs a
		// longer read of the relays.
		return checkpoint{}, nil
	}
	return ck, nil
}

func (m *Merger) writeCheckpoint() error {
	ck := checkpoint{Sources: map[string]sluice.Position{}, GTID: m.GTID(), XA: m.xa.snapshot()}
	for _, f := range m.feeds {
		if f.done.File != "" {
			// With its GTID set, the relay reader starts without reading
			// the file's head.
			ck.Sources[f.src.Name] = f.done
		}
	}
	b, err := json.Marshal(ck)
	if err != nil {
		return err
	}
	if err := dumpfmt.WriteFileAtomic(m.cfg.Dir, CheckpointName, b); err != nil {
		return err
	}
	m.mu.Lock()
	m.ckpt = ck.Sources
	m.mu.Unlock()
	return nil
}

// Checkpointed returns, per source name, the position in its relay up to
// which the merged binlog durably holds its transactions: the relay's
// files before it are no longer needed by the merge.
func (m *Merger) Checkpointed() map[string]sluice.Position {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]sluice.Position, len(m.ckpt))
	for k, v := range m.ckpt {
		out[k] = v
	}
	return out
}
