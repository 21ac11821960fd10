package preflight

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/task"
)

// What sluice does not copy, said before and after the copy (issue 29,
// N10, N11): the full copy and replication move base tables and their
// rows. A selected sequence or system-versioned table is refused before
// anything starts, since copying it would not be exact (a sequence's state,
// a versioned table's history) and replication would stop on its first
// change; a table whose default takes a sequence's next value needs that
// sequence on the target. Views, triggers, routines and events are left
// out, and named, in sluice check and at the end of the copy.

// sourceObjectChecks returns the checks "refused tables" (fail) and
// "objects not copied" (warn). dst may be nil (no target connection).
func sourceObjectChecks(ctx context.Context, src, dst *sql.DB, cfg *task.Config) []Result {
	o, err := schema.SourceObjects(ctx, src, cfg.Selected, cfg.SchemaSelected)
	if err != nil {
		return []Result{errResult("refused tables", dbconn.Classify(err, "source", cfg.Source))}
	}
	return []Result{refusedTables(ctx, dst, cfg, o), leftOut(o)}
}

func refusedTables(ctx context.Context, dst *sql.DB, cfg *task.Config, o *schema.Objects) Result {
	r := Result{Name: "refused tables", Status: "pass", Detail: "no sequence or system-versioned table is selected"}
	fail := func(detail, fix string) Result {
		r.Status, r.Detail, r.Fix = "fail", detail, fix
		r.Err = fmt.Errorf("%w: %s", sluice.ErrConfig, detail)
		return r
	}
	if len(o.Versioned) > 0 {
		return fail(fmt.Sprintf("sluice copies and replicates no system-versioned table: %s", refList(o.Versioned)),
			fmt.Sprintf("add them to tables.exclude (%s) and move them by other means, or remove their versioning on the source (ALTER TABLE %s DROP SYSTEM VERSIONING)",
				excludeList(o.Versioned), o.Versioned[0]))
	}
	if len(o.Sequences) > 0 {
		return fail(fmt.Sprintf("sluice copies and replicates no sequence: %s", refList(o.Sequences)),
			fmt.Sprintf("add them to tables.exclude (%s) and create them on the target yourself, starting past the source's values (SELECT NEXTVAL on the source, CREATE SEQUENCE ... START WITH it on the target)",
				excludeList(o.Sequences)))
	}
	if dst != nil {
		for _, d := range o.SequenceDefaults {
			ok, err := schema.SequenceExists(ctx, dst, d.Sequence)
			if err != nil {
				return errResult(r.Name, dbconn.Classify(err, "target", cfg.Target))
			}
			if !ok {
				return fail(fmt.Sprintf("column %s of %s defaults to NEXT VALUE FOR %s, and the target has no sequence %s (sluice copies no sequence)", d.Column, d.Table, d.Sequence, d.Sequence),
					fmt.Sprintf("create sequence %s on the target first (SHOW CREATE SEQUENCE on the source), starting past the source's values, or exclude %s", d.Sequence, d.Table))
			}
		}
	}
	return r
}

// leftOut warns about the objects neither copied nor replicated.
func leftOut(o *schema.Objects) Result {
	r := Result{Name: "objects not copied", Status: "pass", Detail: "no view, trigger, routine or event in the selected schemas"}
	if s := leftOutText(o, false); s != "" {
		r.Status, r.Detail = "warn", s
		r.Fix = "create them on the target yourself (SHOW CREATE ... on the source); sluice copies and replicates tables and their rows only"
	}
	return r
}

// leftOutText names the left-out objects per kind ("" when none); refused
// adds the sequences and system-versioned tables (sluice dump, which runs
// no checks, skips them).
func leftOutText(o *schema.Objects, refused bool) string {
	type kind struct {
		kind  string
		names []string
	}
	var parts []string
	kinds := []kind{{"views", o.Views}, {"triggers", o.Triggers}, {"routines", o.Routines}, {"events", o.Events}}
	if refused {
		kinds = append(kinds, kind{"sequences", refStrings(o.Sequences)}, kind{"system-versioned tables", refStrings(o.Versioned)})
	}
	for _, k := range kinds {
		if len(k.names) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(k.names), k.kind, capList(k.names)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "not copied: " + strings.Join(parts, "; ")
}

// LeftOutLine is the line printed at the end of a full copy or a dump:
// what it did not copy ("" when nothing was left out).
func LeftOutLine(ctx context.Context, cfg *task.Config) string {
	src, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return "could not list the objects the copy leaves out: " + oneLine(err)
	}
	defer src.Close()
	o, err := schema.SourceObjects(ctx, src, cfg.Selected, cfg.SchemaSelected)
	if err != nil {
		return "could not list the objects the copy leaves out: " + oneLine(err)
	}
	if s := leftOutText(o, true); s != "" {
		return s + "; create them on the target yourself (sluice copies tables and rows only)"
	}
	return ""
}

func refStrings(refs []sluice.TableRef) []string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = r.String()
	}
	return s
}

func refList(refs []sluice.TableRef) string { return capList(refStrings(refs)) }

func excludeList(refs []sluice.TableRef) string {
	s := refStrings(refs)
	if len(s) > 10 {
		s = s[:10]
	}
	return "tables.exclude: [" + strings.Join(s, ", ") + "]"
}

// capList joins names, at most 10 of them.
func capList(names []string) string {
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(", and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}
