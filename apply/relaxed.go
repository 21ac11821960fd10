package apply

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-db/sluice"
)

// Relaxed commit order (Config.RelaxedOrder).
//
// With source-order commit, the checkpoint is one position: everything up
// to the last committed group, nothing after. With relaxed order a group
// may commit while an earlier one is still running, so the committed set
// past the low-water mark (the end of the longest fully committed prefix
// of groups) has holes. Each group's target transaction therefore writes,
// with its data, its worker's checkpoint row holding
//
//   - the low-water mark as the worker knew it (seq and position: every
//     group up to it had committed before this transaction began), and
//   - done: the source ranges of the worker's own groups committed past
//     that mark, this one included, plus ranges inherited from the
//     previous run (below).
//
// A group is a run of consecutive source transactions, so its range is
// the end positions of its first and last transaction; a replayed
// transaction whose end falls inside a range was committed.
//
// On restart the highest low-water mark of all rows is the resume point,
// and the union of all rows' done ranges past it is skipped. That union is
// complete: a group committed past the final mark is in its worker's row,
// because the worker's row is rewritten by each of its commits with every
// own range past the mark it knew, which is at or below the final one.
// Ranges found at start are "inherited": every later checkpoint write
// carries the ones still past its mark, so a rewritten row never drops
// them, until the low-water mark passes them. Lists stay short because the
// scheduler keeps at most relaxedWindow groups past the low-water mark.
//
// DDL and streamed large transactions wait for every earlier group (a
// barrier), so they are never inside a done range.

// txnRange is the source transactions of one committed group: those whose
// end position lies in [first, last].
type txnRange struct {
	first, last sluice.Position
}

func (r txnRange) contains(end sluice.Position) bool {
	return before(r.first, end) && before(end, r.last)
}

// relaxedWindow is how many groups may be dispatched past the low-water
// mark, per worker.
const relaxedWindow = 4

// appendRanges encodes ranges past mark as lines of
// "first-file TAB first-pos TAB last-file TAB last-pos" (binlog file names
// hold neither tabs nor newlines).
func appendRanges(b []byte, mark sluice.Position, lists ...[]txnRange) []byte {
	for _, l := range lists {
		for _, r := range l {
			if before(r.last, mark) {
				continue // at or below the low-water mark: covered by it
			}
			b = append(b, r.first.File...)
			b = append(b, '\t')
			b = strconv.AppendUint(b, uint64(r.first.Pos), 10)
			b = append(b, '\t')
			b = append(b, r.last.File...)
			b = append(b, '\t')
			b = strconv.AppendUint(b, uint64(r.last.Pos), 10)
			b = append(b, '\n')
		}
	}
	return b
}

func parseRanges(s string) ([]txnRange, error) {
	var out []txnRange
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("bad done range %q", line)
		}
		p1, err1 := strconv.ParseUint(f[1], 10, 32)
		p2, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil || f[0] == "" || f[2] == "" {
			return nil, fmt.Errorf("bad done range %q", line)
		}
		out = append(out, txnRange{first: sluice.Position{File: f[0], Pos: uint32(p1)}, last: sluice.Position{File: f[2], Pos: uint32(p2)}})
	}
	return out, nil
}

// normalizeRanges drops ranges at or below mark and duplicates (two rows
// may both carry an inherited range), and sorts the rest by start.
func normalizeRanges(rs []txnRange, mark sluice.Position) []txnRange {
	var out []txnRange
	for _, r := range rs {
		if !before(r.last, mark) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].first != out[j].first {
			return before(out[i].first, out[j].first)
		}
		return before(out[j].last, out[i].last) // the widest first
	})
	dedup := out[:0]
	for _, r := range out {
		if n := len(dedup); n > 0 && before(r.last, dedup[n-1].last) {
			continue // inside the previous range
		}
		dedup = append(dedup, r)
	}
	return dedup
}

// committedBefore reports whether the source transaction ending at end was
// committed by an earlier run past its low-water mark. The stream arrives
// in order, so ranges wholly before end are passed for good.
func (s *scheduler) committedBefore(end sluice.Position) bool {
	r := s.a.inherited
	for s.skipped < len(r) && !before(end, r[s.skipped].last) {
		s.skipped++
	}
	return s.skipped < len(r) && r[s.skipped].contains(end)
}

// skipPending reports whether inherited ranges lie ahead: a transaction
// read now may be one of them and must not be streamed to the target
// before its end position shows whether it is.
func (s *scheduler) skipPending() bool {
	return s.skipped < len(s.a.inherited)
}

func posOnly(p sluice.Position) sluice.Position {
	return sluice.Position{File: p.File, Pos: p.Pos}
}

func unitRange(u *unit) txnRange {
	return txnRange{first: posOnly(u.txns[0].end), last: posOnly(u.txns[len(u.txns)-1].end)}
}

// ownPast keeps the worker's own ranges that lie past mark.
func ownPast(own []txnRange, mark sluice.Position) []txnRange {
	out := own[:0]
	for _, r := range own {
		if !before(r.last, mark) {
			out = append(out, r)
		}
	}
	return out
}
