package difftest

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"sort"
	"strings"
)

// Col is a column as the source's information_schema describes it. The
// generator works from this description, re-read after every DDL, so it
// never has to model what an ALTER did.
type Col struct {
	Name, DataType, ColumnType, Charset, Collation string
	Nullable, Generated, Invisible                 bool
}

// Table is a table of the seed's schema.
type Table struct {
	Name    string
	Cols    []Col
	PK      []string
	Uniques [][]string // unique keys other than the primary key
}

// Keyless reports whether sluice has to match rows by all their columns:
// no primary key and no unique key over NOT NULL columns.
func (t *Table) Keyless() bool {
	if len(t.PK) > 0 {
		return false
	}
	for _, u := range t.Uniques {
		ok := true
		for _, c := range u {
			if col := t.col(c); col == nil || col.Nullable {
				ok = false
			}
		}
		if ok {
			return false
		}
	}
	return true
}

func (t *Table) col(name string) *Col {
	for i := range t.Cols {
		if t.Cols[i].Name == name {
			return &t.Cols[i]
		}
	}
	return nil
}

// writable lists the columns an INSERT names (generated ones excluded,
// invisible ones included).
func (t *Table) writable() []Col {
	var out []Col
	for _, c := range t.Cols {
		if !c.Generated {
			out = append(out, c)
		}
	}
	return out
}

func (t *Table) isKeyCol(name string) bool {
	for _, c := range t.PK {
		if c == name {
			return true
		}
	}
	for _, u := range t.Uniques {
		for _, c := range u {
			if c == name {
				return true
			}
		}
	}
	return false
}

// loadModel reads the schema's tables, columns and unique keys.
func loadModel(ctx context.Context, db *sql.DB, schema string) (map[string]*Table, error) {
	tables := map[string]*Table{}
	rows, err := db.QueryContext(ctx, `SELECT c.TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IFNULL(CHARACTER_SET_NAME,''),
		IFNULL(COLLATION_NAME,''), IS_NULLABLE, IS_GENERATED, EXTRA
		FROM information_schema.COLUMNS c JOIN information_schema.TABLES t USING (TABLE_SCHEMA, TABLE_NAME)
		WHERE c.TABLE_SCHEMA=? AND t.TABLE_TYPE='BASE TABLE' ORDER BY c.TABLE_NAME, ORDINAL_POSITION`, schema)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var tn, nullable, gen, extra string
		var c Col
		if err := rows.Scan(&tn, &c.Name, &c.DataType, &c.ColumnType, &c.Charset, &c.Collation, &nullable, &gen, &extra); err != nil {
			return nil, err
		}
		c.Nullable = nullable == "YES"
		c.Generated = gen == "ALWAYS"
		c.Invisible = strings.Contains(strings.ToUpper(extra), "INVISIBLE")
		t := tables[tn]
		if t == nil {
			t = &Table{Name: tn}
			tables[tn] = t
		}
		t.Cols = append(t.Cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	krows, err := db.QueryContext(ctx, `SELECT TABLE_NAME, INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA=? AND NON_UNIQUE=0 ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`, schema)
	if err != nil {
		return nil, err
	}
	defer krows.Close()
	keys := map[[2]string][]string{}
	var order [][2]string
	for krows.Next() {
		var tn, in, cn string
		if err := krows.Scan(&tn, &in, &cn); err != nil {
			return nil, err
		}
		k := [2]string{tn, in}
		if _, ok := keys[k]; !ok {
			order = append(order, k)
		}
		keys[k] = append(keys[k], cn)
	}
	if err := krows.Err(); err != nil {
		return nil, err
	}
	for _, k := range order {
		t := tables[k[0]]
		if t == nil {
			continue
		}
		if k[1] == "PRIMARY" {
			t.PK = keys[k]
		} else {
			t.Uniques = append(t.Uniques, keys[k])
		}
	}
	return tables, nil
}

// sortedNames returns the model's table names in order, so that choices
// drawn from the seed do not depend on map order.
func sortedNames(m map[string]*Table) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// collations are the text flavours: utf8mb4, latin1 and binary, in _ci,
// _bin and NO PAD collations.
var collations = []string{
	"utf8mb4 COLLATE utf8mb4_general_ci", "utf8mb4 COLLATE utf8mb4_unicode_ci",
	"utf8mb4 COLLATE utf8mb4_unicode_520_ci", "utf8mb4 COLLATE utf8mb4_bin",
	"utf8mb4 COLLATE utf8mb4_general_nopad_ci", "utf8mb4 COLLATE utf8mb4_nopad_bin",
	"utf8mb4 COLLATE utf8mb4_unicode_nopad_ci",
	"latin1 COLLATE latin1_swedish_ci", "latin1 COLLATE latin1_bin", "latin1 COLLATE latin1_general_ci",
	"latin1 COLLATE latin1_swedish_nopad_ci", "latin1 COLLATE latin1_nopad_bin",
}

// collation draws a character set and collation for a text column.
func collation(r *rand.Rand, f Features) string {
	for {
		c := pick(r, collations)
		if strings.Contains(c, "nopad") && (f.plain() || (f.NoLatin1NoPad && strings.Contains(c, "latin1"))) {
			continue
		}
		return c
	}
}

// ciCollation draws a case-insensitive PAD SPACE collation.
func ciCollation(r *rand.Rand, f Features) string {
	for {
		if c := collation(r, f); strings.HasSuffix(c, "_ci") && !strings.Contains(c, "nopad") {
			return c
		}
	}
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.Intn(len(xs))] }

