package sandbox

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// A Kafka sandbox with SASL (KafkaConfig.SASL) authenticates every
// connection, clients' and the controller's, with SASL over plaintext
// (loopback only), and authorizes with KRaft's StandardAuthorizer: only
// ACLs let a user do anything, except the super user "admin" (the broker
// itself, and the tests' administrator). The user "sluice" exists, with
// PLAIN and SCRAM-SHA-256/512 credentials, and no ACL: grant what a test
// or a demo needs (KafkaACL). The passwords are random, kept in
// DIR/NAME/sasl.json (mode 0600), and appear in server.properties (0600),
// never on a command line.

// Users of a SASL Kafka sandbox.
const (
	KafkaAdminUser  = "admin"
	KafkaSluiceUser = "sluice"
)

// KafkaCredentials are the users' passwords of a SASL sandbox.
type KafkaCredentials map[string]string

func (k *KafkaInstance) saslFile() string { return filepath.Join(k.Home, "sasl.json") }

// Credentials reads the users' passwords (a SASL sandbox only).
func (k *KafkaInstance) Credentials() (KafkaCredentials, error) {
	b, err := os.ReadFile(k.saslFile())
	if err != nil {
		return nil, fmt.Errorf("sandbox kafka %s: read credentials: %w (was it started with --sasl?)", k.Name, err)
	}
	var c KafkaCredentials
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("sandbox kafka %s: corrupt %s: %w", k.Name, k.saslFile(), err)
	}
	return c, nil
}

// ensureCredentials creates the passwords the first time.
func (k *KafkaInstance) ensureCredentials() (KafkaCredentials, error) {
	if c, err := k.Credentials(); err == nil {
		return c, nil
	}
	c := KafkaCredentials{}
	for _, u := range []string{KafkaAdminUser, KafkaSluiceUser} {
		var b [12]byte
		_, _ = rand.Read(b[:])
		c[u] = hex.EncodeToString(b[:])
	}
	b, _ := json.Marshal(c)
	return c, os.WriteFile(k.saslFile(), b, 0o600)
}

// AdminOpts are franz-go options that connect as the super user (a SASL
// sandbox), or none.
func (k *KafkaInstance) AdminOpts() ([]kgo.Opt, error) {
	if !k.SASL {
		return nil, nil
	}
	c, err := k.Credentials()
	if err != nil {
		return nil, err
	}
	return []kgo.Opt{kgo.SASL(plain.Auth{User: KafkaAdminUser, Pass: c[KafkaAdminUser]}.AsMechanism())}, nil
}

// saslProps are the server.properties lines of a SASL sandbox: the
// listeners' security, the JAAS configs (Kafka's listener-prefixed
// sasl.jaas.config: the broker's own client login and, for PLAIN, the
// users), and the authorizer.
func saslProps(k *KafkaInstance, c KafkaCredentials) []string {
	plainJAAS := func(users ...string) string {
		s := `org.apache.kafka.common.security.plain.PlainLoginModule required username="` + KafkaAdminUser + `" password="` + c[KafkaAdminUser] + `"`
		for _, u := range users {
			s += ` user_` + u + `="` + c[u] + `"`
		}
		return s + ";"
	}
	scramJAAS := `org.apache.kafka.common.security.scram.ScramLoginModule required;`
	return []string{
		"listeners=CLIENT://127.0.0.1:" + strconv.Itoa(k.Port) + ",CONTROLLER://127.0.0.1:" + strconv.Itoa(k.ControllerPort),
		"advertised.listeners=CLIENT://127.0.0.1:" + strconv.Itoa(k.Port),
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=CLIENT",
		"listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		"sasl.mechanism.controller.protocol=PLAIN",
		"listener.name.client.plain.sasl.jaas.config=" + plainJAAS(KafkaAdminUser, KafkaSluiceUser),
		"listener.name.client.scram-sha-256.sasl.jaas.config=" + scramJAAS,
		"listener.name.client.scram-sha-512.sasl.jaas.config=" + scramJAAS,
		"listener.name.controller.sasl.enabled.mechanisms=PLAIN",
		"listener.name.controller.plain.sasl.jaas.config=" + plainJAAS(KafkaAdminUser),
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:" + KafkaAdminUser,
	}
}

