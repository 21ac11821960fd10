package difftest

import (
	"strings"
	"testing"
)

// scripts are failures the tester found, reduced to their statements.
var scripts = []struct {
	sc   Script
	note string
}{
	{Script{Name: "latin1keyless",
		Before: []string{"CREATE TABLE {s}.t (a INT NULL, c CHAR(7) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci NOT NULL, UNIQUE KEY (a))",
			"INSERT INTO {s}.t VALUES (1, 'ä'), (NULL, 'é')"},
		After: []string{"INSERT INTO {s}.t VALUES (2, 'ö'), (NULL, 'ÿ')", "UPDATE {s}.t SET a = 3 WHERE c = 'é'", "DELETE FROM {s}.t WHERE c = 'ÿ'"},
	}, "seed 2: latin1 text in a keyless row match"},
	{Script{Name: "latin1nopad",
		Before: []string{"CREATE TABLE {s}.t (id INT PRIMARY KEY, a CHAR(4) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci, b VARCHAR(4) CHARACTER SET latin1 COLLATE latin1_nopad_bin)",
			"INSERT INTO {s}.t VALUES (3, 'ä', 'é')"},
		After:  []string{"INSERT INTO {s}.t VALUES (1, 'ä', 'é'), (2, 'ÿ', 'ß')", "UPDATE {s}.t SET a = 'Ö' WHERE id = 2"},
	}, "latin1 NO PAD collations are not in decode's latin1 list: values arrive as raw latin1 bytes in a utf8mb4 literal"},
	{Script{Name: "binkey",
		Before: []string{"CREATE TABLE {s}.t (a BINARY(2) NOT NULL, b VARBINARY(4) NOT NULL, v INT, PRIMARY KEY (a, b))"},
		After: []string{"INSERT INTO {s}.t VALUES (X'00', X'00', 1), (X'0000', X'0000', 2), (X'', X'', 3)",
			"UPDATE {s}.t SET v = 9 WHERE a = X'00'", "DELETE FROM {s}.t WHERE b = X'00'"},
	}, "seed 1: binary key with 0x00 bytes"},
}

func TestScripts(t *testing.T) {
	for _, s := range scripts {
		t.Run(s.sc.Name, func(t *testing.T) {
			res := runScript(t, s.sc)
			if !res.Pass {
				t.Errorf("%s (%s):\n%s", s.sc.Name, s.note, strings.Join(res.Problems, "\n"))
			}
		})
	}
}
