package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/procstat"
)

// KafkaVersion is the Apache Kafka release the Kafka sandbox runs.
const KafkaVersion = "3.9.1"

// KafkaConfig describes one Kafka sandbox: a single Apache Kafka broker in
// KRaft mode (broker and controller in one JVM) on loopback.
type KafkaConfig struct {
	Dir  string // state directory holding all instances (shared with the MariaDB sandboxes)
	Name string
	Port int // the client (PLAINTEXT) listener on 127.0.0.1
	// ControllerPort is the KRaft controller listener; 0 picks a free port
	// the first time (it is then kept, as the quorum knows it).
	ControllerPort int
	// Cache holds the Kafka jars fetched from Maven Central (KafkaCacheDir).
	Cache string
	// Heap is the JVM's -Xmx.
	Heap string
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// Options are extra server.properties lines, key=value.
	Options []string
	// StartTimeout bounds the wait for the broker to serve metadata.
	StartTimeout time.Duration
	// DieWithParent kills the broker when the starting process dies (tests);
	// the CLI's broker outlives the command instead.
	DieWithParent bool
	// SASL makes clients authenticate (SASL_PLAINTEXT, users admin and
	// sluice) and turns ACLs on (kafkasasl.go). It is chosen when the
	// instance is created.
	SASL bool
	// TLSPort, when not 0, adds a TLS listener on 127.0.0.1 (SSL, or
	// SASL_SSL with SASL) whose certificate a CA of the sandbox signs
	// (KafkaInstance.CAFile); the plain listener stays for the sandbox's
	// own clients.
	TLSPort int
}

// DefaultKafkaConfig returns the defaults: port 9092, 512 MB heap, topics
// auto-created.
func DefaultKafkaConfig() KafkaConfig {
	return KafkaConfig{Dir: DefaultDir(), Name: "kafka", Port: 9092, Cache: KafkaCacheDir(), Heap: "512m",
		AutoCreateTopics: true, StartTimeout: 3 * time.Minute}
}

// KafkaCacheDir is where the jars are kept: $SLUICE_KAFKA_CACHE or
// ~/.cache/sluice-kafka/<version>.
func KafkaCacheDir() string {
	if d := os.Getenv("SLUICE_KAFKA_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sluice-kafka", KafkaVersion)
	}
	return filepath.Join(os.TempDir(), "sluice-kafka", KafkaVersion)
}

// Validate checks the config.
func (c KafkaConfig) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "sandbox kafka " + c.Name, Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if c.Name == "" || strings.ContainsAny(c.Name, "/\\ .") {
		return bad("invalid name "+strconv.Quote(c.Name), "use a name of letters, digits, - and _")
	}
	if c.Port <= 0 || c.Port > 65535 {
		return bad(fmt.Sprintf("invalid port %d", c.Port), "use --port between 1 and 65535")
	}
	if c.ControllerPort < 0 || c.ControllerPort > 65535 || c.ControllerPort == c.Port {
		return bad(fmt.Sprintf("invalid controller port %d", c.ControllerPort), "use another --controller-port, or 0 for a free one")
	}
	if c.TLSPort < 0 || c.TLSPort > 65535 || c.TLSPort != 0 && (c.TLSPort == c.Port || c.TLSPort == c.ControllerPort) {
		return bad(fmt.Sprintf("invalid TLS port %d", c.TLSPort), "use a --tls-port of its own, or none")
	}
	if c.Dir == "" || c.Cache == "" {
		return bad("empty state or cache directory", "set --dir or SLUICE_HOME")
	}
	for _, o := range c.Options {
		if !strings.Contains(o, "=") {
			return bad("option "+strconv.Quote(o)+" is not key=value", "write --option key=value")
		}
	}
	return nil
}

// KafkaInstance is a Kafka sandbox as recorded on disk (DIR/NAME/kafka.json).
type KafkaInstance struct {
	Name           string `json:"name"`
	Port           int    `json:"port"`
	ControllerPort int    `json:"controller_port"`
	ClusterID      string `json:"cluster_id"`
	Home           string `json:"home"`
	Libs           string `json:"libs"`
	SASL           bool   `json:"sasl,omitempty"`
	TLSPort        int    `json:"tls_port,omitempty"`
}

// TLSAddr is the TLS listener's host:port ("" without one).
func (k *KafkaInstance) TLSAddr() string {
	if k.TLSPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.TLSPort))
}

// CAFile is the CA certificate that signed the TLS listener's certificate
// (for sink.kafka.tls.ca).
func (k *KafkaInstance) CAFile() string { return filepath.Join(k.Home, "tls", "ca.pem") }

// Addr is the broker's host:port for clients.
func (k *KafkaInstance) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.Port)) }

// Log is the broker's output (its log lines).
func (k *KafkaInstance) Log() string { return filepath.Join(k.Home, "kafka.out") }

func (k *KafkaInstance) pidFile() string { return filepath.Join(k.Home, "kafka.pid") }
func (k *KafkaInstance) props() string   { return filepath.Join(k.Home, "server.properties") }
func (k *KafkaInstance) dataDir() string { return filepath.Join(k.Home, "data") }

