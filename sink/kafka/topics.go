package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-db/sluice"
)

// ErrUnknownTopic: a topic the sink writes to does not exist and the sink
// may not create it.
var ErrUnknownTopic = errors.New("topic does not exist")

// ErrNotAuthorized: the broker refused the sink's principal (ACL).
var ErrNotAuthorized = errors.New("not authorized")

// ensureTopic makes sure topic exists: it asks the broker, and creates it
// (when allowed) with the given configs. Known topics are cached.
func (s *Sink) ensureTopic(ctx context.Context, topic string, partitions int32, configs map[string]string) error {
	if s.topics[topic] {
		return nil
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return s.brokerErr("read the metadata of topic "+topic, err)
	}
	code := int16(0)
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic {
			code = t.ErrorCode
		}
	}
	switch err := kerr.ErrorForCode(code); {
	case err == nil:
		s.topics[topic] = true
		return nil
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return s.authErr(topic, "DESCRIBE", err)
	case !errors.Is(err, kerr.UnknownTopicOrPartition):
		return s.brokerErr("read the metadata of topic "+topic, err)
	}
	if !s.cfg.CreateTopics {
		return &sluice.Error{Op: "kafka sink: write to topic " + topic, Err: fmt.Errorf("%w on %s", ErrUnknownTopic, s.cfg.Brokers[0]),
			Hint: "create it (kafka-topics.sh --create --topic " + topic + "), or set sink.kafka.create-topics: true"}
	}
	creq := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic = topic
	ct.NumPartitions = partitions
	ct.ReplicationFactor = -1 // the broker's default.replication.factor
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		ct.Configs = append(ct.Configs, c)
	}
	creq.Topics = append(creq.Topics, ct)
	creq.TimeoutMillis = 30000
	cresp, err := creq.RequestWith(ctx, s.cl)
	if err != nil {
		return s.brokerErr("create topic "+topic, err)
	}
	for _, t := range cresp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
		case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
			return &sluice.Error{Op: "kafka sink: create topic " + topic, Err: fmt.Errorf("%w: %v", ErrNotAuthorized, err),
				Hint: "create the topic beforehand, or grant CREATE on it to sluice's principal (kafka-acls.sh --add --operation Create)"}
		default:
			return s.brokerErr("create topic "+topic, err)
		}
	}
	s.topics[topic] = true
	return nil
}

// authErr is a topic's refusal of op: the sink needs WRITE and DESCRIBE
// on every topic it writes.
func (s *Sink) authErr(topic, op string, err error) error {
	return &sluice.Error{Op: "kafka sink: write to topic " + topic, Err: fmt.Errorf("%w: %s may not %s it: %v", ErrNotAuthorized, s.principal(), op, err),
		Hint: "grant it: kafka-acls.sh --bootstrap-server " + s.cfg.Brokers[0] + " --add --allow-principal " + s.principal() + " --operation Write --operation Describe --topic " + topic}
}

// refusedTopic asks the broker which of topics the sink's principal may
// not WRITE (the operations the broker authorizes, KIP-430), and returns
// the first such one in sorted order, or "" when the broker does not say.
func (s *Sink) refusedTopic(ctx context.Context, topics []string) string {
	sort.Strings(topics)
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.IncludeTopicAuthorizedOperations = true
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(mctx, s.cl)
	if err != nil {
		return ""
	}
	mayWrite := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 && t.AuthorizedOperations != math.MinInt32 {
			mayWrite[*t.Topic] = t.AuthorizedOperations&(1<<int(kmsg.ACLOperationWrite)) != 0
		} else if t.Topic != nil && errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.TopicAuthorizationFailed) {
			mayWrite[*t.Topic] = false
		}
	}
	for _, t := range topics {
		if w, ok := mayWrite[t]; ok && !w {
			return t
		}
	}
	return ""
}

// principal is the sink's Kafka principal as ACLs name it.
func (s *Sink) principal() string {
	if s.cfg.SASL != nil {
		return "User:" + s.cfg.SASL.User
	}
	return "User:ANONYMOUS"
}

