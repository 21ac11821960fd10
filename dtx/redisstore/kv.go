package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-db/sluice/dtx"
)

// dtm's key-value entries (topics): one hash each, kv:CAT\0KEY with
// fields i (id), c, k, v, n (version), ct and ut (unix ns); kvc:CAT orders
// a category's keys and kva every entry by KEY\0CAT (score 0 both).

func (s *Store) kvKey(cat, key string) string { return s.prefix + "kv:" + cat + "\x00" + key }

var kvFields = []string{"i", "c", "k", "v", "n", "ct", "ut"}

func kvFrom(f []any) (dtx.KV, bool) {
	str := func(i int) string { v, _ := f[i].(string); return v }
	if len(f) < len(kvFields) || f[0] == nil {
		return dtx.KV{}, false
	}
	kv := dtx.KV{Cat: str(1), K: str(2), V: str(3)}
	kv.ID, _ = strconv.ParseUint(str(0), 10, 64)
	kv.Version, _ = strconv.ParseUint(str(4), 10, 64)
	ct, ut := fromNS(str(5)), fromNS(str(6))
	kv.CreateTime, kv.UpdateTime = &ct, &ut
	return kv, true
}

// KVGet implements dtx.KVStore.
func (s *Store) KVGet(ctx context.Context, cat, key string) (*dtx.KV, error) {
	f, err := s.c.HMGet(ctx, s.kvKey(cat, key), kvFields...).Result()
	if err != nil {
		return nil, s.wrap(err)
	}
	kv, ok := kvFrom(f)
	if !ok {
		return nil, dtx.ErrNotFound
	}
	return &kv, nil
}

// kvListScript returns the fields of up to ARGV[4] entries with key >
// ARGV[3], of category ARGV[2] ("": all, ordered by key then category).
var kvListScript = redis.NewScript(`
local P, cat, after = ARGV[1], ARGV[2], ARGV[3]
local ids
if cat ~= '' then
  ids = redis.call('ZRANGEBYLEX', P .. 'kvc:' .. cat, '(' .. after, '+', 'LIMIT', '0', ARGV[4])
else
  -- "KEY\0CAT" > after for every KEY > after (keys hold no NUL byte)
  ids = redis.call('ZRANGEBYLEX', P .. 'kva', '[' .. after .. '\1', '+', 'LIMIT', '0', ARGV[4])
end
local out = {}
for _, id in ipairs(ids) do
  local k, c = id, cat
  if cat == '' then
    local z = string.find(id, '\0', 1, true)
    k, c = string.sub(id, 1, z - 1), string.sub(id, z + 1)
  end
  local f = redis.call('HMGET', P .. 'kv:' .. c .. '\0' .. k, 'i', 'c', 'k', 'v', 'n', 'ct', 'ut')
  if f[1] then
    for _, v in ipairs(f) do out[#out + 1] = v end
  end
end
return out
`)

// KVList implements dtx.KVStore.
func (s *Store) KVList(ctx context.Context, cat, after string, limit int) ([]dtx.KV, error) {
	out := []dtx.KV{}
	if limit <= 0 {
		return out, nil
	}
	v, err := s.run(ctx, kvListScript, true, s.prefix, cat, after, strconv.Itoa(limit))
	if err != nil {
		return nil, s.wrap(err)
	}
	f, _ := v.([]any)
	n := len(kvFields)
	for i := 0; i+n <= len(f); i += n {
		if kv, ok := kvFrom(f[i : i+n]); ok {
			out = append(out, kv)
		}
	}
	return out, nil
}

// kvPutScript creates (ARGV[5] "0") or replaces at version ARGV[5] the
// entry ARGV[2], ARGV[3] with value ARGV[4] and version ARGV[6], at time
// ARGV[7] (ns). It returns {"", id, create time}, {"E"} or {"C"}.
var kvPutScript = redis.NewScript(`
local P, cat, key = ARGV[1], ARGV[2], ARGV[3]
local kk = P .. 'kv:' .. cat .. '\0' .. key
local cur = redis.call('HMGET', kk, 'n', 'i', 'ct')
if ARGV[5] == '0' then
  if cur[1] then return {'E'} end
  local id = tostring(redis.call('INCR', P .. 'kvseq'))
  redis.call('HSET', kk, 'i', id, 'c', cat, 'k', key, 'v', ARGV[4], 'n', ARGV[6], 'ct', ARGV[7], 'ut', ARGV[7])
  redis.call('ZADD', P .. 'kvc:' .. cat, '0', key)
  redis.call('ZADD', P .. 'kva', '0', key .. '\0' .. cat)
  return {'', id, ARGV[7]}
end
if cur[1] ~= ARGV[5] then return {'C'} end
redis.call('HSET', kk, 'v', ARGV[4], 'n', ARGV[6], 'ut', ARGV[7])
return {'', cur[2], cur[3]}
`)

// KVPut implements dtx.KVStore.
func (s *Store) KVPut(ctx context.Context, kv *dtx.KV, version uint64) error {
	now := time.Now().UTC()
	// Not retried: a create or update whose reply was lost would be judged
	// again against its own write.
	v, err := s.run(ctx, kvPutScript, false, s.prefix, kv.Cat, kv.K, kv.V, strconv.FormatUint(version, 10), strconv.FormatUint(version+1, 10), ns(now))
	if err != nil {
		return s.wrap(err)
	}
	r, _ := v.([]any)
	if len(r) == 0 {
		return s.wrap(fmt.Errorf("kv put: unexpected reply %v", v))
	}
	switch r[0] {
	case "E":
		return dtx.ErrExists
	case "C":
		return dtx.ErrConflict
	}
	if len(r) != 3 {
		return s.wrap(fmt.Errorf("kv put: unexpected reply %v", v))
	}
	id, _ := r[1].(string)
	ct, _ := r[2].(string)
	kv.ID, _ = strconv.ParseUint(id, 10, 64)
	c := fromNS(ct)
	kv.CreateTime, kv.UpdateTime, kv.Version = &c, &now, version+1
	return nil
}

var kvDeleteScript = redis.NewScript(`
local P, cat, key = ARGV[1], ARGV[2], ARGV[3]
if redis.call('DEL', P .. 'kv:' .. cat .. '\0' .. key) == 0 then return 0 end
redis.call('ZREM', P .. 'kvc:' .. cat, key)
redis.call('ZREM', P .. 'kva', key .. '\0' .. cat)
return 1
`)

// KVDelete implements dtx.KVStore.
func (s *Store) KVDelete(ctx context.Context, cat, key string) error {
	v, err := s.run(ctx, kvDeleteScript, false, s.prefix, cat, key)
	if err != nil {
		return s.wrap(err)
	}
	if n, _ := v.(int64); n == 0 {
		return dtx.ErrNotFound
	}
	return nil
}