// colType returns a random column type over the whole 10.11 type set. key
// asks for a type that can be (part of) an index without a prefix.
func colType(r *rand.Rand, f Features, key, keyless bool) string {
	ints := []string{"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"}
	intType := func() string {
		t := pick(r, ints)
		if r.Intn(2) == 0 {
			t += " UNSIGNED"
		}
		return t
	}
	text := func(kind string, n int) string {
		return fmt.Sprintf("%s(%d) CHARACTER SET %s", kind, n, collation(r, f))
	}
	binary := func(n int) string {
		if f.NoBinaryN {
			return fmt.Sprintf("VARBINARY(%d)", n)
		}
		return fmt.Sprintf("BINARY(%d)", n)
	}
	if key {
		keyText := func(kind string, n int) string {
			if !f.NoBinKeys {
				return text(kind, n)
			}
			return fmt.Sprintf("%s(%d) CHARACTER SET %s", kind, n, ciCollation(r, f))
		}
		opts := []func() string{
			intType, intType,
			func() string { return keyText("VARCHAR", 1+r.Intn(40)) },
			func() string { return keyText("CHAR", 1+r.Intn(8)) },
			func() string { return fmt.Sprintf("DECIMAL(%d,%d)", 6+r.Intn(10), r.Intn(4)) },
			func() string { return "DATE" },
			func() string { return fmt.Sprintf("DATETIME(%d)", r.Intn(7)) },
		}
		if !f.NoBinKeys {
			opts = append(opts, func() string { return fmt.Sprintf("VARBINARY(%d)", 1+r.Intn(16)) },
				func() string { return binary(1 + r.Intn(6)) })
		}
		if !f.NoUUID && !f.plain() {
			opts = append(opts, func() string { return pick(r, []string{"UUID", "INET4", "INET6"}) })
		}
		return pick(r, opts)()
	}
	opts := []func() string{
		intType, intType,
		func() string { p := 1 + r.Intn(65); return fmt.Sprintf("DECIMAL(%d,%d)", p, r.Intn(min(p, 30)+1)) },
		func() string { return fmt.Sprintf("BIT(%d)", 1+r.Intn(64)) },
		func() string { return "DATE" },
		func() string { return fmt.Sprintf("DATETIME(%d)", r.Intn(7)) },
		func() string { return fmt.Sprintf("TIMESTAMP(%d) NULL", r.Intn(7)) },
		func() string { return fmt.Sprintf("TIME(%d)", r.Intn(7)) },
		func() string { return "YEAR" },
		func() string { return text("VARCHAR", 1+r.Intn(60)) },
		func() string { return text("CHAR", 1+r.Intn(10)) },
		func() string {
			return pick(r, []string{"TINYTEXT", "TEXT", "MEDIUMTEXT"}) + " CHARACTER SET " + collation(r, f)
		},
		func() string { return binary(1 + r.Intn(8)) },
		func() string { return fmt.Sprintf("VARBINARY(%d)", 1+r.Intn(40)) },
		func() string { return pick(r, []string{"TINYBLOB", "BLOB", "MEDIUMBLOB"}) },
		func() string { return fmt.Sprintf("VARCHAR(%d) CHARACTER SET binary", 1+r.Intn(20)) },
		func() string { return "ENUM('a','b','c','A b','é','')" },
		func() string { return "SET('x','y','z','ü')" },
		func() string { return "JSON" },
	}
	if !f.plain() {
		opts = append(opts, func() string { return pick(r, []string{"POINT", "GEOMETRY", "LINESTRING"}) })
	}
	if !keyless || !f.NoFloatKeyless {
		opts = append(opts, func() string { return pick(r, []string{"FLOAT", "DOUBLE", "FLOAT UNSIGNED", "DOUBLE(12,3)"}) })
	}
	if !f.NoUUID && !f.plain() {
		opts = append(opts, func() string { return pick(r, []string{"UUID", "INET4", "INET6"}) })
	}
	return pick(r, opts)()
}

// colSuffix tags a column name with what the generator must know that
// information_schema does not say (JSON is LONGTEXT there).
func colSuffix(typ string) string {
	if typ == "JSON" {
		return "_j"
	}
	return ""
}

