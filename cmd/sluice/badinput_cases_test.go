package main

import "strings"

// The bad inputs of TestBadInputTable (docs/manual/badinput.md is generated
// from them). A task file here uses {PORT}, where nothing listens, unless
// the case needs a server: a command that gets past its checks fails on
// the connection instead of doing anything.

// badTask is a valid task file; cases change one thing in it.
const badTask = `name: bt
source: {host: 127.0.0.1, port: {PORT}, user: u, password: pw-s3cret-x}
target: {host: 127.0.0.1, port: {PORT}, user: u, password: pw-s3cret-x}
tables: {include: ["a.*"]}
`

// srvTask is a valid task file against the shared sandbox: bsrc is copied
// to bdst on the same server.
const srvTask = `name: bs
source: {host: 127.0.0.1, port: {SRC_PORT}, user: root, password: ""}
target: {host: 127.0.0.1, port: {SRC_PORT}, user: root, password: ""}
tables: {include: ["bsrc.*"]}
routes: [{schema: bsrc, target-schema: bdst}]
`

// edit returns task with old replaced by new (old must be in it).
func edit(task, old, new string) string {
	if !strings.Contains(task, old) {
		panic("badinput case: " + old + " is not in the task")
	}
	return strings.Replace(task, old, new, 1)
}

func srcLine(s string) string {
	return edit(badTask, "source: {host: 127.0.0.1, port: {PORT}, user: u, password: pw-s3cret-x}", s)
}
func tgtLine(s string) string {
	return edit(badTask, "target: {host: 127.0.0.1, port: {PORT}, user: u, password: pw-s3cret-x}", s)
}

// full is migrate --mode full with the task file.
var full = []string{"migrate", "--config", "{CFG}", "--mode", "full"}

func withServe(s string) string {
	return "name: bt\nsource: {host: 127.0.0.1, port: {PORT}, user: u, password: pw-s3cret-x}\n" + s
}

func withSink(s string) string {
	return "name: bt\nsource: {host: 127.0.0.1, port: {PORT}, user: u, password: pw-s3cret-x}\ntables: {include: [\"a.*\"]}\n" + s
}

func withSources(s string) string { return "name: bt\n" + s }

const twoSources = `sources:
  - {name: s1, host: 127.0.0.1, port: {PORT}, user: u, password: pw-s3cret-x, domain-id: 1}
  - {name: s2, host: 127.0.0.1, port: {PORT}, user: u, password: pw-s3cret-x, domain-id: 2}
serve: {listen: "127.0.0.1:0", server-id: 9, users: [{user: r, password: pw-s3cret-x}]}
`

func dtxServe(flags ...string) []string {
	return append([]string{"dtx", "serve", "--store", "mem://", "--listen", "127.0.0.1:0"}, flags...)
}