// brokerErr names what failed and, for the errors a user fixes, how.
func (s *Sink) brokerErr(op string, err error) error {
	var se *sluice.Error
	if errors.As(err, &se) {
		return err
	}
	var verr *tls.CertificateVerificationError
	var herr x509.HostnameError
	switch {
	case errors.As(err, &verr), errors.As(err, &herr):
		// Not a broker that is away: no retry makes the certificate
		// valid.
		return &sluice.Error{Op: "kafka sink: " + op, Err: fmt.Errorf("%w: the TLS certificate of the brokers %v: %v", sluice.ErrConfig, s.cfg.Brokers, err),
			Hint: "set sink.kafka.tls.ca to the CA that signed the brokers' certificates, and list the brokers by a name or address their certificates carry (or tls.mode: verify-ca)"}
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		user, mech := "", ""
		if s.cfg.SASL != nil {
			user, mech = s.cfg.SASL.User, s.cfg.SASL.Mechanism
		}
		return &sluice.Error{Op: "kafka sink: " + op, Err: fmt.Errorf("%w for user %q (%s) on %v: %v", ErrNotAuthenticated, user, mech, s.cfg.Brokers, err),
			Hint: "check sink.kafka.sasl: the user, its password (${VAR} from the environment) and a mechanism the listener enables (sasl.enabled.mechanisms)"}
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return &sluice.Error{Op: "kafka sink: " + op, Err: fmt.Errorf("%w: %v", ErrNotAuthorized, err),
			Hint: "grant WRITE and DESCRIBE on the sink's topics to sluice's principal (kafka-acls.sh --add --operation Write --topic ...)"}
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return &sluice.Error{Op: "kafka sink: " + op, Err: fmt.Errorf("%w: %s may not WRITE transactional id %s: %v", ErrNotAuthorized, s.principal(), s.cfg.TransactionalID(), err),
			Hint: "grant it: kafka-acls.sh --bootstrap-server " + s.cfg.Brokers[0] + " --add --allow-principal " + s.principal() + " --operation Write --operation Describe --transactional-id " + s.cfg.TransactionalID()}
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return &sluice.Error{Op: "kafka sink: " + op, Err: fmt.Errorf("%w: %s may not IDEMPOTENT_WRITE on the cluster: %v", ErrNotAuthorized, s.principal(), err),
			Hint: "grant it: kafka-acls.sh --bootstrap-server " + s.cfg.Brokers[0] + " --add --allow-principal " + s.principal() + " --operation IdempotentWrite --cluster"}
	case errors.Is(err, kerr.ProducerFenced):
		// Only a fence is final: INVALID_PRODUCER_EPOCH may follow a
		// broker restart, and a restart of the sink (a new epoch) heals it.
		return &sluice.Error{Op: "kafka sink: " + op, Err: fmt.Errorf("%w: %v", ErrFenced, err),
			Hint: "another sluice runs task " + s.cfg.Task + " (same transactional id " + s.cfg.TransactionalID() + "); stop one of them"}
	case errors.Is(err, kgo.ErrMaxBuffered):
		return fmt.Errorf("kafka sink: %s: %w", op, err)
	}
	return fmt.Errorf("kafka sink: %s on %v: %w", op, s.cfg.Brokers, err)
}

// ErrFenced: a newer producer of the same task took the transactional id
// over; this one must stop.
var ErrFenced = errors.New("fenced by a newer sluice of the same task")

// ErrNotAuthenticated: the brokers refused the sink's SASL login.
var ErrNotAuthenticated = errors.New("SASL authentication failed")

// connOpts are the options of every client of the sink: the brokers and
// the login.
func (s *Sink) connOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}
	if a := s.cfg.SASL; a != nil {
		var m sasl.Mechanism
		switch a.Mechanism {
		case SASLScramSHA256:
			m = scram.Auth{User: a.User, Pass: string(a.Password)}.AsSha256Mechanism()
		case SASLScramSHA512:
			m = scram.Auth{User: a.User, Pass: string(a.Password)}.AsSha512Mechanism()
		default:
			m = plain.Auth{User: a.User, Pass: string(a.Password)}.AsMechanism()
		}
		opts = append(opts, kgo.SASL(m))
	}
	if s.cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(s.cfg.TLS.Clone()))
	}
	return opts
}
