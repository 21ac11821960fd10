package schema

import (
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/charset"
)

// The TiDB parser refuses a character set or collation it does not know
// ("Unknown collation: 'utf8mb4_nopad_bin'"), and it knows few of
// MariaDB's: no NO PAD collation, no uca1400 one, none of cp1251 and the
// other single-byte sets. A DDL naming one stopped replication ("cannot
// parse", difftest bug C). So every character set and collation of
// MariaDB 10.11 is registered with the parser, under its own name: the
// statement sent to the target keeps it, and the tracker keeps the
// column's character set, which is all it needs (the applier reads
// collations from the target itself).
func init() { registerMariaDBCollations() }

// firstCollationID numbers the collations added: parsing only needs names,
// and ids far from the parser's own cannot replace one of them.
const firstCollationID = 1 << 20

func registerMariaDBCollations() {
	id := firstCollationID
	add := func(cs, name string, isDefault bool) {
		if _, err := charset.GetCollationByName(name); err == nil {
			return
		}
		id++
		charset.AddCollation(&charset.Collation{ID: id, CharsetName: cs, Name: name, IsDefault: isDefault, Sortlen: 1})
	}
	for _, line := range mariadbCollations {
		head, list, _ := strings.Cut(line, ": ")
		f := strings.Fields(head)
		if len(f) != 3 {
			continue
		}
		name, def := f[0], f[2]
		maxlen, _ := strconv.Atoi(f[1])
		cs := name
		if name == charset.CharsetUTF8MB3 {
			cs = charset.CharsetUTF8 // the parser's name for it
		}
		if _, err := charset.GetCharsetInfo(cs); err != nil {
			charset.AddCharset(&charset.Charset{Name: cs, DefaultCollation: def, Collations: map[string]*charset.Collation{}, Desc: cs, Maxlen: maxlen})
		}
		for _, c := range strings.Fields(list) {
			add(cs, c, c == def)
			// MariaDB 10.10+ also takes the uca1400 collations without
			// the character set's prefix; utf8mb4 is by far their most
			// common set.
			if cs == charset.CharsetUTF8MB4 && strings.HasPrefix(c, "utf8mb4_uca1400_") {
				add(cs, strings.TrimPrefix(c, "utf8mb4_"), false)
			}
		}
	}
}
