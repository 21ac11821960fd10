package decode

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// The target runs the source's own DDL text (issue 29, N8/N9). Rendering a
// parsed statement back through the TiDB parser, a MySQL dialect, adds
// MySQL's ENFORCED to CHECK constraints (MariaDB answers 1064), drops
// ALTER IGNORE (the target then refuses the duplicates the source dropped),
// drops MariaDB-only clauses the parser skips, and re-escapes string
// literals without regard to the session's sql_mode. So the statement goes
// out byte for byte, and when a route renames a table only the table names
// are replaced in the text. The parser still reads the statement: the
// schema tracker follows it, and it checks that the rewrite is right.

// sqlTok is one token of a statement's text.
type sqlTok struct {
	start, end int
	kind       byte   // 'w' bare word, 'i' quoted identifier, 's' string literal, 'p' punctuation
	text       string // a word upper-cased, an identifier unquoted, the punctuation
}

func (t sqlTok) word(w string) bool { return t.kind == 'w' && t.text == w }

func (t sqlTok) ident() bool { return t.kind == 'w' || t.kind == 'i' }

// name is the identifier as written: a bare word keeps its case.
func (t sqlTok) name(q string) string {
	if t.kind == 'w' {
		return q[t.start:t.end]
	}
	return t.text
}

// lexSQL splits q into tokens the way MariaDB's lexer does for what
// matters here: quoted identifiers and strings (ANSI_QUOTES makes "..." an
// identifier, NO_BACKSLASH_ESCAPES makes a backslash plain), comments
// skipped, and the content of executable comments (/*! ... */, /*M! ...
// */) read as statement text, as MariaDB runs it.
func lexSQL(q string, ansiQuotes, noBackslash bool) []sqlTok {
	var toks []sqlTok
	inExec := false
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#' || (c == '-' && i+2 <= len(q) && strings.HasPrefix(q[i:], "--") && (i+2 == len(q) || q[i+2] <= ' ')):
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '*' && inExec && i+1 < len(q) && q[i+1] == '/':
			inExec = false
			i += 2
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			if strings.HasPrefix(q[i:], "/*!") || strings.HasPrefix(q[i:], "/*M!") {
				i += strings.Index(q[i:], "!") + 1
				for i < len(q) && q[i] >= '0' && q[i] <= '9' {
					i++
				}
				inExec = true
				continue
			}
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return toks
			}
			i += 2 + end + 2
		case c == '`' || (c == '"' && ansiQuotes):
			j, text := quoted(q, i, c, false)
			toks = append(toks, sqlTok{start: i, end: j, kind: 'i', text: text})
			i = j
		case c == '\'' || c == '"':
			j, text := quoted(q, i, c, !noBackslash)
			toks = append(toks, sqlTok{start: i, end: j, kind: 's', text: text})
			i = j
		case isWordByte(c):
			j := i
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			toks = append(toks, sqlTok{start: i, end: j, kind: 'w', text: strings.ToUpper(q[i:j])})
			i = j
		default:
			toks = append(toks, sqlTok{start: i, end: i + 1, kind: 'p', text: q[i : i+1]})
			i++
		}
	}
	return toks
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// quoted reads the quoted token starting at q[i] (quote character c): its
// end and its unquoted text. A doubled quote stands for one.
func quoted(q string, i int, c byte, backslash bool) (int, string) {
	var sb strings.Builder
	j := i + 1
	for j < len(q) {
		switch {
		case backslash && q[j] == '\\' && j+1 < len(q):
			sb.WriteByte(q[j+1]) // good enough: only names are compared
			j += 2
		case q[j] == c && j+1 < len(q) && q[j+1] == c:
			sb.WriteByte(c)
			j += 2
		case q[j] == c:
			return j + 1, sb.String()
		default:
			sb.WriteByte(q[j])
			j++
		}
	}
	return j, sb.String()
}

// nameSpan is a table name in the text: tokens from..to (inclusive), one
// identifier or schema, '.', identifier.
type nameSpan struct{ from, to int }

