package task

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// The pattern language of tables.include, tables.exclude and routes:
//
//   - A table pattern is SCHEMA.TABLE, split at the first '.' that is not
//     escaped or quoted; a '.' in the table part is an ordinary character.
//   - '*' matches any run of characters, '?' one character, and [abc],
//     [a-z], [^0-9] one character of a class, as in a shell. Unlike a file
//     glob, '*' and '?' match '/' and '.' too: a name is not a path.
//   - \c matches the character c itself (\. \* \? \[ \\ \`).
//   - `...` quotes a literal run, as MySQL quotes identifiers: inside it
//     every character is itself, and `` is one backquote. So
//     `x.y`.`a/b` names table a/b of schema x.y, and `x.y`.* every
//     table of it.
//   - Matching ignores case, as MariaDB does for names on most systems.
//
// Names with '/' are handled by every part of sluice that stores state on
// disk by escaping them (internal/dumpfmt: a dump file name never holds
// '/', '.' or '..' from a name).

// glob is one compiled part of a pattern.
type glob struct {
	re *regexp.Regexp
	// literal is the name when the part has no wildcard ("" otherwise).
	literal string
	wild    bool
}

func (g glob) match(s string) bool { return g.re.MatchString(s) }

// compilePart compiles one part (schema or table) of a pattern.
func compilePart(p string) (glob, error) {
	if p == "" {
		return glob{}, errors.New("a part is empty")
	}
	var re, lit strings.Builder
	re.WriteString("(?is)^")
	wild := false
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch c {
		case '`':
			j := i + 1
			for ; j < len(rs); j++ {
				if rs[j] == '`' {
					if j+1 < len(rs) && rs[j+1] == '`' {
						re.WriteString(regexp.QuoteMeta("`"))
						lit.WriteRune('`')
						j++
						continue
					}
					break
				}
				re.WriteString(regexp.QuoteMeta(string(rs[j])))
				lit.WriteRune(rs[j])
			}
			if j >= len(rs) {
				return glob{}, errors.New("a ` quote is not closed")
			}
			i = j
		case '\\':
			if i+1 >= len(rs) {
				return glob{}, errors.New("it ends with a lone \\")
			}
			i++
			re.WriteString(regexp.QuoteMeta(string(rs[i])))
			lit.WriteRune(rs[i])
		case '*':
			re.WriteString(".*")
			wild = true
		case '?':
			re.WriteString(".")
			wild = true
		case '[':
			j := i + 1
			var cls strings.Builder
			cls.WriteByte('[')
			if j < len(rs) && (rs[j] == '^' || rs[j] == '!') {
				cls.WriteByte('^')
				j++
			}
			start := j
			for ; j < len(rs) && (rs[j] != ']' || j == start); j++ {
				switch {
				case rs[j] == '\\' && j+1 < len(rs):
					j++
					cls.WriteString(regexp.QuoteMeta(string(rs[j])))
				case rs[j] == '-' && j > start && j+1 < len(rs) && rs[j+1] != ']':
					cls.WriteByte('-')
				default:
					cls.WriteString(regexp.QuoteMeta(string(rs[j])))
				}
			}
			if j >= len(rs) {
				return glob{}, errors.New("a [ class is not closed")
			}
			cls.WriteByte(']')
			re.WriteString(cls.String())
			wild = true
			i = j
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
			lit.WriteRune(c)
		}
	}
	re.WriteString("$")
	r, err := regexp.Compile(re.String())
	if err != nil {
		return glob{}, fmt.Errorf("bad character class: %v", err)
	}
	g := glob{re: r, wild: wild}
	if !wild {
		g.literal = lit.String()
	}
	return g, nil
}

// Pattern is a compiled SCHEMA.TABLE pattern.
type Pattern struct {
	Text          string
	schema, table glob
}

// ParsePattern compiles a SCHEMA.TABLE pattern (see the top of this file).
func ParsePattern(p string) (Pattern, error) {
	i, err := splitAt(p)
	if err != nil {
		return Pattern{}, err
	}
	if i < 0 {
		return Pattern{}, errors.New("must be schema.table, e.g. \"db.*\" (quote a name that holds a dot: `x.y`.*)")
	}
	s, err := compilePart(p[:i])
	if err != nil {
		return Pattern{}, fmt.Errorf("schema part %q: %v", p[:i], err)
	}
	t, err := compilePart(p[i+1:])
	if err != nil {
		return Pattern{}, fmt.Errorf("table part %q: %v", p[i+1:], err)
	}
	return Pattern{Text: p, schema: s, table: t}, nil
}

// splitAt returns the index of the first '.' outside quotes, classes and
// escapes, or -1.
func splitAt(p string) (int, error) {
	inQuote, inClass := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case inQuote:
			if c == '`' {
				if i+1 < len(p) && p[i+1] == '`' {
					i++
				} else {
					inQuote = false
				}
			}
		case inClass:
			if c == '\\' {
				i++
			} else if c == ']' {
				inClass = false
			}
		case c == '\\':
			i++
		case c == '`':
			inQuote = true
		case c == '[':
			inClass = true
			if i+1 < len(p) && p[i+1] == ']' {
				i++ // "[]...]": the first ] is a member
			}
		case c == '.':
			return i, nil
		}
	}
	if inQuote {
		return -1, errors.New("a ` quote is not closed")
	}
	return -1, nil
}

// MatchSchema reports whether the schema part matches schema.
func (p Pattern) MatchSchema(schema string) bool { return p.schema.match(schema) }

// Match reports whether the pattern matches schema.table.
func (p Pattern) Match(schema, table string) bool {
	return p.schema.match(schema) && p.table.match(table)
}

// SchemaName is the schema part's name when it has no wildcard, else "".
func (p Pattern) SchemaName() string { return p.schema.literal }

// SchemaPart is the schema part as written.
func (p Pattern) SchemaPart() string {
	i, _ := splitAt(p.Text)
	return p.Text[:i]
}

// MatchPart matches one name against a one-part pattern (routes: schema
// and table), with the same syntax as each part of SCHEMA.TABLE.
func MatchPart(pattern, name string) bool {
	g, err := cachedPart(pattern)
	return err == nil && g.match(name)
}

// ParsePatterns compiles every pattern; the first bad one is an error.
func ParsePatterns(ps []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(ps))
	for _, p := range ps {
		c, err := ParsePattern(p)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", p, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// cache holds compiled patterns and parts: Selected and Route run for every
// table a binlog event names. A pure cache of immutable values.
var cache sync.Map // string -> cached

type cached struct {
	p   Pattern
	g   glob
	err error
}

func cachedPattern(p string) (Pattern, error) {
	if v, ok := cache.Load("p\x00" + p); ok {
		c := v.(cached)
		return c.p, c.err
	}
	c, err := ParsePattern(p)
	cache.Store("p\x00"+p, cached{p: c, err: err})
	return c, err
}

func cachedPart(p string) (glob, error) {
	if v, ok := cache.Load("g\x00" + p); ok {
		c := v.(cached)
		return c.g, c.err
	}
	g, err := compilePart(p)
	cache.Store("g\x00"+p, cached{g: g, err: err})
	return g, err
}
