package e2e_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestNonUTF8TextReplicates replicates non-ASCII text in character sets
// other than utf8mb4, in NO PAD and language collations too, as key and
// keyless values. Each value must arrive as the same bytes (HEX() and
// CHECKSUM TABLE on both sides), never re-read as utf8mb4.
func TestNonUTF8TextReplicates(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	// Each collation gets values its character set can store (the source
	// is strict), with non-ASCII letters, case and accent variants,
	// trailing spaces and the empty string.
	latin := []string{"äöü", "ÄÖÜ", "éÉe", "ÿß", "a ", "", "x"}
	colls := []struct {
		name string
		vals []string
	}{
		{"latin1_swedish_nopad_ci", latin}, {"latin1_nopad_bin", latin}, {"latin1_german2_ci", latin},
		{"latin2_general_ci", []string{"ąę", "ĄĘ", "č", "a ", "", "x"}},
		{"cp1251_general_ci", []string{"Жж", "ЖЖ", "дом", "a ", "", "x"}}, {"cp1251_nopad_bin", []string{"Жж", "ЖЖ", "дом", "a ", ""}},
		{"greek_general_ci", []string{"Ωω", "ΩΩ", "α", "a ", ""}}, {"koi8r_general_ci", []string{"Жж", "дом", "a ", ""}},
		{"gbk_chinese_ci", []string{"中文", "汉字", "a ", ""}}, {"ucs2_general_ci", []string{"中文", "Жж", "äöü", "a ", ""}},
		{"utf16_general_ci", []string{"中文", "😀", "Жж", "a ", ""}}, {"utf8mb4_uca1400_ai_ci", []string{"😀", "éÉe", "a ", ""}},
		{"utf8mb3_general_nopad_ci", []string{"中文", "éÉe", "a ", ""}},
	}
	var cols, keyless []string
	for i, c := range colls {
		cs, _, _ := strings.Cut(c.name, "_")
		cols = append(cols, "c"+itoa(i)+" VARCHAR(20) CHARACTER SET "+cs+" COLLATE "+c.name)
		keyless = append(keyless, "c"+itoa(i)+" CHAR(10) CHARACTER SET "+cs+" COLLATE "+c.name)
	}
	// The tables exist on both sides before the task starts: this test is
	// about values; DDL with these collations is the schema tracker's.
	ddl := []string{"CREATE DATABASE cs",
		"CREATE TABLE cs.k (id INT PRIMARY KEY, " + strings.Join(cols, ", ") + ")",
		"CREATE TABLE cs.nk (n INT, " + strings.Join(keyless, ", ") + ")",
		"CREATE TABLE cs.sk (a VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci NOT NULL PRIMARY KEY, v INT)"}
	sandboxtest.MustExec(t, src, ddl...)
	sandboxtest.MustExec(t, sandboxtest.MustOpen(t, dstInst, ""), ddl...)
	run := startTask(t, "charsets", masterStatus(t, src), "cs")
	for i := 0; i < 12; i++ {
		var set, nset []string
		for j, c := range colls {
			v := c.vals[(i+j)%len(c.vals)]
			set = append(set, "c"+itoa(j)+" = '"+v+"'")
			nset = append(nset, "'"+v+"'")
		}
		sandboxtest.MustExec(t, src,
			"INSERT INTO cs.k SET id = "+itoa(i)+", "+strings.Join(set, ", "),
			"INSERT INTO cs.nk VALUES ("+itoa(i%3)+", "+strings.Join(nset, ", ")+")",
			"INSERT IGNORE INTO cs.sk VALUES ('"+latin[i%len(latin)]+"', "+itoa(i)+")")
	}
	sandboxtest.MustExec(t, src,
		"UPDATE cs.k SET c0 = 'Öl', c4 = 'Дом' WHERE id < 4",
		"UPDATE cs.nk SET n = n + 10 WHERE n = 1",
		"DELETE FROM cs.nk WHERE n = 2",
		"UPDATE cs.sk SET v = v + 100",
		"DELETE FROM cs.sk WHERE a = 'ÿß'")
	run.waitApplied(t, masterStatus(t, src))
	sameTables(t, "cs", "k", "nk", "sk")
}

func itoa(i int) string { return strconv.Itoa(i) }
