package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/procstat"
	"github.com/sluice-db/sluice/sandbox"
)

var kafkaOnce struct {
	sync.Once
	k   *sandbox.KafkaInstance
	err error
}

// StartKafka returns the test binary's shared Kafka broker (KRaft, one
// node, on a free loopback port), starting it on first use. Starting a
// broker takes 10-30 s, so every test of a package shares one; it runs
// with auto.create.topics.enable=false, so a test that needs a topic
// creates it (the Kafka sink does by default). The broker dies with the
// test process (and reapKafkaOrphans catches a killed one); its directory
// is removed by the next test binary's reaper. A missing java or mvn
// fails the test: CI installs them ('make deps').
func StartKafka(tb testing.TB) *sandbox.KafkaInstance {
	tb.Helper()
	SkipShort(tb)
	kafkaOnce.Do(func() {
		kafkaOnce.k, _, kafkaOnce.err = NewKafka()
	})
	if kafkaOnce.err != nil {
		tb.Fatal(kafkaOnce.err)
	}
	return kafkaOnce.k
}

// StartOwnKafka starts a broker for one test (one it may kill, restart or
// configure with extra server.properties lines) and stops it when the test
// ends.
func StartOwnKafka(tb testing.TB, opts ...string) *sandbox.KafkaInstance {
	tb.Helper()
	SkipShort(tb)
	k, stop, err := NewKafka(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return k
}

// StartOwnSASLKafka starts a broker for one test whose clients
// authenticate with SASL and whose ACLs apply (sandbox.KafkaConfig.SASL):
// connect with k.AdminOpts(), grant with k.AddACLs. It also listens with
// TLS (SASL_SSL) on k.TLSAddr(), its CA in k.CAFile().
func StartOwnSASLKafka(tb testing.TB) *sandbox.KafkaInstance {
	tb.Helper()
	SkipShort(tb)
	k, stop, err := newKafka(true)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return k
}

// NewKafka starts a broker with extra server.properties lines (key=value)
// and returns it with a stop function; use it from TestMain.
func NewKafka(opts ...string) (*sandbox.KafkaInstance, func(), error) {
	return newKafka(false, opts...)
}

func newKafka(sasl bool, opts ...string) (*sandbox.KafkaInstance, func(), error) {
	if Short() {
		return nil, nil, ErrShort
	}
	reapKafkaOrphans()
	dir, err := os.MkdirTemp("", "sbk")
	if err != nil {
		return nil, nil, err
	}
	if err := markOwner(dir); err != nil {
		return nil, nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := sandbox.FreePort()
		if err != nil {
			return nil, nil, err
		}
		c := sandbox.DefaultKafkaConfig()
		c.Dir, c.Name, c.Port, c.AutoCreateTopics, c.Options, c.DieWithParent = dir, "kafka", port, false, opts, true
		c.Heap, c.SASL = "384m", sasl
		if sasl {
			if c.TLSPort, err = sandbox.FreePort(); err != nil {
				return nil, nil, err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		k, err := sandbox.KafkaUp(ctx, c)
		cancel()
		if err == nil {
			stop := func() {
				_ = k.Stop(context.Background(), 30*time.Second)
				_ = os.RemoveAll(dir)
			}
			return k, stop, nil
		}
		lastErr = err
		_ = os.RemoveAll(filepath.Join(dir, "kafka"))
	}
	_ = os.RemoveAll(dir)
	return nil, nil, fmt.Errorf("sandboxtest: start kafka: %w (are java and mvn installed? run 'make deps')", lastErr)
}

// RestartKafka starts a stopped or killed broker again on its port and
// data, as after a crash.
func RestartKafka(tb testing.TB, k *sandbox.KafkaInstance) {
	tb.Helper()
	c := sandbox.DefaultKafkaConfig()
	c.Dir, c.Name, c.Port, c.AutoCreateTopics, c.DieWithParent, c.Heap = filepath.Dir(k.Home), k.Name, k.Port, false, true, "384m"
	c.SASL, c.TLSPort, c.ControllerPort = k.SASL, k.TLSPort, k.ControllerPort
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := sandbox.KafkaUp(ctx, c); err != nil {
		tb.Fatal(err)
	}
}

// reapKafkaOrphans kills the brokers of test processes that died without
// cleaning up and removes their directories.
func reapKafkaOrphans() {
	for _, dir := range deadOwnerDirs("sbk*") {
		files, _ := filepath.Glob(filepath.Join(dir, "*", "kafka.pid"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid <= 0 {
				continue
			}
			if strings.HasPrefix(procstat.Comm(pid), "java") {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = os.RemoveAll(dir)
	}
}
