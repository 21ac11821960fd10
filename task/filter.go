package task

import (
	"strings"

	"github.com/sluice-db/sluice"
)

// systemSchemas are never copied, whatever the patterns say. sluice_meta
// is sluice's own: on a source that is itself a sluice target (a chained
// set-up) it holds that task's checkpoints, and copied or replicated it
// would merge them into this target's, and a DROP DATABASE sluice_meta
// there would drop this target's checkpoints for every task.
var systemSchemas = map[string]bool{"mysql": true, "information_schema": true, "performance_schema": true, "sys": true, "sluice_meta": true}

func splitPattern(p string) (schema, table string, err error) {
	c, err := cachedPattern(p)
	if err != nil {
		return "", "", err
	}
	i, _ := splitAt(p)
	return c.SchemaPart(), p[i+1:], nil
}

func match(patterns []string, t sluice.TableRef) bool {
	for _, p := range patterns {
		c, err := cachedPattern(p)
		if err == nil && c.Match(t.Schema, t.Name) {
			return true
		}
	}
	return false
}

// Selected reports whether the task copies table t.
func (c *Config) Selected(t sluice.TableRef) bool {
	if systemSchemas[strings.ToLower(t.Schema)] {
		return false
	}
	return match(c.Tables.Include, t) && !match(c.Tables.Exclude, t)
}

// SchemaSelected reports whether any table of schema could be selected, for
// schema-level DDL such as CREATE DATABASE.
func (c *Config) SchemaSelected(schema string) bool {
	if systemSchemas[strings.ToLower(schema)] {
		return false
	}
	for _, p := range c.Tables.Include {
		if cp, err := cachedPattern(p); err == nil && cp.MatchSchema(schema) {
			return true
		}
	}
	return false
}

// Route maps a source table to its target name. The first matching route
// wins; without one the name is unchanged.
func (c *Config) Route(t sluice.TableRef) sluice.TableRef {
	for _, r := range c.Routes {
		if !MatchPart(r.Schema, t.Schema) {
			continue
		}
		tp := r.Table
		if tp == "" {
			tp = "*"
		}
		if !MatchPart(tp, t.Name) {
			continue
		}
		out := sluice.TableRef{Schema: r.TargetSchema, Name: t.Name}
		if r.TargetTable != "" {
			out.Name = r.TargetTable
		}
		return out
	}
	return t
}

// RouteSchema maps a source schema name to the target schema (for DDL that
// names only a schema).
func (c *Config) RouteSchema(schema string) string {
	for _, r := range c.Routes {
		if r.Table != "" && r.Table != "*" {
			continue
		}
		if MatchPart(r.Schema, schema) {
			return r.TargetSchema
		}
	}
	return schema
}

// IncludePatterns are tables.include compiled (Validate has checked them).
func (c *Config) IncludePatterns() []Pattern {
	out := make([]Pattern, 0, len(c.Tables.Include))
	for _, p := range c.Tables.Include {
		if cp, err := cachedPattern(p); err == nil {
			out = append(out, cp)
		}
	}
	return out
}
