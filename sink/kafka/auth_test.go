package kafka_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
	"github.com/sluice-db/sluice/sink/kafka"
)

// TestKafkaACLsAndSASL runs the real sluice binary against a broker whose
// clients log in with SASL and whose ACLs apply (StandardAuthorizer):
//   - a wrong password: exit non-zero with one line that says the login
//     failed and how to fix it;
//   - a user without WRITE on one table's topic: exit non-zero with one
//     line naming the topic, the permission and the kafka-acls command
//     that grants it, and nothing of the source transaction (which also
//     changed a table the user may write) committed;
//   - over TLS, a broker certificate of an unknown CA: exit non-zero with
//     one line naming sink.kafka.tls.ca;
//   - once granted, the same task (now with SCRAM-SHA-512, over TLS with
//     the sandbox's CA) commits both rows, once.
//
// No password may appear in the output or the status file.
func TestKafkaACLsAndSASL(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and Kafka")
	}
	bin := sandboxtest.BuildSluice(t)
	k := sandboxtest.StartOwnSASLKafka(t)
	creds, err := k.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := k.AdminOpts()
	if err != nil {
		t.Fatal(err)
	}
	src := sandboxtest.MustOpen(t, srcInst, "")
	const schema = "ka"
	sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
		"CREATE TABLE "+schema+".ok (id int PRIMARY KEY, v varchar(20))",
		"CREATE TABLE "+schema+".no (id int PRIMARY KEY, v varchar(20))")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "BEGIN", "INSERT INTO "+schema+".ok VALUES (1, 'a')", "INSERT INTO "+schema+".no VALUES (1, 'b')", "COMMIT")

	okTopic, noTopic, offsets := schema+"."+schema+".ok", schema+"."+schema+".no", schema+".sluice-offsets"
	user := "User:" + sandbox.KafkaSluiceUser
	acl := func(rt kmsg.ACLResourceType, name string, ops ...kmsg.ACLOperation) []sandbox.KafkaACL {
		var out []sandbox.KafkaACL
		for _, op := range ops {
			out = append(out, sandbox.KafkaACL{Principal: user, ResourceType: rt, ResourceName: name, Operation: op})
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var grants []sandbox.KafkaACL
	grants = append(grants, acl(kmsg.ACLResourceTypeTopic, offsets, kmsg.ACLOperationAll)...)
	grants = append(grants, acl(kmsg.ACLResourceTypeTopic, okTopic, kmsg.ACLOperationAll)...)
	// The table "no": the sink may see and create its topic, not write it.
	grants = append(grants, acl(kmsg.ACLResourceTypeTopic, noTopic, kmsg.ACLOperationDescribe, kmsg.ACLOperationCreate, kmsg.ACLOperationRead)...)
	grants = append(grants, acl(kmsg.ACLResourceTypeTransactionalId, "sluice-"+schema, kmsg.ACLOperationAll)...)
	grants = append(grants, acl(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationIdempotentWrite)...)
	if err := k.AddACLs(ctx, grants...); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	taskFile := filepath.Join(dir, "task.yaml")
	// writeTask points the task at the plain SASL listener, or with tls
	// (a sink.kafka.tls map) at the SASL_SSL one.
	writeTask := func(mech, tls string) {
		extra := fmt.Sprintf(", sasl: {mechanism: %s, user: %s, password: '${KAFKA_PW}'}", mech, sandbox.KafkaSluiceUser)
		addr := k.Addr()
		if tls != "" {
			extra += ", tls: " + tls
			addr = k.TLSAddr()
		}
		if err := os.WriteFile(taskFile, []byte(sinkTaskYAML(schema, stateDir, addr, srcInst.Port, start, extra)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secrets := []string{creds[sandbox.KafkaSluiceUser], creds[sandbox.KafkaAdminUser], "wrong-pw-7f3a"}
	noSecret := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Fatalf("%s shows a password: %s", what, text)
			}
		}
	}
	// run runs sluice to its exit and returns its stderr and stdout.
	run := func(pw string) (errOut, out string, code int) {
		cmd := exec.CommandContext(ctx, bin, "migrate", "--config", taskFile, "--mode", "incremental")
		cmd.Env = append(os.Environ(), "KAFKA_PW="+pw)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("sluice did not exit with an error (%v); stderr %s; stdout %s", err, se.String(), so.String())
		}
		noSecret("sluice's output", se.String()+so.String())
		return strings.TrimSpace(se.String()), so.String(), ee.ExitCode()
	}
	oneLine := func(what, line string, want ...string) {
		t.Helper()
		if strings.Contains(line, "\n") {
			t.Fatalf("%s: more than one line on stderr:\n%s", what, line)
		}
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Fatalf("%s: the error does not say %q: %s", what, w, line)
			}
		}
		t.Logf("%s: %s", what, line)
	}

	// A wrong password.
	writeTask("PLAIN", "")
	line, _, code := run("wrong-pw-7f3a")
	oneLine("wrong password", line, "SASL authentication failed", `"sluice"`, "PLAIN", "password")
	if code == 0 {
		t.Fatal("wrong password: exit code 0")
	}

	// No WRITE on the topic of table "no".
	line, out, code := run(creds[sandbox.KafkaSluiceUser])
	oneLine("no WRITE", line, noTopic, "WRITE", user, "--operation Write", "--topic "+noTopic)
	if code == 0 {
		t.Fatal("no WRITE: exit code 0")
	}
	if st, err := os.ReadFile(filepath.Join(stateDir, "status.json")); err == nil {
		noSecret("status.json", string(st))
	}
	// Nothing committed: no event on either table's topic (the source
	// transaction changed both), and the checkpoint is still the start.
	if recs := consumeAll(t, k.Addr(), []string{okTopic, noTopic}, admin...); len(recs) != 0 {
		t.Fatalf("no WRITE: %d events committed (first on %s), want none; output:\n%s", len(recs), recs[0].Topic, out)
	}
	checkpoint := func() string {
		var last string
		for _, r := range consumeAll(t, k.Addr(), []string{offsets}, admin...) {
			if string(r.Key) == schema {
				var o struct {
					Position struct {
						File    string `json:"file"`
						Pos     uint64 `json:"pos"`
						GTIDSet string `json:"gtid_set"`
					} `json:"position"`
				}
				if err := json.Unmarshal(r.Value, &o); err != nil {
					t.Fatal(err)
				}
				last = fmt.Sprintf("%s:%d %s", o.Position.File, o.Position.Pos, o.Position.GTIDSet)
			}
		}
		return last
	}
	seeded := checkpoint()
	if seeded == "" {
		t.Fatal("no checkpoint of the task in " + offsets)
	}

	// When franz-go fails the records of both topics with the refusal,
	// the sink asks the broker which one it may not write.
	kc := kafka.DefaultConfig(schema)
	kc.Brokers, kc.TopicPrefix = []string{k.Addr()}, schema
	kc.SASL = &kafka.SASL{Mechanism: kafka.SASLPlain, User: sandbox.KafkaSluiceUser, Password: kafka.Secret(creds[sandbox.KafkaSluiceUser])}
	if got, err := kafka.RefusedTopic(ctx, kc, []string{offsets, okTopic, noTopic}); err != nil || got != noTopic {
		t.Fatalf("the topic the broker refuses: got %q (%v), want %s", got, err, noTopic)
	}

	// Over TLS, a broker certificate the system's CAs did not sign: one
	// line naming the fix, nothing retried forever.
	writeTask("SCRAM-SHA-512", "{}")
	line, _, code = run(creds[sandbox.KafkaSluiceUser])
	oneLine("TLS, unknown CA", line, "TLS certificate", "sink.kafka.tls.ca")
	if code == 0 {
		t.Fatal("TLS, unknown CA: exit code 0")
	}

	// Granted WRITE, with SCRAM over TLS (the sandbox's CA, the broker's
	// name checked): both rows, once.
	if err := k.AddACLs(ctx, acl(kmsg.ACLResourceTypeTopic, noTopic, kmsg.ACLOperationWrite)...); err != nil {
		t.Fatal(err)
	}
	writeTask("SCRAM-SHA-512", "{ca: "+k.CAFile()+"}")
	cmd := exec.Command(bin, "migrate", "--config", taskFile, "--mode", "incremental")
	cmd.Env = append(os.Environ(), "KAFKA_PW="+creds[sandbox.KafkaSluiceUser])
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var recs int
	sandboxtest.Eventually(t, 2*time.Minute, "granted: 2 events", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("granted: sluice exited: %v: %s", err, se.String())
		default:
		}
		recs = len(consumeAll(t, k.Addr(), []string{okTopic, noTopic}, admin...))
		return recs >= 2
	}, func() string { return fmt.Sprintf("%d events; stderr %s", recs, se.String()) })
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("granted: sluice stopped with %v: %s", err, se.String())
	}
	noSecret("sluice's output", se.String()+so.String())
	events := decodeEvents(t, consumeAll(t, k.Addr(), []string{okTopic, noTopic}, admin...))
	if len(events) != 2 || events[0].Topic == events[1].Topic || events[0].Source["gtid"] != events[1].Source["gtid"] {
		t.Fatalf("granted: want one event on each table's topic, of one source transaction; got %d: %v", len(events), events)
	}
	if cp := checkpoint(); cp == seeded {
		t.Fatalf("granted: the checkpoint did not move from %s", seeded)
	}
}
