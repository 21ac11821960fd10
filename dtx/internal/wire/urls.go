package wire

import (
	"net/url"
	"sync"
)

// parsedURLs keeps parsed branch URLs: every transaction names the same few
// URLs, which CheckURL validates at submit and every branch call needs
// parsed, and parsing them again each time was a visible share of the
// coordinator's CPU. Callers copy the *url.URL before changing it.
type parsedURLs struct {
	mu  sync.RWMutex
	m   map[string]*url.URL
	max int // 0: maxParsedURLs
}

// maxParsedURLs bounds the cache; when full it starts over, so that a client
// sending ever new URLs costs parsing, not memory.
const maxParsedURLs = 4096

// branchURLs is the process's cache (branch URLs are not per coordinator).
var branchURLs parsedURLs

func (c *parsedURLs) lookup(s string) (*url.URL, bool) {
	c.mu.RLock()
	u, ok := c.m[s]
	c.mu.RUnlock()
	return u, ok
}

func (c *parsedURLs) has(s string) bool {
	_, ok := c.lookup(s)
	return ok
}

func (c *parsedURLs) add(s string, u *url.URL) {
	if len(s) > 2048 {
		return // not worth keeping; a long URL is rarely the same twice
	}
	limit := c.max
	if limit == 0 {
		limit = maxParsedURLs
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= limit {
		c.m = make(map[string]*url.URL, 64)
	}
	c.m[s] = u
	c.mu.Unlock()
}

// get returns s parsed, from the cache when it is there.
func (c *parsedURLs) get(s string) (*url.URL, error) {
	if u, ok := c.lookup(s); ok {
		return u, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	c.add(s, u)
	return u, nil
}
