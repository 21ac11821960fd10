package kafka

import (
	"strconv"
	"time"

	"github.com/sluice-db/sluice"
)

// canalValue is one row change in Canal's flat JSON (canal-json, as
// canal's Kafka output and TiCDC's canal-json protocol write it): the row
// under "data", the changed columns' old values under "old" for an
// update, every value as text.
func (e *encoder) canalValue(dst []byte, ch *sluice.RowChange, m *txnMeta, now time.Time) []byte {
	tb := ch.Table
	p := e.plan(tb)
	typ := "INSERT"
	row := ch.After
	switch ch.Kind {
	case sluice.Update:
		typ = "UPDATE"
	case sluice.Delete:
		typ, row = "DELETE", ch.Before
	}
	dst = append(dst, `{"id":0,"database":`...)
	dst = appendJSONString(dst, tb.Ref.Schema)
	dst = append(dst, `,"table":`...)
	dst = appendJSONString(dst, tb.Ref.Name)
	dst = append(dst, `,"pkNames":`...)
	if len(tb.PK) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, k := range tb.PK {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, p.cols[k].name...)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"isDdl":false,"type":"`+typ+`","es":`...)
	dst = strconv.AppendInt(dst, int64(m.ts)*1000, 10)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, now.UnixMilli(), 10)
	dst = append(dst, `,"sql":"","mysqlType":{`...)
	for i, c := range tb.Columns {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, p.cols[i].name...)
		dst = append(dst, ':')
		t := c.FullType
		if t == "" {
			t = c.DataType
		}
		dst = appendJSONString(dst, t)
	}
	dst = append(dst, `},"data":[`...)
	dst = e.canalRow(dst, p, row, nil)
	dst = append(dst, `],"old":`...)
	if ch.Kind == sluice.Update {
		dst = append(dst, '[')
		dst = e.canalRow(dst, p, ch.Before, ch.After)
		dst = append(dst, ']')
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

// canalRow writes row's values as strings; with newer set, only the
// columns whose value differs from it (canal's "old").
func (e *encoder) canalRow(dst []byte, p *tablePlan, row, newer []any) []byte {
	dst = append(dst, '{')
	first := true
	for i := range p.cols {
		var v any
		if i < len(row) {
			v = row[i]
		}
		if newer != nil && i < len(newer) && canalText(e, &p.cols[i], v) == canalText(e, &p.cols[i], newer[i]) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, p.cols[i].name...)
		dst = append(dst, ':')
		if v == nil {
			dst = append(dst, "null"...)
			continue
		}
		dst = appendJSONString(dst, canalText(e, &p.cols[i], v))
	}
	return append(dst, '}')
}

// canalText is a value as canal writes it: the MySQL text form.
func canalText(e *encoder, c *colPlan, v any) string {
	if v == nil {
		return "\x00null"
	}
	switch c.kind {
	case kEnum, kSet:
		b := e.appendValue(nil, c, v)
		if s, err := strconv.Unquote(string(b)); err == nil {
			return s
		}
	case kBytes, kGeometry:
		return string(toBytes(v))
	}
	return toString(v)
}