func badInputCases() []badCase {
	cs := []badCase{
		// The task file's endpoints.
		{name: "source.host empty", args: full, task: srcLine(`source: {host: "", port: 3306, user: u}`), exit: 2, want: "source.host is empty"},
		{name: "source.port 0", args: full, task: srcLine(`source: {host: h, port: 0, user: u}`), exit: 2, want: "source.port is 0"},
		{name: "source.port too big", args: full, task: srcLine(`source: {host: h, port: 70000, user: u}`), exit: 2, want: "source.port is 70000"},
		{name: "source.port negative", args: full, task: srcLine(`source: {host: h, port: -1, user: u}`), exit: 2, want: "source.port is -1"},
		{name: "source.port not a number", args: full, task: srcLine(`source: {host: h, port: abc, user: u}`), exit: 2, want: "abc"},
		{name: "source.user empty", args: full, task: srcLine(`source: {host: h, port: 3306, user: ""}`), exit: 2, want: "source.user is empty"},
		{name: "target.host empty", args: full, task: tgtLine(`target: {host: "", port: 3306, user: u}`), exit: 2, want: "target.host is empty"},
		{name: "target.port too big", args: full, task: tgtLine(`target: {host: h, port: 99999, user: u}`), exit: 2, want: "target.port is 99999"},
		{name: "target.user empty", args: full, task: tgtLine(`target: {host: h, port: 3306, user: ""}`), exit: 2, want: "target.user is empty"},
		{name: "source unknown key", args: full, task: srcLine(`source: {hots: h, port: 3306, user: u}`), exit: 2, want: "hots"},
		{name: "source password unset variable", args: full, task: srcLine(`source: {host: h, port: 3306, user: u, password: "${SLUICE_BADIN_UNSET}"}`), exit: 2, want: "${SLUICE_BADIN_UNSET} is not set"},
		{name: "target password unset variable", args: full, task: tgtLine(`target: {host: h, port: 3306, user: u, password: "${SLUICE_BADIN_UNSET}"}`), exit: 2, want: "${SLUICE_BADIN_UNSET} is not set"},
		{name: "source tls mode unknown", args: full, task: srcLine(`source: {host: h, port: 3306, user: u, tls: {mode: sometimes}}`), exit: 2, want: "sometimes"},
		{name: "target tls mode unknown", args: full, task: tgtLine(`target: {host: h, port: 3306, user: u, tls: {mode: on}}`), exit: 2, want: "tls"},
		{name: "tls ca file missing", args: full, task: srcLine(`source: {host: h, port: 3306, user: u, tls: {mode: verify-ca, ca: /nonexistent/ca.pem}}`), exit: 2, want: "ca.pem"},
		{name: "tls ca file not PEM", args: full, task: srcLine(`source: {host: h, port: 3306, user: u, tls: {mode: verify-ca, ca: {CFG}}}`), exit: 2, want: "tls"},
		{name: "tls cert without key", args: full, task: srcLine(`source: {host: h, port: 3306, user: u, tls: {mode: required, cert: {CFG}}}`), exit: 2, want: "key"},
		{name: "tls verify-ca without ca", args: full, task: srcLine(`source: {host: h, port: 3306, user: u, tls: {mode: verify-ca}}`), exit: 2, want: "ca"},
		{name: "tls unknown key", args: full, task: srcLine(`source: {host: h, port: 3306, user: u, tls: {mod: required}}`), exit: 2, want: "mod"},

		// name, tables, routes, sizes.
		{name: "name missing", args: full, task: edit(badTask, "name: bt\n", ""), exit: 2, want: "name: is missing"},
		{name: "name empty", args: full, task: edit(badTask, "name: bt", `name: ""`), exit: 2, want: "name must be a non-empty word"},
		{name: "name with a slash", args: full, task: edit(badTask, "name: bt", "name: a/b"), exit: 2, want: "name must be a non-empty word"},
		{name: "name with a space", args: full, task: edit(badTask, "name: bt", `name: "a b"`), exit: 2, want: "name must be a non-empty word"},
		{name: "tables.include empty", args: full, task: edit(badTask, `include: ["a.*"]`, "include: []"), exit: 2, want: "tables.include is empty"},
		{name: "tables missing", args: full, task: edit(badTask, "tables: {include: [\"a.*\"]}\n", ""), exit: 2, want: "tables.include is empty"},
		{name: "tables pattern without a dot", args: full, task: edit(badTask, `"a.*"`, `"nodot"`), exit: 2, want: `"nodot"`},
		{name: "tables exclude pattern bad", args: full, task: edit(badTask, `include: ["a.*"]`, `include: ["a.*"], exclude: ["x"]`), exit: 2, want: `"x"`},
		{name: "tables unknown key", args: full, task: edit(badTask, `include: ["a.*"]`, `includes: ["a.*"]`), exit: 2, want: "includes"},
		{name: "routes without target-schema", args: full, task: badTask + "routes: [{schema: a}]\n", exit: 2, want: "routes[0] needs schema and target-schema"},
		{name: "routes without schema", args: full, task: badTask + "routes: [{target-schema: b}]\n", exit: 2, want: "routes[0] needs schema and target-schema"},
		{name: "routes not a list", args: full, task: badTask + "routes: {schema: a, target-schema: b}\n", exit: 2, want: "line 5"},
		{name: "threads 0", args: full, task: badTask + "threads: 0\n", exit: 2, want: "threads is 0"},
		{name: "threads 300", args: full, task: badTask + "threads: 300\n", exit: 2, want: "threads is 300"},
		{name: "threads not a number", args: full, task: badTask + "threads: many\n", exit: 2, want: "many"},
		{name: "pool-size 0", args: full, task: badTask + "pool-size: 0\n", exit: 2, want: "pool-size is 0"},
		{name: "pool-size 1000", args: full, task: badTask + "pool-size: 1000\n", exit: 2, want: "pool-size is 1000"},
		{name: "rows-per-chunk 0", args: full, task: badTask + "rows-per-chunk: 0\n", exit: 2, want: "rows-per-chunk must be positive"},
		{name: "rows-per-statement negative", args: full, task: badTask + "rows-per-statement: -1\n", exit: 2, want: "rows-per-statement must be 0"},

		// incremental:
		{name: "incremental.worker-count 0", args: full, task: badTask + "incremental: {worker-count: 0}\n", exit: 2, want: "incremental.worker-count is 0"},
		{name: "incremental.worker-count huge", args: full, task: badTask + "incremental: {worker-count: 100000}\n", exit: 2, want: "incremental.worker-count is 100000"},
		{name: "incremental.batch 0", args: full, task: badTask + "incremental: {batch: 0}\n", exit: 2, want: "incremental.batch must be positive"},
		{name: "incremental.flavor unknown", args: full, task: badTask + "incremental: {flavor: postgres}\n", exit: 2, want: "incremental.flavor must be mariadb or mysql"},
		{name: "incremental.commit-order unknown", args: full, task: badTask + "incremental: {commit-order: random}\n", exit: 2, want: "incremental.commit-order must be source or relaxed"},
		{name: "incremental.on-missing-row unknown", args: full, task: badTask + "incremental: {on-missing-row: ignore}\n", exit: 2, want: "incremental.on-missing-row must be stop or skip"},
		{name: "incremental.online-ddl unknown", args: full, task: badTask + "incremental: {online-ddl: lhm}\n", exit: 2, want: "incremental.online-ddl must be"},
		{name: "incremental unknown key", args: full, task: badTask + "incremental: {workers: 4}\n", exit: 2, want: "workers"},

		// The file itself.
		{name: "unknown top-level key", args: full, task: badTask + "tablez: {}\n", exit: 2, want: "tablez"},
		{name: "YAML unclosed bracket", args: full, task: "name: bt\ntables: {include: [\"a.*\"\n", exit: 2, want: "parse task file"},
		{name: "YAML tab indentation", args: full, task: "name: bt\nsource:\n\thost: h\n", exit: 2, want: "parse task file"},
		{name: "YAML top level is a list", args: full, task: "- name: bt\n", exit: 2, want: "parse task file"},
		{name: "task file empty", args: full, task: "\n", exit: 2, want: "name: is missing"},
		{name: "task file missing", args: []string{"migrate", "--config", "{DIR}/none.yaml", "--mode", "full"}, exit: 2, want: "read task file"},
		{name: "task file is a directory", args: []string{"migrate", "--config", "{DIR}", "--mode", "full"}, exit: 2, want: "read task file"},
		{name: "task key duplicated", args: full, task: badTask + "threads: 2\nthreads: 3\n", exit: 2, want: "threads"},

		// Sections each command needs.
		{name: "migrate without target", args: full, task: "name: bt\nsource: {host: h, port: 1, user: u}\ntables: {include: [\"a.*\"]}\n", exit: 2, want: "target: is missing"},
		{name: "migrate without source", args: full, task: "name: bt\ntarget: {host: h, port: 1, user: u}\ntables: {include: [\"a.*\"]}\n", exit: 2, want: "source: is missing"},
		{name: "dump without source", args: []string{"dump", "--config", "{CFG}", "--dir", "{DIR}/d"}, task: "name: bt\ntarget: {host: h, port: 1, user: u}\ntables: {include: [\"a.*\"]}\n", exit: 2, want: "source: is missing"},
		{name: "load without target", args: []string{"load", "--config", "{CFG}", "--dir", "{DIR}"}, task: "name: bt\nsource: {host: h, port: 1, user: u}\ntables: {include: [\"a.*\"]}\n", exit: 2, want: "target: is missing"},
		{name: "check without target", args: []string{"check", "--config", "{CFG}", "--mode", "full"}, task: "name: bt\nsource: {host: h, port: 1, user: u}\ntables: {include: [\"a.*\"]}\n", exit: 2, want: "target: is missing"},
		{name: "verify without source", args: []string{"verify", "--config", "{CFG}"}, task: "name: bt\ntarget: {host: h, port: 1, user: u}\ntables: {include: [\"a.*\"]}\n", exit: 2, want: "source: is missing"},
		{name: "serve without serve section", args: []string{"serve", "--config", "{CFG}"}, task: badTask, exit: 2, want: "serve"},
		{name: "migrate with only sink section empty", args: full, task: withSink("sink: {}\n"), exit: 2, want: "sink names no sink"},

		// sink.kafka
		{name: "sink and target both", args: full, task: badTask + "sink: {kafka: {brokers: [\"127.0.0.1:9\"], topic-prefix: p}}\n", exit: 2, want: "both target: and sink: are set"},
		{name: "sink.kafka.brokers empty", args: full, task: withSink("sink: {kafka: {brokers: [], topic-prefix: p}}\n"), exit: 2, want: "sink.kafka.brokers is empty"},
		{name: "sink.kafka.topic-prefix empty", args: full, task: withSink("sink: {kafka: {brokers: [\"127.0.0.1:9\"]}}\n"), exit: 2, want: "sink.kafka.topic-prefix is empty"},
		{name: "sink.kafka.sasl.mechanism unknown", args: full, task: withSink("sink: {kafka: {brokers: [\"127.0.0.1:9\"], topic-prefix: p, sasl: {mechanism: GSSAPI, user: u}}}\n"), exit: 2, want: "sink.kafka.sasl.mechanism must be"},
		{name: "sink.kafka.sasl.user empty", args: full, task: withSink("sink: {kafka: {brokers: [\"127.0.0.1:9\"], topic-prefix: p, sasl: {mechanism: PLAIN}}}\n"), exit: 2, want: "sink.kafka.sasl.user is empty"},
		{name: "sink.kafka.sasl.password unset variable", args: full, task: withSink("sink: {kafka: {brokers: [\"127.0.0.1:9\"], topic-prefix: p, sasl: {mechanism: PLAIN, user: u, password: \"${SLUICE_BADIN_UNSET}\"}}}\n"), exit: 2, want: "${SLUICE_BADIN_UNSET} is not set"},
		{name: "sink.kafka.tls.mode preferred", args: full, task: withSink("sink: {kafka: {brokers: [\"127.0.0.1:9\"], topic-prefix: p, tls: {mode: preferred}}}\n"), exit: 2, want: "sink.kafka.tls.mode must be"},
		{name: "sink.kafka.format unknown", args: full, task: withSink("sink: {kafka: {brokers: [\"127.0.0.1:9\"], topic-prefix: p, format: avro}}\n"), exit: 2, want: "sink.kafka.format must be"},
		{name: "sink.kafka unknown key", args: full, task: withSink("sink: {kafka: {broker: [\"127.0.0.1:9\"], topic-prefix: p}}\n"), exit: 2, want: "broker"},
		{name: "sink unknown kind", args: full, task: withSink("sink: {pulsar: {}}\n"), exit: 2, want: "pulsar"},

		// serve:
		{name: "serve.listen empty", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {listen: \"\", server-id: 9, users: [{user: r, password: p}]}\n"), exit: 2, want: "serve.listen is empty"},
		{name: "serve.server-id missing", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {users: [{user: r, password: p}]}\n"), exit: 2, want: "serve.server-id is missing"},
		{name: "serve.users empty", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9}\n"), exit: 2, want: "serve.users is empty"},
		{name: "serve.users without password", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r}]}\n"), exit: 2, want: "serve.users[0] needs a user and a password"},
		{name: "serve.users password unset variable", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: \"${SLUICE_BADIN_UNSET}\"}]}\n"), exit: 2, want: "${SLUICE_BADIN_UNSET} is not set"},
		{name: "serve.tls-cert without key", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], tls-cert: c.pem}\n"), exit: 2, want: "go together"},
		{name: "serve.require-tls without cert", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], require-tls: true}\n"), exit: 2, want: "serve.require-tls needs"},
		{name: "serve.purge-interval bad", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], purge-interval: often}\n"), exit: 2, want: "serve.purge-interval must be"},
		{name: "serve.purge-interval zero", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], purge-interval: 0s}\n"), exit: 2, want: "serve.purge-interval must be"},
		{name: "serve.retain.age bad", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], retain: {age: 7d}}\n"), exit: 2, want: "serve.retain.age must be"},
		{name: "serve.retain.age negative", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], retain: {age: -1h}}\n"), exit: 2, want: "serve.retain.age must be"},
		{name: "serve.retain.size bad", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], retain: {size: lots}}\n"), exit: 2, want: "serve.retain.size"},
		{name: "serve.max-binlog-size too small", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], max-binlog-size: 10}\n"), exit: 2, want: "serve.max-binlog-size"},
		{name: "serve.merge-memory negative", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], merge-memory: -1}\n"), exit: 2, want: "serve.merge-memory"},
		{name: "serve unknown key", args: []string{"serve", "--config", "{CFG}"}, task: withServe("serve: {server-id: 9, users: [{user: r, password: p}], port: 3310}\n"), exit: 2, want: "port"},

		// sources: (a global binlog)
		{name: "sources empty", args: []string{"serve", "--config", "{CFG}"}, task: withSources("sources: []\nserve: {server-id: 9, users: [{user: r, password: p}]}\n"), exit: 2, want: "sources is empty"},
		{name: "sources with source", args: []string{"serve", "--config", "{CFG}"}, task: withServe(twoSources), exit: 2, want: "source and sources are both set"},
		{name: "sources with target", args: []string{"serve", "--config", "{CFG}"}, task: withSources(twoSources + "target: {host: h, port: 1, user: u}\n"), exit: 2, want: "sources is set with a target"},
		{name: "sources name duplicated", args: []string{"serve", "--config", "{CFG}"}, task: withSources(strings.Replace(twoSources, "name: s2", "name: s1", 1)), exit: 2, want: "also sources[0]'s name"},
		{name: "sources domain-id missing", args: []string{"serve", "--config", "{CFG}"}, task: withSources(strings.Replace(twoSources, ", domain-id: 2", "", 1)), exit: 2, want: "domain-id is missing"},
		{name: "sources domain-id duplicated", args: []string{"serve", "--config", "{CFG}"}, task: withSources(strings.Replace(twoSources, "domain-id: 2", "domain-id: 1", 1)), exit: 2, want: "is also sources[0]'s"},
		{name: "sources host empty", args: []string{"serve", "--config", "{CFG}"}, task: withSources(strings.Replace(twoSources, "name: s2, host: 127.0.0.1", "name: s2, host: \"\"", 1)), exit: 2, want: "host is empty"},
		{name: "sources name with a dot", args: []string{"serve", "--config", "{CFG}"}, task: withSources(strings.Replace(twoSources, "name: s2", "name: s.2", 1)), exit: 2, want: "must be a non-empty word"},

		// Flags of migrate.
		{name: "migrate without --config", args: []string{"migrate", "--mode", "full"}, exit: 2, want: "--config"},
		{name: "migrate bad --mode", args: []string{"migrate", "--config", "{CFG}", "--mode", "sideways"}, task: badTask, exit: 2, want: "sideways"},
		{name: "migrate empty --mode", args: []string{"migrate", "--config", "{CFG}", "--mode", ""}, task: badTask, exit: 2, want: "mode"},
		{name: "migrate --threads negative", args: append(full, "--threads", "-5"), task: badTask, exit: 2, want: "--threads -5 is negative"},
		{name: "migrate --pool-size negative", args: append(full, "--pool-size", "-1"), task: badTask, exit: 2, want: "--pool-size -1 is negative"},
		{name: "migrate --rows-per-chunk negative", args: append(full, "--rows-per-chunk", "-1"), task: badTask, exit: 2, want: "--rows-per-chunk -1 is negative"},
		{name: "migrate --rows-per-statement negative", args: append(full, "--rows-per-statement", "-1"), task: badTask, exit: 2, want: "--rows-per-statement"},
		{name: "migrate --threads too many", args: append(full, "--threads", "1000"), task: badTask, exit: 2, want: "threads"},
		{name: "migrate --threads not a number", args: append(full, "--threads", "x"), task: badTask, exit: 2, want: "--threads"},
		{name: "migrate --progress-every not a duration", args: append(full, "--progress-every", "often"), task: badTask, exit: 2, want: "--progress-every"},
		{name: "migrate unknown flag", args: append(full, "--treads", "4"), task: badTask, exit: 2, want: "--treads"},
		{name: "migrate extra argument", args: append(full, "now"), task: badTask, exit: 2, want: "now"},
		{name: "migrate unreachable source", args: full, task: badTask, exit: 2, want: "unreachable"},
		{name: "migrate not a MySQL server", args: full, task: strings.ReplaceAll(badTask, "{PORT}", "{NOTMYSQL}"), exit: 2, want: "MySQL"},

		// check, verify, dump, load.
		{name: "check without --config", args: []string{"check", "--mode", "full"}, exit: 2, want: "--config"},
		{name: "check bad --mode", args: []string{"check", "--config", "{CFG}", "--mode", "bogus"}, task: badTask, exit: 2, want: "bogus"},
		{name: "check unknown flag", args: []string{"check", "--config", "{CFG}", "--fast"}, task: badTask, exit: 2, want: "--fast"},
		{name: "verify without --config", args: []string{"verify"}, exit: 2, want: "--config"},
		{name: "verify --threads negative", args: []string{"verify", "--config", "{CFG}", "--threads", "-1"}, task: badTask, exit: 2, want: "threads is -1"},
		{name: "verify --max-diffs negative", args: []string{"verify", "--config", "{CFG}", "--max-diffs", "-1"}, task: badTask, exit: 2, want: "max-diffs is -1"},
		{name: "verify --rechecks negative", args: []string{"verify", "--config", "{CFG}", "--rechecks", "-1"}, task: badTask, exit: 2, want: "rechecks is -1"},
		{name: "verify --recheck-delay negative", args: []string{"verify", "--config", "{CFG}", "--recheck-delay", "-1s"}, task: badTask, exit: 2, want: "recheck-delay is -1s"},
		{name: "verify --rows-per-chunk negative", args: []string{"verify", "--config", "{CFG}", "--rows-per-chunk", "-1"}, task: badTask, exit: 2, want: "rows-per-chunk is -1"},
		{name: "dump without --config", args: []string{"dump", "--dir", "{DIR}/d"}, exit: 2, want: "--config"},
		{name: "dump --threads negative", args: []string{"dump", "--config", "{CFG}", "--dir", "{DIR}/d", "--threads", "-2"}, task: badTask, exit: 2, want: "--threads"},
		{name: "dump --rows-per-chunk negative", args: []string{"dump", "--config", "{CFG}", "--dir", "{DIR}/d", "--rows-per-chunk", "-2"}, task: badTask, exit: 2, want: "--rows-per-chunk"},
		{name: "load without --config", args: []string{"load", "--dir", "{DIR}"}, exit: 2, want: "--config"},
		{name: "load --dir not a dump", args: []string{"load", "--config", "{CFG}", "--dir", "{DIR}"}, task: badTask, exit: 2, want: "no metadata.json"},
		{name: "load --dir missing", args: []string{"load", "--config", "{CFG}", "--dir", "{DIR}/nodump"}, task: badTask, exit: 2, want: "nodump"},
		{name: "load --pool-size negative", args: []string{"load", "--config", "{CFG}", "--dir", "{DIR}", "--pool-size", "-3"}, task: badTask, exit: 2, want: "--pool-size"},

		// skip, replace, pause, stop, resume, status.
		{name: "skip without --config", args: []string{"skip", "--gtid", "0-1-2"}, exit: 2, want: "--config"},
		{name: "skip without --gtid", args: []string{"skip", "--config", "{CFG}"}, task: badTask, exit: 2, want: "--gtid"},
		{name: "skip bad --gtid", args: []string{"skip", "--config", "{CFG}", "--gtid", "zero"}, task: badTask, exit: 2, want: "zero"},
		{name: "skip --gtid and --position", args: []string{"skip", "--config", "{CFG}", "--gtid", "0-1-2", "--position", "mysql-bin.000001:4"}, task: badTask, exit: 2, want: "--position"},
		{name: "skip bad --position", args: []string{"skip", "--config", "{CFG}", "--position", "here"}, task: badTask, exit: 2, want: "here"},
		{name: "skip task never ran", args: []string{"skip", "--config", "{CFG}", "--gtid", "0-1-2"}, task: badTask, exit: 2, want: "skip"},
		{name: "replace without --sql", args: []string{"replace", "--config", "{CFG}", "--gtid", "0-1-2"}, task: badTask, exit: 2, want: "--sql"},
		{name: "replace without --gtid", args: []string{"replace", "--config", "{CFG}", "--sql", "SELECT 1"}, task: badTask, exit: 2, want: "--gtid"},
		{name: "replace bad --gtid", args: []string{"replace", "--config", "{CFG}", "--gtid", "1-2", "--sql", "SELECT 1"}, task: badTask, exit: 2, want: "1-2"},
		{name: "replace without --config", args: []string{"replace", "--gtid", "0-1-2", "--sql", "SELECT 1"}, exit: 2, want: "--config"},
		{name: "pause without --config", args: []string{"pause"}, exit: 2, want: "--config"},
		{name: "pause task not running", args: []string{"pause", "--config", "{CFG}"}, task: badTask, exit: 3, want: "not running"},
		{name: "stop without --config", args: []string{"stop"}, exit: 2, want: "--config"},
		{name: "resume without --config", args: []string{"resume"}, exit: 2, want: "--config"},
		{name: "resume task not running", args: []string{"resume", "--config", "{CFG}"}, task: badTask, exit: 3, want: "not running"},
		{name: "status without --config", args: []string{"status"}, exit: 2, want: "--config"},
		{name: "status task never ran", args: []string{"status", "--config", "{CFG}"}, task: badTask, exit: 2, want: "no status.json"},
		{name: "status extra argument", args: []string{"status", "--config", "{CFG}", "bt"}, task: badTask, exit: 2, want: "bt"},

		// Groups and their subcommands.
		{name: "top-level command typo", args: []string{"migrat"}, exit: 2, want: "migrat"},
		{name: "task subcommand typo", args: []string{"task", "lsit"}, exit: 2, want: "lsit"},
		{name: "task add without --config", args: []string{"task", "add", "--etcd", "127.0.0.1:{PORT}"}, exit: 2, want: "--config"},
		{name: "task remove unknown task", args: []string{"task", "remove", "nosuchtask", "--etcd", "127.0.0.1:{PORT}"}, exit: 2, want: "etcd"},
		{name: "dtx subcommand typo", args: []string{"dtx", "srve"}, exit: 2, want: "srve"},
		{name: "sandbox subcommand typo", args: []string{"sandbox", "upp"}, exit: 2, want: "upp"},
		{name: "bench subcommand typo", args: []string{"bench", "oltpp"}, exit: 2, want: "oltpp"},
		{name: "unknown global flag", args: []string{"--verbose", "status"}, exit: 2, want: "--verbose"},

		// dtx query and serve.
		{name: "dtx query without gid", args: []string{"dtx", "query"}, exit: 2, want: "accepts 1 arg"},
		{name: "dtx query bad store port", args: []string{"dtx", "query", "g1", "--store", "mysql://u:pw-s3cret-x@127.0.0.1:notaport/d"}, exit: 2, want: "store"},
		{name: "dtx query unknown store scheme", args: []string{"dtx", "query", "g1", "--store", "postgres://u:pw-s3cret-x@h/d"}, exit: 2, want: "postgres"},
		{name: "dtx query unreachable server", args: []string{"dtx", "query", "g1", "--server", "http://127.0.0.1:{PORT}"}, exit: 2, want: "127.0.0.1"},
		{name: "dtx query bad server URL", args: []string{"dtx", "query", "g1", "--server", "::nourl"}, exit: 2, want: "server"},
		{name: "dtx serve bad store URL", args: []string{"dtx", "serve", "--listen", "127.0.0.1:0", "--store", "ftp://h/x"}, exit: 2, want: "ftp"},
		{name: "dtx serve mysql store unreachable", args: []string{"dtx", "serve", "--listen", "127.0.0.1:0", "--store", "mysql://u:pw-s3cret-x@127.0.0.1:{PORT}/d"}, exit: 2, want: "store"},
		{name: "dtx serve redis store unreachable", args: []string{"dtx", "serve", "--listen", "127.0.0.1:0", "--store", "redis://:pw-s3cret-x@127.0.0.1:{PORT}/0"}, exit: 2, want: "redis"},
		{name: "dtx serve bolt store under a file", args: []string{"dtx", "serve", "--listen", "127.0.0.1:0", "--store", "bolt://{CFG}/dtx.db"}, task: "not a directory", exit: 2, want: "dtx.db"},
		{name: "dtx serve bad --listen", args: []string{"dtx", "serve", "--store", "mem://", "--listen", "nohost:99999"}, exit: 2, want: "99999"},
		{name: "dtx serve bad --grpc-listen", args: dtxServe("--grpc-listen", "x:-1"), exit: 2, want: "grpc"},
		{name: "dtx serve --max-conns negative", args: dtxServe("--max-conns", "-1"), exit: 2, want: "--max-conns"},
		{name: "dtx serve --retry-limit negative", args: dtxServe("--retry-limit", "-1"), exit: 2, want: "retry limit must be positive"},
		{name: "dtx serve --lease zero", args: dtxServe("--lease", "0s"), exit: 2, want: "lease 0s must be"},
		{name: "dtx serve --retry-interval negative", args: dtxServe("--retry-interval", "-1s"), exit: 2, want: "retry interval must be positive"},
		{name: "dtx serve --commit-workers negative", args: dtxServe("--commit-workers", "-1"), exit: 2, want: "commit"},
		{name: "dtx serve --claim-batch negative", args: dtxServe("--claim-batch", "-5"), exit: 2, want: "claim batch"},
		{name: "dtx serve --memory-limit negative", args: dtxServe("--memory-limit", "-1"), exit: 2, want: "--memory-limit"},
		{name: "dtx serve --log-level unknown", args: dtxServe("--log-level", "loud"), exit: 2, want: "loud"},
		{name: "dtx serve --token-file missing", args: dtxServe("--token-file", "{DIR}/none.token"), exit: 2, want: "none.token"},
		{name: "dtx serve --timeout-to-fail negative", args: dtxServe("--timeout-to-fail", "-1s"), exit: 2, want: "timeout-to-fail must be positive"},
		{name: "dtx serve --alert-webhook not a URL", args: dtxServe("--alert-webhook", "::x"), exit: 2, want: "alert webhook"},
		{name: "dtx serve --request-timeout negative", args: dtxServe("--request-timeout", "-1s"), exit: 2, want: "request timeout must be positive"},
		{name: "dtx serve unknown flag", args: dtxServe("--port", "36789"), exit: 2, want: "--port"},

		// sandbox and bench.
		{name: "sandbox up --port negative", args: []string{"sandbox", "up", "--dir", "{DIR}", "--name", "x", "--port", "-1"}, exit: 2, want: "port"},
		{name: "sandbox up --port too big", args: []string{"sandbox", "up", "--dir", "{DIR}", "--name", "x", "--port", "70000"}, exit: 2, want: "port"},
		{name: "sandbox up --name with a slash", args: []string{"sandbox", "up", "--dir", "{DIR}", "--name", "a/b", "--port", "3399"}, exit: 2, want: "name"},
		{name: "sandbox up --buffer-pool bad", args: []string{"sandbox", "up", "--dir", "{DIR}", "--name", "x", "--port", "3399", "--buffer-pool", "lots"}, exit: 2, want: "buffer-pool"},
		{name: "sandbox down unknown instance", args: []string{"sandbox", "down", "--dir", "{DIR}", "--name", "nosuch"}, exit: 2, want: "nosuch"},
		{name: "sandbox status unknown instance", args: []string{"sandbox", "status", "--dir", "{DIR}", "--name", "nosuch"}, exit: 2, want: "nosuch"},
		{name: "bench unreachable server", args: []string{"bench", "oltp", "run", "--port", "{PORT}", "--time", "1s"}, exit: 2, want: "server unreachable"},
		{name: "bench --threads not a list", args: []string{"bench", "oltp", "run", "--threads", "8,x"}, exit: 2, want: "--threads"},
		{name: "bench --threads zero", args: []string{"bench", "oltp", "run", "--threads", "0", "--port", "{PORT}"}, exit: 2, want: "invalid --threads 0"},
		{name: "bench unknown workload", args: []string{"bench", "oltp", "run", "--workload", "tpcc", "--port", "{PORT}"}, exit: 2, want: "unknown workload"},
		{name: "bench --time not a duration", args: []string{"bench", "oltp", "run", "--time", "soon"}, exit: 2, want: "--time"},
		{name: "bench --rand-type unknown", args: []string{"bench", "oltp", "run", "--rand-type", "zipf", "--port", "{PORT}"}, exit: 2, want: "--rand-type"},
		{name: "bench compare missing files", args: []string{"bench", "compare", "{DIR}/a.json", "{DIR}/b.json"}, exit: 2, want: "a.json"},
		{name: "bench compare one file", args: []string{"bench", "compare", "a.json"}, exit: 2, want: "2 arg"},
	}
	return append(cs, serverBadCases()...)
}

