package verify

import "github.com/sluice-db/sluice"

// SetHook lets tests act at fixed points of a chunk's check
// ("recheck", "drill"), so races with writers are deterministic.
func SetHook(c *Config, f func(point string, source sluice.TableRef, chunk int)) { c.hook = f }