// addSCRAM gives the sluice user SCRAM-SHA-256 and -512 credentials with
// its password (AlterUserScramCredentials: KRaft keeps them in its
// metadata log; the salted password is computed here, as clients must).
func addSCRAM(ctx context.Context, k *KafkaInstance, c KafkaCredentials) error {
	opts, err := k.AdminOpts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(k.Addr()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// One mechanism per request: the broker refuses a user twice in one
	// (DUPLICATE_RESOURCE).
	for mech, h := range map[int8]func() hash.Hash{1: sha256.New, 2: sha512.New} {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		salt := make([]byte, 16)
		_, _ = rand.Read(salt)
		const iterations = 8192
		salted, err := pbkdf2.Key(h, c[KafkaSluiceUser], salt, iterations, h().Size())
		if err != nil {
			return err
		}
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = KafkaSluiceUser, mech, iterations, salt, salted
		req.Upsertions = append(req.Upsertions, u)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("sandbox kafka %s: add SCRAM credentials: %w", k.Name, err)
		}
		for _, r := range resp.Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("sandbox kafka %s: add SCRAM credentials of %s: %w", k.Name, r.User, err)
			}
		}
	}
	return nil
}

// KafkaACL is one ACL to create: Principal (User:NAME) may do Operation
// on the resource.
type KafkaACL struct {
	Principal    string
	ResourceType kmsg.ACLResourceType        // kmsg.ACLResourceTypeTopic, ...Cluster, ...TransactionalId
	ResourceName string                      // kafka-cluster for the cluster
	Pattern      kmsg.ACLResourcePatternType // kmsg.ACLResourcePatternTypeLiteral or ...Prefixed
	Operation    kmsg.ACLOperation
}

// AddACLs creates ACLs (allow, from any host) as the super user.
func (k *KafkaInstance) AddACLs(ctx context.Context, acls ...KafkaACL) error {
	opts, err := k.AdminOpts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(k.Addr()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = a.ResourceType, a.ResourceName, a.Pattern
		if c.ResourcePatternType == 0 {
			c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		c.Principal, c.Host, c.Operation, c.PermissionType = a.Principal, "*", a.Operation, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("sandbox kafka %s: create ACLs: %w", k.Name, err)
	}
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("sandbox kafka %s: create ACL %+v: %w", k.Name, acls[i], err)
		}
	}
	return k.waitACLs(ctx, cl, req.Creations)
}

// waitACLs returns once the broker's authorizer holds every ACL created:
// in KRaft mode CreateAcls answers when the controller has committed
// them, and the broker applies them from the metadata log a little later,
// so a client right after could still be refused.
func (k *KafkaInstance) waitACLs(ctx context.Context, cl *kgo.Client, want []kmsg.CreateACLsRequestCreation) error {
	type key struct {
		rt        kmsg.ACLResourceType
		name      string
		principal string
		op        kmsg.ACLOperation
	}
	for {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("sandbox kafka %s: describe ACLs: %w", k.Name, err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("sandbox kafka %s: describe ACLs: %w", k.Name, err)
		}
		have := map[key]bool{}
		for _, r := range resp.Resources {
			for _, a := range r.ACLs {
				have[key{r.ResourceType, r.ResourceName, a.Principal, a.Operation}] = true
			}
		}
		missing := 0
		for _, c := range want {
			if !have[key{c.ResourceType, c.ResourceName, c.Principal, c.Operation}] {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox kafka %s: %d created ACLs not applied by the broker: %w", k.Name, missing, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeKeystore makes the TLS listener's certificate (makeCerts) and its
// PEM keystore: Kafka reads the key and the chain from one file
// (ssl.keystore.type=PEM, an unencrypted PKCS#8 key).
func (k *KafkaInstance) writeKeystore() error {
	dir := filepath.Join(k.Home, "tls")
	_, cert, key, err := makeCerts(dir, "sluice sandbox CA "+k.Name)
	if err != nil {
		return err
	}
	kb, err := os.ReadFile(key)
	if err != nil {
		return err
	}
	cb, err := os.ReadFile(cert)
	if err != nil {
		return err
	}
	return writePrivate(filepath.Join(dir, "keystore.pem"), append(kb, cb...))
}

// tlsProps adds the TLS listener to the listener lines: SSL, or SASL_SSL
// with the same logins as the SASL listener.
func tlsProps(k *KafkaInstance, lines []string) []string {
	proto := "SSL"
	if k.SASL {
		proto = "SASL_SSL"
	}
	addr := "TLS://127.0.0.1:" + strconv.Itoa(k.TLSPort)
	var out []string
	for _, l := range lines {
		switch key, _, _ := strings.Cut(l, "="); {
		case key == "listeners" || key == "advertised.listeners":
			l += "," + addr
		case key == "listener.security.protocol.map":
			l += ",TLS:" + proto
		case strings.HasPrefix(key, "listener.name.client.") && strings.HasSuffix(key, ".sasl.jaas.config"):
			// The TLS listener logs users in as the plain one does.
			out = append(out, "listener.name.tls."+strings.TrimPrefix(l, "listener.name.client."))
		}
		out = append(out, l)
	}
	return append(out,
		"ssl.keystore.type=PEM",
		"ssl.keystore.location="+filepath.Join(k.Home, "tls", "keystore.pem"),
		"ssl.client.auth=none")
}
