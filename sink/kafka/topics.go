package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
		return authErr(topic, err)
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

func authErr(topic string, err error) error {
	return &sluice.Error{Op: "kafka sink: write to topic " + topic, Err: fmt.Errorf("%w: %v", ErrNotAuthorized, err),
		Hint: "grant WRITE and DESCRIBE on the topic to sluice's principal (kafka-acls.sh --add --operation Write --operation Describe --topic " + topic + ")"}
}

// brokerErr names what failed and, for the errors a user fixes, how.
func (s *Sink) brokerErr(op string, err error) error {
	var se *sluice.Error
	if errors.As(err, &se) {
		return err
	}
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return &sluice.Error{Op: "kafka sink: " + op, Err: fmt.Errorf("%w: %v", ErrNotAuthorized, err),
			Hint: "grant WRITE and DESCRIBE on the sink's topics to sluice's principal (kafka-acls.sh --add --operation Write --topic ...)"}
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return &sluice.Error{Op: "kafka sink: " + op, Err: fmt.Errorf("%w: %v", ErrNotAuthorized, err),
			Hint: "grant WRITE and DESCRIBE on transactional id " + s.cfg.TransactionalID() + " to sluice's principal (kafka-acls.sh --add --operation Write --transactional-id " + s.cfg.TransactionalID() + ")"}
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return &sluice.Error{Op: "kafka sink: " + op, Err: fmt.Errorf("%w: %v", ErrNotAuthorized, err),
			Hint: "grant IDEMPOTENT_WRITE on the cluster to sluice's principal"}
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
