package kafka

import "context"

// RefusedTopic opens a client of cfg and asks which of topics its
// principal may not write (refusedTopic): the write path reaches it only
// when franz-go fails records of several topics with one refusal, which a
// test cannot arrange on purpose.
func RefusedTopic(ctx context.Context, cfg Config, topics []string) (string, error) {
	s, err := New(cfg)
	if err != nil {
		return "", err
	}
	if s.cl, err = s.newClient(); err != nil {
		return "", err
	}
	defer s.cl.Close()
	return s.refusedTopic(ctx, topics), nil
}
