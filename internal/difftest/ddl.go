package difftest

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
)

// ddl runs one generated DDL step between rounds of DML: the kinds that
// docs/manual/apply.md says are replicated. A statement the source refuses
// (a MODIFY that would truncate, a unique key over duplicates) is counted
// and has no effect; the model is re-read either way.
func (w *workload) ddl(ctx context.Context, round int) error {
	r := w.rng(round, 99)
	names := sortedNames(w.model)
	stmts := w.ddlStmts(ctx, r, names)
	for _, s := range stmts {
		w.ddls.Add(1)
		if _, err := w.db.ExecContext(ctx, s); err != nil {
			w.ddlFailed.Add(1)
			w.logf("ddl (source refused: %v): %s", err, oneLine(s))
			break
		}
		w.logf("ddl: %s", oneLine(s))
	}
	return w.reload(ctx)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (w *workload) ddlStmts(ctx context.Context, r *rand.Rand, names []string) []string {
	f := w.f
	f.inDDL = true
	if len(names) == 0 {
		return []string{createTable(r, f, w.schema, w.newName(), &w.next)}
	}
	t := w.model[pick(r, names)]
	qt := w.qt(t)
	kind := r.Intn(13)
	if len(names) >= 8 && kind > 9 {
		kind = 9 // DROP: keep the schema small
	}
	if f.DDLKinds != "" && !strings.Contains(","+f.DDLKinds+",", ","+ddlKinds[kind]+",") {
		return nil
	}
	switch kind {
	case 0: // ADD COLUMN
		typ := colType(r, f, false, t.Keyless())
		w.next++
		pos := ""
		switch r.Intn(3) {
		case 0:
			pos = " FIRST"
		case 1:
			pos = " AFTER `" + pick(r, t.Cols).Name + "`"
		}
		def := ""
		if r.Intn(3) == 0 && !strings.Contains(typ, "BLOB") && !strings.Contains(typ, "TEXT") && typ != "JSON" &&
			!strings.Contains(typ, "POINT") && !strings.Contains(typ, "GEOMETRY") && !strings.Contains(typ, "LINESTRING") {
			def = " NOT NULL DEFAULT " + gen{r: r, f: f}.value(Col{Name: "x", DataType: baseType(typ), ColumnType: strings.ToLower(typ)}, false)
		}
		return []string{fmt.Sprintf("ALTER TABLE %s ADD COLUMN `c%d%s` %s%s%s", qt, w.next, colSuffix(typ), typ, def, pos)}
	case 1: // DROP COLUMN
		c := pick(r, t.Cols)
		return []string{fmt.Sprintf("ALTER TABLE %s DROP COLUMN `%s`", qt, c.Name)}
	case 2: // MODIFY COLUMN: widen, or change to a new random type
		c := pick(r, t.Cols)
		if c.Generated || (f.plain() && mariadbOnly(c)) {
			return nil
		}
		typ := widen(c)
		if r.Intn(3) == 0 {
			typ = colType(r, f, t.isKeyCol(c.Name), t.Keyless())
		}
		return []string{fmt.Sprintf("ALTER TABLE %s MODIFY COLUMN `%s` %s%s", qt, c.Name, typ, nullness(c))}
	case 3: // CHANGE COLUMN: rename, same definition
		c := pick(r, t.Cols)
		if c.Generated || (f.plain() && mariadbOnly(c)) {
			return nil
		}
		w.next++
		suffix := ""
		if strings.HasSuffix(c.Name, "_j") {
			suffix = "_j"
		}
		return []string{fmt.Sprintf("ALTER TABLE %s CHANGE COLUMN `%s` `c%d%s` %s%s", qt, c.Name, w.next, suffix, fullType(c), nullness(c))}
	case 4: // ADD INDEX, unique or not
		var cands []string
		for _, c := range t.Cols {
			if indexable(c) && !(f.NoBinKeys && caseSensitive(c)) {
				cands = append(cands, c.Name)
			}
		}
		if len(cands) == 0 {
			return nil
		}
		cols := []string{pick(r, cands)}
		if r.Intn(2) == 0 {
			if c2 := pick(r, cands); c2 != cols[0] {
				cols = append(cols, c2)
			}
		}
		w.next++
		kind := "INDEX"
		if r.Intn(2) == 0 {
			kind = "UNIQUE INDEX"
		}
		if len(t.PK) == 0 && r.Intn(4) == 0 {
			return []string{fmt.Sprintf("ALTER TABLE %s ADD PRIMARY KEY (%s)", qt, quoteList(cols))}
		}
		return []string{fmt.Sprintf("ALTER TABLE %s ADD %s ix%d (%s)", qt, kind, w.next, quoteList(cols))}
	case 5: // DROP INDEX
		if f.NoDropKey {
			return nil
		}
		var idx []string
		rows, err := w.db.QueryContext(ctx, "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=? AND TABLE_NAME=? ORDER BY INDEX_NAME", w.schema, t.Name)
		if err == nil {
			for rows.Next() {
				var n string
				if rows.Scan(&n) == nil {
					idx = append(idx, n)
				}
			}
			rows.Close()
		}
		if len(idx) == 0 {
			return nil
		}
		if n := pick(r, idx); n != "PRIMARY" {
			return []string{fmt.Sprintf("ALTER TABLE %s DROP INDEX `%s`", qt, n)}
		}
		return []string{fmt.Sprintf("ALTER TABLE %s DROP PRIMARY KEY", qt)}
	case 6: // RENAME TABLE
		return []string{fmt.Sprintf("RENAME TABLE %s TO `%s`.`%s`", qt, w.schema, w.newName())}
	case 7: // swap two tables
		if len(names) < 2 || f.NoSwap {
			return nil
		}
		b := w.model[pick(r, names)]
		if b == t {
			return nil
		}
		tmp := w.newName()
		return []string{fmt.Sprintf("RENAME TABLE %s TO `%s`.`%s`, %s TO %s, `%s`.`%s` TO %s", qt, w.schema, tmp, w.qt(b), qt, w.schema, tmp, w.qt(b))}
	case 8: // CREATE ... LIKE, then some rows
		n := w.newName()
		return []string{fmt.Sprintf("CREATE TABLE `%s`.`%s` LIKE %s", w.schema, n, qt),
			fmt.Sprintf("INSERT INTO `%s`.`%s` SELECT * FROM %s", w.schema, n, qt)}
	case 9: // DROP, sometimes re-created under the same name
		s := []string{"DROP TABLE " + qt}
		if r.Intn(2) == 0 {
			s = append(s, createTable(r, f, w.schema, t.Name, &w.next))
		}
		return s
	case 10:
		return []string{"TRUNCATE TABLE " + qt}
	case 11:
		return []string{createTable(r, f, w.schema, w.newName(), &w.next)}
	default: // ALTER of a column's default and a table option together
		c := pick(r, t.Cols)
		if c.Generated || !strings.Contains(c.DataType, "int") {
			return []string{fmt.Sprintf("ALTER TABLE %s COMMENT='round'", qt)}
		}
		return []string{fmt.Sprintf("ALTER TABLE %s ALTER COLUMN `%s` SET DEFAULT %d, COMMENT='d'", qt, c.Name, r.Intn(9))}
	}
}

// ddlKinds names the kinds of ddlStmts, in its order.
var ddlKinds = []string{"addcol", "dropcol", "modify", "change", "addindex", "dropindex", "rename", "swap", "like", "drop", "truncate", "create", "default"}

func (w *workload) newName() string {
	w.tables++
	return fmt.Sprintf("t%d", w.tables)
}

// fullType is a column's type with its character set and collation.
func fullType(c Col) string {
	if c.Collation != "" && c.Charset != "binary" {
		return c.ColumnType + " CHARACTER SET " + c.Charset + " COLLATE " + c.Collation
	}
	return c.ColumnType
}

func nullness(c Col) string {
	if c.Nullable {
		return " NULL"
	}
	return " NOT NULL"
}

// widen returns a wider type of the same kind (or the same type).
func widen(c Col) string {
	ct := c.ColumnType
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int":
		if strings.Contains(ct, "unsigned") {
			return "BIGINT UNSIGNED"
		}
		return "BIGINT"
	case "varchar", "varbinary", "char", "binary":
		n, _ := typeLen(ct)
		return fullType(Col{ColumnType: fmt.Sprintf("%s(%d)", c.DataType, n+8), Charset: c.Charset, Collation: c.Collation})
	case "datetime", "time", "timestamp":
		return fullType(Col{ColumnType: c.DataType + "(6)"})
	}
	return fullType(c)
}