// tableSpans finds the table names of a table DDL statement in the order
// the decoder lists them (ddlStmt's names): the table, then a LIKE source;
// the renamed-to table of ALTER TABLE ... RENAME; each table of DROP
// TABLE; each pair of RENAME TABLE; the table of TRUNCATE, CREATE INDEX and
// DROP INDEX. ok is false for any other shape.
func tableSpans(toks []sqlTok) (spans []nameSpan, ok bool) {
	k := 0
	skip := func(words ...string) bool {
		if k < len(toks) {
			for _, w := range words {
				if toks[k].word(w) {
					k++
					return true
				}
			}
		}
		return false
	}
	name := func() bool {
		if k >= len(toks) || !toks[k].ident() {
			return false
		}
		s := nameSpan{from: k, to: k}
		if k+2 < len(toks) && toks[k+1].kind == 'p' && toks[k+1].text == "." && toks[k+2].ident() {
			s.to = k + 2
		}
		spans = append(spans, s)
		k = s.to + 1
		return true
	}
	ifExists := func(not bool) {
		if k+1 < len(toks) && toks[k].word("IF") {
			if not && k+2 < len(toks) && toks[k+1].word("NOT") && toks[k+2].word("EXISTS") {
				k += 3
			} else if !not && toks[k+1].word("EXISTS") {
				k += 2
			}
		}
	}
	punct := func(p string) bool {
		if k < len(toks) && toks[k].kind == 'p' && toks[k].text == p {
			k++
			return true
		}
		return false
	}
	waitOpt := func() { // MariaDB's WAIT n | NOWAIT
		if skip("NOWAIT") {
			return
		}
		if k+1 < len(toks) && toks[k].word("WAIT") {
			k += 2
		}
	}
	switch {
	case skip("CREATE"):
		if skip("OR") && !skip("REPLACE") {
			return nil, false
		}
		if skip("UNIQUE", "FULLTEXT", "SPATIAL") || (k < len(toks) && toks[k].word("INDEX")) {
			if !skip("INDEX") {
				return nil, false
			}
			// The index name, then ON at the top level.
			for ; k < len(toks) && !toks[k].word("ON"); k++ {
			}
			k++
			return spans, name()
		}
		skip("TEMPORARY")
		if !skip("TABLE") {
			return nil, false
		}
		ifExists(true)
		if !name() {
			return nil, false
		}
		// CREATE TABLE t LIKE s, CREATE TABLE t (LIKE s)
		paren := punct("(")
		if skip("LIKE") {
			if !name() || (paren && !punct(")")) {
				return nil, false
			}
		}
		return spans, true
	case skip("ALTER"):
		skip("ONLINE")
		skip("IGNORE")
		if !skip("TABLE") {
			return nil, false
		}
		ifExists(false)
		if !name() {
			return nil, false
		}
		waitOpt()
		depth := 0
		for ; k < len(toks); k++ {
			t := toks[k]
			switch {
			case t.kind == 'p' && t.text == "(":
				depth++
			case t.kind == 'p' && t.text == ")":
				depth--
			case depth == 0 && t.word("RENAME") && (k == 0 || toks[k-1].kind == 'p' || toks[k-1].kind == 'w'):
				// RENAME [TO|AS|=] new, but not RENAME COLUMN/INDEX/KEY/CONSTRAINT.
				j := k + 1
				if j < len(toks) && (toks[j].word("COLUMN") || toks[j].word("INDEX") || toks[j].word("KEY") || toks[j].word("CONSTRAINT")) {
					continue
				}
				k = j
				if !skip("TO", "AS") {
					punct("=")
				}
				if !name() {
					return nil, false
				}
				k--
			}
		}
		return spans, true
	case skip("DROP"):
		if skip("INDEX") {
			for ; k < len(toks) && !toks[k].word("ON"); k++ {
			}
			k++
			return spans, name()
		}
		skip("TEMPORARY")
		if !skip("TABLE", "TABLES") {
			return nil, false
		}
		ifExists(false)
		for {
			if !name() {
				return nil, false
			}
			if !punct(",") {
				return spans, true
			}
		}
	case skip("RENAME"):
		if !skip("TABLE", "TABLES") {
			return nil, false
		}
		ifExists(false)
		for {
			if !name() {
				return nil, false
			}
			waitOpt()
			if !skip("TO") || !name() {
				return nil, false
			}
			if !punct(",") {
				return spans, k == len(toks) || (k == len(toks)-1 && toks[k].text == ";")
			}
		}
	case skip("TRUNCATE"):
		skip("TABLE")
		return spans, name()
	}
	return nil, false
}

