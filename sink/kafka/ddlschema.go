package kafka

import (
	"time"

	"github.com/sluice-db/sluice"
)

// With Config.Schema, the schema change topic is written as Debezium
// writes it through JsonConverter with schemas.enable: key and value each
// {"schema":..., "payload":...}. It was plain JSON, and a Connect consumer
// that expects the schema failed on it (issue 30 F8). The schemas are
// Debezium 2.7's (SchemaFactory.schemaHistoryConnector*Schema and
// schemaHistory{Change,Table,Column}Schema), field for field.

const ddlKeySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"databaseName"}],` +
	`"optional":false,"name":"io.debezium.connector.mysql.SchemaChangeKey","version":1}`

const ddlColumnSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"name"},` +
	`{"type":"int32","optional":false,"field":"jdbcType"},{"type":"int32","optional":true,"field":"nativeType"},` +
	`{"type":"string","optional":false,"field":"typeName"},{"type":"string","optional":true,"field":"typeExpression"},` +
	`{"type":"string","optional":true,"field":"charsetName"},{"type":"int32","optional":true,"field":"length"},` +
	`{"type":"int32","optional":true,"field":"scale"},{"type":"int32","optional":false,"field":"position"},` +
	`{"type":"boolean","optional":true,"field":"optional"},{"type":"boolean","optional":true,"field":"autoIncremented"},` +
	`{"type":"boolean","optional":true,"field":"generated"},{"type":"string","optional":true,"field":"comment"},` +
	`{"type":"string","optional":true,"field":"defaultValueExpression"},` +
	`{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"enumValues"}],` +
	`"optional":false,"name":"io.debezium.connector.schema.Column","version":1}`

const ddlTableSchema = `{"type":"struct","fields":[{"type":"string","optional":true,"field":"defaultCharsetName"},` +
	`{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"primaryKeyColumnNames"},` +
	`{"type":"array","items":` + ddlColumnSchema + `,"optional":false,"field":"columns"},` +
	`{"type":"string","optional":true,"field":"comment"}],` +
	`"optional":true,"name":"io.debezium.connector.schema.Table","version":1,"field":"table"}`

const ddlValueSchema = `{"type":"struct","fields":[` + sourceSchema + `,{"type":"int64","optional":false,"field":"ts_ms"},` +
	`{"type":"string","optional":true,"field":"databaseName"},{"type":"string","optional":true,"field":"schemaName"},` +
	`{"type":"string","optional":true,"field":"ddl"},` +
	`{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"type"},` +
	`{"type":"string","optional":false,"field":"id"},` + ddlTableSchema + `],` +
	`"optional":false,"name":"io.debezium.connector.schema.Change","version":1},"optional":false,"field":"tableChanges"}],` +
	`"optional":false,"name":"io.debezium.connector.mysql.SchemaChangeValue","version":1}`

// withSchema wraps a payload with its schema.
func withSchema(schema string, payload []byte) []byte {
	out := make([]byte, 0, len(schema)+len(payload)+24)
	out = append(out, `{"schema":`...)
	out = append(out, schema...)
	out = append(out, `,"payload":`...)
	out = append(out, payload...)
	return append(out, '}')
}

// ddlRecord is a schema change event's key and value.
func (e *encoder) ddlRecord(it *sluice.StreamItem, m *txnMeta, db string, now time.Time) (key, value []byte) {
	key = appendJSONString([]byte(`{"databaseName":`), db)
	key = append(key, '}')
	value = e.ddlValue(nil, it, m, db, now)
	if e.cfg.Schema {
		key, value = withSchema(ddlKeySchema, key), withSchema(ddlValueSchema, value)
	}
	return key, value
}
