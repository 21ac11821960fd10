package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-db/sluice"
)

// Status is the outcome for one table.
type Status string

const (
	// StatusEqual: same rows on both sides.
	StatusEqual Status = "equal"
	// StatusDifferent: some rows are missing, extra or different.
	StatusDifferent Status = "different"
	// StatusTargetMissing: the table does not exist on the target.
	StatusTargetMissing Status = "missing on target"
	// StatusColumnsDiffer: the target's stored columns are not the source's,
	// so rows cannot be compared.
	StatusColumnsDiffer Status = "columns differ"
)

// Kind says how one key differs.
type Kind string

const (
	// Missing: the key is on the source, not on the target.
	Missing Kind = "missing"
	// Extra: the key is on the target, not on the source.
	Extra Kind = "extra"
	// Different: the key is on both, with different column values.
	Different Kind = "different"
)

// Diff is one differing row, named by its key.
type Diff struct {
	Kind Kind `json:"kind"`
	// Key is the key in readable form: id=42, or a="x",b=7.
	Key string `json:"key"`
	// Values are the key's column values as the server prints them.
	Values []string `json:"values"`
}

func (d Diff) String() string { return d.Key + ": " + string(d.Kind) }

// TableResult is the comparison of one table.
type TableResult struct {
	Source sluice.TableRef `json:"source"`
	Target sluice.TableRef `json:"target"`
	Status Status          `json:"status"`
	// Detail explains a status that is not about rows, or a limit that was hit.
	Detail string `json:"detail,omitempty"`
	// KeyColumns name the key the rows were compared by; empty for a table
	// without a key (compared as a multiset of rows).
	KeyColumns []string `json:"key_columns,omitempty"`
	SourceRows int64    `json:"source_rows"`
	TargetRows int64    `json:"target_rows"`
	Chunks     int      `json:"chunks"`
	DiffChunks int      `json:"diff_chunks"`
	// Missing, Extra and Different count every differing row.
	Missing   int64 `json:"missing"`
	Extra     int64 `json:"extra"`
	Different int64 `json:"different"`
	// Diffs holds the first Config.MaxDiffs differing keys in key order
	// (empty for a table without a key).
	Diffs   []Diff        `json:"diffs,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Equal reports whether the table is the same on both sides.
func (r *TableResult) Equal() bool { return r.Status == StatusEqual }

// Report is the outcome of Run, one result per table in the order given.
type Report struct {
	Tables  []*TableResult `json:"tables"`
	Elapsed time.Duration  `json:"elapsed_ns"`
}

// Equal reports whether every table is the same on both sides.
func (r *Report) Equal() bool {
	for _, t := range r.Tables {
		if !t.Equal() {
			return false
		}
	}
	return true
}

// Table returns the result for a source table, or nil.
func (r *Report) Table(source sluice.TableRef) *TableResult {
	for _, t := range r.Tables {
		if strings.EqualFold(t.Source.Schema, source.Schema) && strings.EqualFold(t.Source.Name, source.Name) {
			return t
		}
	}
	return nil
}

// Err is nil when the report is equal, and otherwise a one-line
// *sluice.Error wrapping sluice.ErrVerifyDifferent that names the tables.
func (r *Report) Err() error {
	var names []string
	for _, t := range r.Tables {
		if !t.Equal() {
			names = append(names, fmt.Sprintf("%s (%s)", t.Source, t.summary()))
		}
	}
	if len(names) == 0 {
		return nil
	}
	const show = 5
	list := names
	if len(list) > show {
		list = append(list[:show:show], fmt.Sprintf("and %d more", len(names)-show))
	}
	return &sluice.Error{
		Op:   "verify",
		Err:  fmt.Errorf("%w: %d of %d tables: %s", sluice.ErrVerifyDifferent, len(names), len(r.Tables), strings.Join(list, ", ")),
		Hint: "the report lists the differing keys; copy those tables again, or wait for replication to catch up and verify again",
	}
}

// summary is the short "what differs" for one table.
func (r *TableResult) summary() string {
	switch r.Status {
	case StatusEqual:
		return "equal"
	case StatusDifferent:
		if r.Missing+r.Extra+r.Different == 0 {
			return "different"
		}
		var p []string
		for _, x := range []struct {
			n    int64
			kind Kind
		}{{r.Missing, Missing}, {r.Extra, Extra}, {r.Different, Different}} {
			if x.n > 0 {
				p = append(p, fmt.Sprintf("%d %s", x.n, x.kind))
			}
		}
		return strings.Join(p, ", ")
	}
	return string(r.Status)
}

// WriteText prints a summary table with totals, then for each table that
// differs its detail and up to maxDiffs keys (<0: all kept keys), one a
// line: "sbtest.sbtest1 id=42: different".
func (r *Report) WriteText(w io.Writer, maxDiffs int) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tTARGET\tROWS SRC\tROWS DST\tCHUNKS\tDIFF CHUNKS\tRESULT")
	var src, dst int64
	var chunks, diffChunks, differ int
	for _, t := range r.Tables {
		target := t.Target.String()
		if t.Target == t.Source {
			target = "="
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", t.Source, target, t.SourceRows, t.TargetRows, t.Chunks, t.DiffChunks, t.summary())
		src, dst, chunks, diffChunks = src+t.SourceRows, dst+t.TargetRows, chunks+t.Chunks, diffChunks+t.DiffChunks
		if !t.Equal() {
			differ++
		}
	}
	result := "equal"
	if differ > 0 {
		result = fmt.Sprintf("%d of %d tables differ", differ, len(r.Tables))
	}
	fmt.Fprintf(tw, "TOTAL (%d tables)\t\t%d\t%d\t%d\t%d\t%s\n", len(r.Tables), src, dst, chunks, diffChunks, result)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range r.Tables {
		if t.Equal() {
			continue
		}
		if t.Detail != "" {
			if _, err := fmt.Fprintf(w, "%s: %s\n", t.Source, t.Detail); err != nil {
				return err
			}
		}
		n := len(t.Diffs)
		if maxDiffs >= 0 && n > maxDiffs {
			n = maxDiffs
		}
		for _, d := range t.Diffs[:n] {
			if _, err := fmt.Fprintf(w, "%s %s\n", t.Source, d); err != nil {
				return err
			}
		}
		if total := t.Missing + t.Extra + t.Different; total > int64(n) && len(t.KeyColumns) > 0 {
			if _, err := fmt.Fprintf(w, "%s: %d more differing keys not shown\n", t.Source, total-int64(n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// String is the text report with up to 20 keys per table, handy in test
// failure messages.
func (r *Report) String() string {
	var b strings.Builder
	_ = r.WriteText(&b, 20) // a strings.Builder does not fail
	return b.String()
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Equal bool `json:"equal"`
		*Report
	}{r.Equal(), r})
}