// spanIs reports whether the name at s is ref as the AST read it (ref's
// schema is the default schema when the text names none).
func spanIs(q string, toks []sqlTok, s nameSpan, tn *ast.TableName) bool {
	n := toks[s.to].name(q)
	if s.from == s.to {
		return tn.Schema.O == "" && strings.EqualFold(n, tn.Name.O)
	}
	return strings.EqualFold(toks[s.from].name(q), tn.Schema.O) && strings.EqualFold(n, tn.Name.O)
}

// sourceText returns the text to send for statement st, whose text is
// d.src, with names (ddlStmt's list, not yet routed) routed: the source's
// own text when the routes change no name, or that text with the names
// replaced. ok is false when the text cannot be matched to the statement;
// the caller then renders the statement from the parse.
func (d *Decoder) sourceText(def string, st ast.StmtNode, names []*ast.TableName) (string, bool) {
	q := d.src.text
	if q == "" {
		return "", false
	}
	toks := lexSQL(q, d.src.ansiQuotes, d.src.noBackslash)
	spans, ok := tableSpans(toks)
	if !ok || len(spans) != len(names) {
		return "", false
	}
	same := true
	tos := make([]sluice.TableRef, len(names))
	for i, tn := range names {
		if !spanIs(q, toks, spans[i], tn) {
			return "", false
		}
		from := schema.RefOf(tn, def)
		tos[i] = d.route(from)
		if tos[i] != from || (tn.Schema.O == "" && (!d.schemaSelected(def) || d.routeSchema(def) != def)) {
			same = false
		}
	}
	if same {
		return q, true
	}
	var sb strings.Builder
	last := 0
	for i, s := range spans {
		sb.WriteString(q[last:toks[s.from].start])
		sb.WriteString(sluice.QuoteIdent(tos[i].Schema) + "." + sluice.QuoteIdent(tos[i].Name))
		last = toks[s.to].end
	}
	sb.WriteString(q[last:])
	out := sb.String()
	if !d.sameButNames(q, out, st) {
		return "", false
	}
	return out, true
}

// sameButNames checks a rewrite: parsed, out differs from q in table names
// only, and each differs as routed.
func (d *Decoder) sameButNames(q, out string, st ast.StmtNode) bool {
	defer d.tracker.ForgetOrReplace() // the check's parses are not the statement being applied
	o, err1 := d.tracker.Parse(q)
	r, err2 := d.tracker.Parse(out)
	if err1 != nil || err2 != nil || len(o) != 1 || len(r) != 1 {
		return false
	}
	on, rn := collectTableNames(o[0]), collectTableNames(r[0])
	if len(on) != len(rn) {
		return false
	}
	for i := range on {
		on[i].Schema, on[i].Name = rn[i].Schema, rn[i].Name
	}
	a, errA := restore(o[0])
	b, errB := restore(r[0])
	return errA == nil && errB == nil && a[0] == b[0]
}

type tableNameCollector struct{ names []*ast.TableName }

func (c *tableNameCollector) Enter(n ast.Node) (ast.Node, bool) {
	if tn, ok := n.(*ast.TableName); ok {
		c.names = append(c.names, tn)
	}
	return n, false
}

func (c *tableNameCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func collectTableNames(st ast.StmtNode) []*ast.TableName {
	var c tableNameCollector
	st.Accept(&c)
	return c.names
}