// serverBadCases need the shared sandbox; each checks that the refused
// command created nothing there.
func serverBadCases() []badCase {
	srvFull := []string{"migrate", "--config", "{CFG}", "--mode", "full"}
	srvIncr := []string{"migrate", "--config", "{CFG}", "--mode", "incremental"}
	return []badCase{
		{name: "wrong password", server: true, args: srvFull, task: strings.Replace(srvTask, `user: root, password: ""`, "user: root, password: pw-s3cret-x", 1), exit: 2, want: "root"},
		{name: "unknown user", server: true, args: srvFull, task: strings.Replace(srvTask, `user: root, password: ""`, "user: nobody, password: pw-s3cret-x", 1), exit: 2, want: "nobody"},
		{name: "target user without privileges", server: true, args: srvFull, task: strings.Replace(srvTask, `target: {host: 127.0.0.1, port: {SRC_PORT}, user: root, password: ""}`, "target: {host: 127.0.0.1, port: {SRC_PORT}, user: weak, password: weakpw}", 1), exit: 2, want: "weak"},
		{name: "source user without replication privileges", server: true, args: []string{"migrate", "--config", "{CFG}", "--mode", "all"}, task: strings.Replace(srvTask, `source: {host: 127.0.0.1, port: {SRC_PORT}, user: root, password: ""}`, "source: {host: 127.0.0.1, port: {SRC_PORT}, user: weak, password: weakpw}", 1), exit: 2, want: "REPLICATION"},
		{name: "pattern matches no table", server: true, args: srvFull, task: strings.Replace(srvTask, `"bsrc.*"`, `"nosuch.*"`, 1), exit: 2, want: "nosuch.*"},
		{name: "dump pattern matches no table", server: true, args: []string{"dump", "--config", "{CFG}", "--dir", "{DIR}/d"}, task: strings.Replace(srvTask, `"bsrc.*"`, `"nosuch.*"`, 1), exit: 2, want: "nosuch.*"},
		{name: "sequence table refused", server: true, args: srvFull, task: strings.Replace(strings.Replace(srvTask, `"bsrc.*"`, `"bseq.*"`, 1), "schema: bsrc, target-schema: bdst", "schema: bseq, target-schema: bseqdst", 1), setup: []string{"CREATE DATABASE bseq", "CREATE SEQUENCE bseq.s"}, undo: []string{"DROP DATABASE bseq"}, exit: 2, want: "copies and replicates no sequence: bseq.s"},
		{name: "target table with another definition", server: true, args: srvFull, task: srvTask, setup: []string{"CREATE DATABASE bdst", "CREATE TABLE bdst.t (id INT PRIMARY KEY, w INT)"}, undo: []string{"DROP DATABASE bdst"}, exit: 2, want: "bdst"},
		{name: "binlog_format STATEMENT for migrate --mode all", server: true, args: []string{"migrate", "--config", "{CFG}", "--mode", "all"}, task: srvTask, setup: []string{"SET GLOBAL binlog_format=STATEMENT"}, undo: []string{"SET GLOBAL binlog_format=ROW"}, exit: 2, want: "binlog_format"},
		{name: "binlog_format STATEMENT for check --mode all", server: true, args: []string{"check", "--config", "{CFG}", "--mode", "all"}, task: srvTask, setup: []string{"SET GLOBAL binlog_format=STATEMENT"}, undo: []string{"SET GLOBAL binlog_format=ROW"}, exit: 1, want: "binlog_format"},
		{name: "copy onto itself", server: true, args: srvFull, task: strings.Replace(srvTask, "routes: [{schema: bsrc, target-schema: bdst}]\n", "", 1), exit: 2, want: "the target is the source server"},
		{name: "replicate onto itself", server: true, args: []string{"migrate", "--config", "{CFG}", "--mode", "incremental"}, task: strings.Replace(srvTask, "routes: [{schema: bsrc, target-schema: bdst}]\n", "", 1), exit: 2, want: "the target is the source server"},
		{name: "copy onto itself through localhost", server: true, args: srvFull, task: strings.Replace(strings.Replace(srvTask, "routes: [{schema: bsrc, target-schema: bdst}]\n", "", 1), "target: {host: 127.0.0.1", "target: {host: localhost", 1), exit: 2, want: "the target is the source server"},
		{name: "status of a task that never ran", server: true, args: []string{"status", "--config", "{CFG}"}, task: srvTask, exit: 2, want: "no status.json"},
		{name: "skip on a task that never ran", server: true, args: []string{"skip", "--config", "{CFG}", "--gtid", "0-1-2"}, task: srvTask, exit: 2, want: "skip"},
		{name: "verify missing target table", server: true, args: []string{"verify", "--config", "{CFG}"}, task: srvTask, exit: 1, want: "missing on target"},
		{name: "migrate --bulk-max-chunks negative", server: true, args: append(srvFull, "--bulk-max-chunks", "-1"), task: srvTask, exit: 2, want: "--bulk-max-chunks -1 is negative"},
		{name: "migrate --progress-every negative", server: true, args: append(srvFull, "--progress-every", "-1s"), task: srvTask, exit: 2, want: "--progress-every -1s is negative"},
		{name: "migrate --commit-unit unknown", server: true, args: append(srvFull, "--commit-unit", "sometimes"), task: srvTask, exit: 2, want: "sometimes"},
		{name: "verify --table not a table name", server: true, args: []string{"verify", "--config", "{CFG}", "--table", "nodot"}, task: srvTask, exit: 2, want: "nodot"},
		{name: "incremental.relay-sync unknown", server: true, args: srvIncr, task: srvTask + "incremental: {relay-sync: sometimes}\n", exit: 2, want: "relay-sync"},
		{name: "incremental.relay-retain bad", server: true, args: srvIncr, task: srvTask + "incremental: {relay-retain: forever}\n", exit: 2, want: "relay-retain"},
		{name: "incremental.gtid-set bad", server: true, args: srvIncr, task: srvTask + "incremental: {gtid-set: zero}\n", exit: 2, want: "zero"},
		{name: "incremental.metrics-addr bad", server: true, args: []string{"migrate", "--config", "{CFG}", "--mode", "all"}, task: srvTask + "incremental: {metrics-addr: \"nohost:port:x\"}\n", exit: 2, want: "metrics"},
	}
}