// Key shapes a table can be created with.
const (
	shapeIntPK = iota
	shapeNoKey
	shapeUnique         // only a NOT NULL unique key
	shapeNullableUnique // only a nullable unique key (still keyless for matching)
	shapeCompositeText  // composite primary key over collated strings
	shapeMixedPK        // composite primary key of another type mix, plus a unique key
	numShapes
)

// createTable returns a CREATE TABLE for a new table with a random shape.
func createTable(r *rand.Rand, f Features, schema, name string, next *int) string {
	shape := r.Intn(numShapes)
	keyless := shape == shapeNoKey || shape == shapeNullableUnique
	newName := func(typ string) string { *next++; return fmt.Sprintf("c%d%s", *next, colSuffix(typ)) }
	var defs, pk []string
	var uniq []string
	addKeyCol := func(typ string, nullable bool) string {
		n := newName(typ)
		null := " NOT NULL"
		if nullable {
			null = " NULL"
		}
		defs = append(defs, "`"+n+"` "+typ+null)
		return n
	}
	switch shape {
	case shapeIntPK:
		pk = append(pk, addKeyCol(pick(r, []string{"INT", "BIGINT UNSIGNED", "TINYINT", "SMALLINT UNSIGNED"}), false))
	case shapeUnique:
		uniq = append(uniq, addKeyCol(colType(r, f, true, false), false))
		if r.Intn(2) == 0 {
			uniq = append(uniq, addKeyCol(colType(r, f, true, false), false))
		}
	case shapeNullableUnique:
		uniq = append(uniq, addKeyCol(colType(r, f, true, true), true))
	case shapeCompositeText:
		coll := collation
		if f.NoBinKeys {
			coll = ciCollation
		}
		pk = append(pk, addKeyCol(fmt.Sprintf("VARCHAR(%d) CHARACTER SET %s", 2+r.Intn(20), coll(r, f)), false))
		pk = append(pk, addKeyCol(fmt.Sprintf("CHAR(%d) CHARACTER SET %s", 1+r.Intn(4), coll(r, f)), false))
		if r.Intn(2) == 0 {
			pk = append(pk, addKeyCol("TINYINT UNSIGNED", false))
		}
	case shapeMixedPK:
		pk = append(pk, addKeyCol(colType(r, f, true, false), false))
		pk = append(pk, addKeyCol(colType(r, f, true, false), false))
		uniq = append(uniq, addKeyCol(colType(r, f, true, false), r.Intn(2) == 0))
	}
	var intCol, textCol string
	for i, n := 0, 2+r.Intn(6); i < n; i++ {
		typ := colType(r, f, false, keyless)
		name := newName(typ)
		null := ""
		if r.Intn(4) == 0 {
			null = " NOT NULL"
			if strings.HasPrefix(typ, "TIMESTAMP") {
				null = ""
			}
		}
		defs = append(defs, "`"+name+"` "+typ+null)
		if strings.HasPrefix(typ, "INT") || strings.HasPrefix(typ, "BIGINT") {
			intCol = name
		}
		if strings.HasPrefix(typ, "VARCHAR") && !strings.Contains(typ, "binary") {
			textCol = name
		}
	}
	if f.plain() {
		intCol, textCol = "", "" // the tracker's restore adds _utf8mb4 introducers to generation expressions
	}
	if intCol != "" && r.Intn(2) == 0 {
		typ := "BIGINT" // overflows for values near the limits, which INSERT IGNORE stores on the source
		if f.NoLossyGenCol {
			typ = "DECIMAL(22,0)"
		}
		defs = append(defs, fmt.Sprintf("`%s` %s AS (`%s` * 2 + 1) %s", newName(""), typ, intCol, pick(r, []string{"VIRTUAL", "STORED"})))
	}
	if textCol != "" && r.Intn(2) == 0 {
		cs := ""
		if f.NoLossyGenCol {
			cs = " CHARACTER SET utf8mb4"
		}
		defs = append(defs, fmt.Sprintf("`%s` VARCHAR(200)%s AS (CONCAT(`%s`, '|')) %s", newName(""), cs, textCol, pick(r, []string{"VIRTUAL", "STORED"})))
	}
	if r.Intn(3) == 0 && !f.plain() {
		defs = append(defs, fmt.Sprintf("`%s` INT INVISIBLE NULL DEFAULT 7", newName("")))
	}
	if len(pk) > 0 {
		defs = append(defs, "PRIMARY KEY ("+quoteList(pk)+")")
	}
	if len(uniq) > 0 {
		defs = append(defs, "UNIQUE KEY uk ("+quoteList(uniq)+")")
	}
	cs := pick(r, []string{"utf8mb4", "latin1"})
	return fmt.Sprintf("CREATE TABLE `%s`.`%s` (\n  %s\n) ENGINE=InnoDB DEFAULT CHARSET=%s", schema, name, strings.Join(defs, ",\n  "), cs)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	return strings.Join(q, ", ")
}