// KafkaLibs returns the directory of the Kafka jars under cache, fetching
// them once from Maven Central (MavenLibs).
func KafkaLibs(ctx context.Context, cache string) (string, error) {
	return MavenLibs(ctx, cache, "Kafka "+KafkaVersion, []MavenArtifact{
		{"org.apache.kafka", "kafka_2.13", KafkaVersion}, {"org.slf4j", "slf4j-simple", "1.7.36"}})
}

// KafkaUp creates (first time) and starts a Kafka sandbox and returns once
// the broker serves metadata with itself registered. A running instance is
// returned unchanged.
func KafkaUp(ctx context.Context, c KafkaConfig) (*KafkaInstance, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 3 * time.Minute
	}
	home, err := filepath.Abs(filepath.Join(c.Dir, c.Name))
	if err != nil {
		return nil, err
	}
	op := "sandbox kafka up " + c.Name
	k := &KafkaInstance{Name: c.Name, Port: c.Port, ControllerPort: c.ControllerPort, Home: home, SASL: c.SASL, TLSPort: c.TLSPort}
	if prev, err := LoadKafka(c.Dir, c.Name); err == nil {
		if prev.Port != c.Port {
			return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: instance exists on port %d", sluice.ErrConfig, prev.Port),
				Hint: fmt.Sprintf("use --port %d, or remove it with 'sluice sandbox kafka down --name %s --purge'", prev.Port, c.Name)}
		}
		if prev.SASL != c.SASL {
			return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: instance exists with sasl %v", sluice.ErrConfig, prev.SASL),
				Hint: fmt.Sprintf("start it as it was created (--sasl=%v), or remove it with 'sluice sandbox kafka down --name %s --purge'", prev.SASL, c.Name)}
		}
		if prev.TLSPort != c.TLSPort {
			return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: instance exists with TLS port %d", sluice.ErrConfig, prev.TLSPort),
				Hint: fmt.Sprintf("start it as it was created (--tls-port %d), or remove it with 'sluice sandbox kafka down --name %s --purge'", prev.TLSPort, c.Name)}
		}
		k = prev
		if _, ok := k.Running(); ok {
			return k, waitKafka(ctx, k, c.StartTimeout, nil)
		}
	} else if _, err := os.Stat(filepath.Join(home, "sandbox.json")); err == nil {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s is a MariaDB sandbox", sluice.ErrConfig, c.Name), Hint: "choose another --name"}
	}
	if err := checkPortFree(k.Port); err != nil {
		return nil, &sluice.Error{Op: op, Err: err, Hint: "choose another --port"}
	}
	if k.ControllerPort == 0 {
		if k.ControllerPort, err = FreePort(); err != nil {
			return nil, err
		}
	} else if err := checkPortFree(k.ControllerPort); err != nil {
		return nil, &sluice.Error{Op: op, Err: err, Hint: "choose another --controller-port"}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: java not found", sluice.ErrConfig), Hint: "run 'make deps', or apt-get install -y default-jre-headless"}
	}
	if k.Libs, err = KafkaLibs(ctx, c.Cache); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	if k.ClusterID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		k.ClusterID = base64.RawURLEncoding.EncodeToString(b[:])
	}
	var creds KafkaCredentials
	if k.SASL {
		if creds, err = k.ensureCredentials(); err != nil {
			return nil, err
		}
	}
	if k.TLSPort != 0 {
		if err := checkPortFree(k.TLSPort); err != nil {
			return nil, &sluice.Error{Op: op, Err: err, Hint: "choose another --tls-port"}
		}
		if err := k.writeKeystore(); err != nil {
			return nil, err
		}
	}
	// 0600: with SASL it holds the users' passwords.
	if err := writePrivate(k.props(), []byte(renderKafkaProps(k, c, creds))); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(home, "kafka.json"), k); err != nil {
		return nil, err
	}
	cp := filepath.Join(k.Libs, "*")
	if _, err := os.Stat(filepath.Join(k.dataDir(), "meta.properties")); errors.Is(err, os.ErrNotExist) {
		cmd := exec.CommandContext(ctx, java, "-Xmx256m", "-cp", cp, "kafka.tools.StorageTool", "format", "-t", k.ClusterID, "-c", k.props())
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: kafka-storage format failed: %v: %s", op, err, lastLines(string(out), 3))
		}
	}
	logf, err := os.OpenFile(k.Log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	closeInheritedOnExec()
	heap := c.Heap
	if heap == "" {
		heap = "512m"
	}
	cmd := exec.Command(java, "-Xmx"+heap, "-XX:+UseSerialGC", "-Djava.awt.headless=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-cp", cp, "kafka.Kafka", k.props())
	cmd.Dir, cmd.Stdout, cmd.Stderr = home, logf, logf
	// A session of its own, so the broker outlives the CLI and a terminal's
	// ^C; a test's broker dies with the test instead.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if c.DieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start java: %w", op, err)
	}
	if err := os.WriteFile(k.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := waitKafka(ctx, k, c.StartTimeout, exited); err != nil {
		_ = k.Kill()
		return nil, err
	}
	if k.SASL {
		if err := addSCRAM(ctx, k, creds); err != nil {
			_ = k.Kill()
			return nil, err
		}
	}
	return k, nil
}

