package dtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Message topics, as dtm has them: a message step whose action is
// topic://NAME calls every URL subscribed to NAME when the message is
// prepared or submitted. Subscriptions live in the store's key-value table
// (category "topics", key the topic, value the subscribers as JSON), which
// dtm's scanKV and queryKV routes read.

// TopicPrefix marks a message step's action as a topic.
const TopicPrefix = "topic://"

// TopicsCat is the key-value category of topics.
const TopicsCat = "topics"

// KV is one key-value entry, as dtm's KVStore shows it.
type KV struct {
	ID         uint64     `json:"id,omitempty"`
	Cat        string     `json:"cat"`
	K          string     `json:"k"`
	V          string     `json:"v"`
	Version    uint64     `json:"version"`
	CreateTime *time.Time `json:"create_time,omitempty"`
	UpdateTime *time.Time `json:"update_time,omitempty"`
}

// KVStore is implemented by stores that keep dtm's key-value entries.
type KVStore interface {
	// KVGet returns the entry, or ErrNotFound.
	KVGet(ctx context.Context, cat, key string) (*KV, error)
	// KVList returns up to limit entries of cat (every category when cat is
	// empty) with key > after, in key order.
	KVList(ctx context.Context, cat, after string, limit int) ([]KV, error)
	// KVPut creates the entry when version is 0 (ErrExists if it exists),
	// or replaces the entry whose version is version (ErrConflict
	// otherwise), storing it with version+1. It is durable on return.
	KVPut(ctx context.Context, kv *KV, version uint64) error
	// KVDelete removes the entry, or returns ErrNotFound.
	KVDelete(ctx context.Context, cat, key string) error
}

// Subscriber is one URL subscribed to a topic.
type Subscriber struct {
	URL    string `json:"url"`
	Remark string `json:"remark"`
}

func (c *Coordinator) kv() (KVStore, error) {
	kv, ok := c.store.(KVStore)
	if !ok {
		return nil, fmt.Errorf("%w: this store keeps no topics", ErrBadRequest)
	}
	return kv, nil
}

// Subscribe adds url to topic, creating the topic.
func (c *Coordinator) Subscribe(ctx context.Context, topic, url, remark string) error {
	if topic == "" || url == "" {
		return fmt.Errorf("%w: empty topic or url", ErrBadRequest)
	}
	return c.updateTopic(ctx, topic, true, func(subs []Subscriber) ([]Subscriber, error) {
		for _, s := range subs {
			if s.URL == url {
				return nil, fmt.Errorf("%w: this url exists", ErrFailure)
			}
		}
		return append(subs, Subscriber{URL: url, Remark: remark}), nil
	})
}

// Unsubscribe removes url from topic.
func (c *Coordinator) Unsubscribe(ctx context.Context, topic, url string) error {
	if topic == "" || url == "" {
		return fmt.Errorf("%w: empty topic or url", ErrBadRequest)
	}
	return c.updateTopic(ctx, topic, false, func(subs []Subscriber) ([]Subscriber, error) {
		for i, s := range subs {
			if s.URL == url {
				return append(subs[:i:i], subs[i+1:]...), nil
			}
		}
		return nil, fmt.Errorf("%w: no such url", ErrFailure)
	})
}

// updateTopic applies f to topic's subscribers. Concurrent changes fail
// with ErrConflict, as in dtm (its clients retry).
func (c *Coordinator) updateTopic(ctx context.Context, topic string, create bool, f func([]Subscriber) ([]Subscriber, error)) error {
	kvs, err := c.kv()
	if err != nil {
		return err
	}
	cur, err := kvs.KVGet(ctx, TopicsCat, topic)
	var subs []Subscriber
	var version uint64
	switch {
	case errors.Is(err, ErrNotFound) && create:
		cur = &KV{Cat: TopicsCat, K: topic}
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%w: no such topic", ErrFailure)
	case err != nil:
		return err
	default:
		version = cur.Version
		if err := json.Unmarshal([]byte(cur.V), &subs); err != nil {
			return fmt.Errorf("topic %s: %w", topic, err)
		}
	}
	if subs, err = f(subs); err != nil {
		return err
	}
	v, _ := json.Marshal(subs)
	cur.V = string(v)
	err = kvs.KVPut(ctx, cur, version)
	if errors.Is(err, ErrExists) || errors.Is(err, ErrConflict) {
		return fmt.Errorf("%w: topic %s changed meanwhile; try again", ErrFailure, topic)
	}
	return err
}

// DeleteTopic removes a topic.
func (c *Coordinator) DeleteTopic(ctx context.Context, topic string) error {
	kvs, err := c.kv()
	if err != nil {
		return err
	}
	if err := kvs.KVDelete(ctx, TopicsCat, topic); errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: no such topic", ErrFailure)
	} else if err != nil {
		return err
	}
	return nil
}

// QueryKV returns the entry of cat and key, or every entry of cat when key
// is empty (none, not an error, when there is none).
func (c *Coordinator) QueryKV(ctx context.Context, cat, key string) ([]KV, error) {
	kvs, err := c.kv()
	if err != nil {
		return nil, err
	}
	if key == "" {
		return kvs.KVList(ctx, cat, "", 1<<30)
	}
	e, err := kvs.KVGet(ctx, cat, key)
	if errors.Is(err, ErrNotFound) {
		return []KV{}, nil
	}
	if err != nil {
		return nil, err
	}
	return []KV{*e}, nil
}

// ScanKV pages through cat's entries after position.
func (c *Coordinator) ScanKV(ctx context.Context, cat, position string, limit int) ([]KV, string, error) {
	kvs, err := c.kv()
	if err != nil {
		return nil, "", err
	}
	list, err := kvs.KVList(ctx, cat, position, limit)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(list) == limit && limit > 0 {
		next = list[len(list)-1].K
	}
	return list, next, nil
}

// expandTopics records, in each message step whose action is a topic, the
// URLs subscribed to it now (GenBranches makes one branch of each).
func (c *Coordinator) expandTopics(ctx context.Context, r *Request) error {
	if r.TransType != TypeMsg {
		return nil
	}
	for i, s := range r.Steps {
		name, ok := strings.CutPrefix(s[OpAction], TopicPrefix)
		if !ok {
			continue
		}
		e, err := c.QueryKV(ctx, TopicsCat, name)
		if err != nil {
			return err
		}
		var subs []Subscriber
		if len(e) > 0 {
			_ = json.Unmarshal([]byte(e[0].V), &subs)
		}
		if len(subs) == 0 {
			return fmt.Errorf("%w: step %d: topic not found: %s", ErrBadRequest, i+1, name)
		}
		urls := make([]string, len(subs))
		for j, sub := range subs {
			urls[j] = sub.URL
		}
		s[keySubscribers] = strings.Join(urls, "\n")
	}
	return nil
}

// keySubscribers holds, in a topic step, the URLs it was expanded to.
const keySubscribers = "subscribers"

// topicURLs is what a message step calls: its action, or the URLs its topic
// was expanded to.
func topicURLs(s map[string]string) []string {
	if strings.HasPrefix(s[OpAction], TopicPrefix) {
		if subs := s[keySubscribers]; subs != "" {
			return strings.Split(subs, "\n")
		}
	}
	return []string{s[OpAction]}
}