// caseSensitive: binary types, _bin and NO PAD collations (keys that
// compaction folds wrongly).
func caseSensitive(c Col) bool {
	return strings.HasSuffix(c.Collation, "_bin") || strings.Contains(c.Collation, "nopad") || c.Charset == "binary" || strings.Contains(c.DataType, "binary") ||
		(c.Collation == "" && (strings.Contains(c.DataType, "char") || strings.Contains(c.DataType, "text")))
}

// mariadbOnly: columns whose definition TiDB's parser cannot read back.
func mariadbOnly(c Col) bool {
	switch c.DataType {
	case "uuid", "inet4", "inet6":
		return true
	}
	return isSpatial(c.DataType) || c.Invisible || strings.Contains(c.Collation, "nopad")
}

// indexable: columns a plain index can cover without a prefix length.
func indexable(c Col) bool {
	switch c.DataType {
	case "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob", "json":
		return false
	}
	if isSpatial(c.DataType) {
		return false
	}
	n, _ := typeLen(c.ColumnType)
	return n < 200
}

// baseType maps a generated type to information_schema's DATA_TYPE.
func baseType(typ string) string {
	t := strings.ToLower(strings.Fields(typ)[0])
	if i := strings.IndexByte(t, '('); i >= 0 {
		t = t[:i]
	}
	return t
}