// writePrivate writes a file only its owner may read.
func writePrivate(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil { // a file of an older version was 0644
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func renderKafkaProps(k *KafkaInstance, c KafkaConfig, creds KafkaCredentials) string {
	listeners := []string{
		"listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(k.Port) + ",CONTROLLER://127.0.0.1:" + strconv.Itoa(k.ControllerPort),
		"advertised.listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(k.Port),
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
	}
	if k.SASL {
		listeners = saslProps(k, creds)
	}
	if k.TLSPort != 0 {
		listeners = tlsProps(k, listeners)
	}
	lines := append([]string{
		"process.roles=broker,controller",
		"node.id=1",
		"controller.quorum.voters=1@127.0.0.1:" + strconv.Itoa(k.ControllerPort),
	}, listeners...)
	lines = append(lines,
		"log.dirs="+k.dataDir(),
		"num.partitions=1",
		// One broker: the internal topics cannot have more replicas, and
		// transactions need their state log's min.isr met by it alone.
		"offsets.topic.replication.factor=1",
		"offsets.topic.num.partitions=4",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"transaction.state.log.num.partitions=4",
		"default.replication.factor=1",
		"min.insync.replicas=1",
		"group.initial.rebalance.delay.ms=0",
		"auto.create.topics.enable="+strconv.FormatBool(c.AutoCreateTopics),
		"log.segment.bytes=67108864",
	)
	return strings.Join(append(lines, c.Options...), "\n") + "\n"
}

// waitKafka waits until the broker answers a metadata request listing
// itself (it has registered with its controller), failing fast when the
// process exits first.
func waitKafka(ctx context.Context, k *KafkaInstance, timeout time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(timeout)
	var last error
	opts, err := k.AdminOpts()
	if err != nil {
		return err
	}
	for {
		if last = PingKafka(ctx, k.Addr(), opts...); last == nil {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("sandbox kafka %s: the broker exited during start-up (%v): %s", k.Name, werr, lastLines(readFile(k.Log()), 3))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox kafka %s: not serving on %s after %s: %v; see %s", k.Name, k.Addr(), timeout, last, k.Log())
		}
	}
}

// PingKafka asks the broker at addr for its metadata and checks that it
// lists a broker; opts add e.g. SASL (KafkaInstance.AdminOpts).
func PingKafka(ctx context.Context, addr string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second), kgo.RetryTimeout(time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(pctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Brokers) == 0 {
		return errors.New("no broker registered yet")
	}
	return nil
}

// Running returns the broker's pid and whether it is alive.
func (k *KafkaInstance) Running() (int, bool) {
	b, err := os.ReadFile(k.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !alive(pid) {
		return 0, false
	}
	// Only a java process: the pid may have been reused since.
	if !strings.HasPrefix(procstat.Comm(pid), "java") {
		return 0, false
	}
	return pid, true
}

// Stop stops the broker (SIGTERM: a controlled shutdown; SIGKILL after
// timeout) and waits for it to exit.
func (k *KafkaInstance) Stop(ctx context.Context, timeout time.Duration) error {
	if timeout == 0 {
		timeout = time.Minute
	}
	pid, ok := k.Running()
	if !ok {
		return nil
	}
	return stopProcess(ctx, pid, timeout, k.pidFile())
}

// Kill sends SIGKILL to the broker (crash tests) and waits for it to die.
func (k *KafkaInstance) Kill() error {
	pid, ok := k.Running()
	if !ok {
		return nil
	}
	if err := killProcess(pid); err != nil {
		return err
	}
	_ = os.Remove(k.pidFile())
	return nil
}

// KafkaDown stops a Kafka sandbox by its own pid and, with purge, removes
// its directory.
func KafkaDown(ctx context.Context, dir, name string, purge bool, timeout time.Duration) error {
	k, err := LoadKafka(dir, name)
	if err != nil {
		return err
	}
	if err := k.Stop(ctx, timeout); err != nil {
		return err
	}
	if purge {
		return os.RemoveAll(k.Home)
	}
	return nil
}

// LoadKafka reads a Kafka sandbox's record from DIR/NAME/kafka.json.
func LoadKafka(dir, name string) (*KafkaInstance, error) {
	var k KafkaInstance
	p := filepath.Join(dir, name, "kafka.json")
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &sluice.Error{Op: "sandbox kafka " + name, Err: fmt.Errorf("%w: no such Kafka sandbox in %s", sluice.ErrConfig, dir),
				Hint: "start it with 'sluice sandbox kafka up --name " + name + " --port P', or check --dir/SLUICE_HOME"}
		}
		return nil, err
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("sandbox kafka %s: corrupt %s: %w", name, p, err)
	}
	return &k, nil
}
