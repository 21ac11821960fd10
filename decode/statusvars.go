package decode

// queryMicros returns the microseconds of a Query event's start time from
// its status variables (MariaDB's Q_HRNOW, MySQL's Q_MICROSECONDS), and
// whether it found them. A replica runs the statement at the source's
// time: a DDL that fills values from the clock (ALTER ... ADD PRIMARY KEY
// over a NULL TIMESTAMP column, ADD COLUMN ... DEFAULT CURRENT_TIMESTAMP)
// must store the source's values, not the apply time (difftest seed 2111).
func queryMicros(vars []byte) (us uint32, ok bool) {
	walkStatusVars(vars, func(code byte, v []byte) {
		if code == 13 || code == 0x80 {
			us, ok = uint32(v[0])|uint32(v[1])<<8|uint32(v[2])<<16, true
		}
	})
	return us, ok
}

// walkStatusVars calls f with each status variable of a Query event: its
// code and its value (with any length prefix). The variables are written
// in growing order of their codes; as the server does, parsing stops at a
// code it does not know (MariaDB's Q_HRNOW and MySQL's Q_MICROSECONDS are
// read, then the walk stops: nothing this reads comes after them).
func walkStatusVars(vars []byte, f func(code byte, v []byte)) {
	for i := 0; i < len(vars); {
		code := vars[i]
		i++
		n := -1 // bytes of the value; -1: unknown code
		switch code {
		case 0: // Q_FLAGS2_CODE
			n = 4
		case 1: // Q_SQL_MODE_CODE
			n = 8
		case 2: // Q_CATALOG_CODE: length, text, NUL
			if i < len(vars) {
				n = 1 + int(vars[i]) + 1
			}
		case 3: // Q_AUTO_INCREMENT
			n = 4
		case 4: // Q_CHARSET_CODE
			n = 6
		case 5, 6: // Q_TIME_ZONE_CODE, Q_CATALOG_NZ_CODE: length, text
			if i < len(vars) {
				n = 1 + int(vars[i])
			}
		case 7, 8: // Q_LC_TIME_NAMES_CODE, Q_CHARSET_DATABASE_CODE
			n = 2
		case 9: // Q_TABLE_MAP_FOR_UPDATE_CODE
			n = 8
		case 10: // Q_MASTER_DATA_WRITTEN_CODE
			n = 4
		case 11: // Q_INVOKER: user length, user, host length, host
			if i < len(vars) {
				u := int(vars[i])
				if i+1+u < len(vars) {
					n = 1 + u + 1 + int(vars[i+1+u])
				}
			}
		case 12: // Q_UPDATED_DB_NAMES: count, then count NUL-ended names
			if i < len(vars) {
				cnt := int(vars[i])
				j := i + 1
				if cnt != 254 { // OVER_MAX_DBS_IN_EVENT_MTS: no names
					for ; cnt > 0 && j < len(vars); cnt-- {
						for j < len(vars) && vars[j] != 0 {
							j++
						}
						j++
					}
				}
				n = j - i
			}
		case 13, 0x80: // Q_MICROSECONDS (MySQL), Q_HRNOW (MariaDB): 3 bytes
			if i+3 <= len(vars) {
				f(code, vars[i:i+3])
			}
			return
		case 0x81: // Q_XID (MariaDB)
			n = 8
		}
		if n < 0 || i+n > len(vars) {
			return
		}
		f(code, vars[i:i+n])
		i += n
	}
}
