package dtx

import (
	"net/url"
	"sync"
)

// parsedURLs keeps parsed branch URLs: a saga's few URLs are called by every
// transaction, and parsing them again for each call was a visible share
// of the coordinator's CPU. Callers copy the *url.URL before changing it.
type parsedURLs struct {
	mu sync.Mutex
	m  map[string]*url.URL
}

// maxParsedURLs bounds the cache; when full it starts over, so that a client
// sending ever new URLs costs parsing, not memory.
const maxParsedURLs = 4096

func (c *parsedURLs) get(s string) (*url.URL, error) {
	c.mu.Lock()
	u, ok := c.m[s]
	c.mu.Unlock()
	if ok {
		return u, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxParsedURLs {
		c.m = make(map[string]*url.URL)
	}
	c.m[s] = u
	c.mu.Unlock()
	return u, nil
}
