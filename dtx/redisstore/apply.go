package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-db/sluice/dtx"
)

// applyScript applies a batch of mutations in order, each judged against
// the state the ones before it left, and returns one outcome per mutation:
// "" applied, "E" exists, "N" not found, "S"+status a status precondition
// failed, "O"+status an owner precondition failed.
//
// ARGV: prefix, batch id, then the number of mutations and, for each:
// kind ("C" create, "U" update), gid, the number of IfStatus and each,
// IfOwner, "1" and status, type, owner, lease (ns), due score ("": none),
// finish score ("": none), "1" when the type keeps its branches
// (dtx.KeepsBranches), document when there is a new row (else "0"),
// the number of new branches and for each its key and JSON, the number of
// branch updates and for each its field and value.
//
// A batch that applied anything stores its outcome under r:ID for a
// minute, in the same script: a retry after a lost reply (the server
// restarted, the connection was cut) gets the outcome instead of running
// the batch twice. Redis writes a script's effects to its append-only file
// as one MULTI/EXEC, so a crash keeps all of a batch or none of it.
var applyScript = redis.NewScript(`
local P = ARGV[1]
local rk = P .. 'r:' .. ARGV[2]
local done = redis.call('GET', rk)
if done then return cjson.decode(done) end
local i = 3
local function nx() local v = ARGV[i]; i = i + 1; return v end
local out = {}
local applied = false
local n = tonumber(nx())
for m = 1, n do
  local kind, gid = nx(), nx()
  local nif = tonumber(nx())
  local ifs = {}
  for _ = 1, nif do ifs[nx()] = true end
  local ifowner = nx()
  local hasG = nx() == '1'
  local s, t, o, l, due, fin, kb, doc
  if hasG then s, t, o, l, due, fin, kb, doc = nx(), nx(), nx(), nx(), nx(), nx(), nx(), nx() end
  local nbs = {}
  for j = 1, tonumber(nx()) do nbs[j] = {nx(), nx()} end
  local bus = {}
  for j = 1, tonumber(nx()) do bus[j] = {nx(), nx()} end
  local gk = P .. 'g:' .. gid
  local cur = redis.call('HMGET', gk, 's', 'o', 'r')
  local res = ''
  if kind == 'C' then
    if cur[1] then res = 'E' end
  elseif not cur[1] then
    res = 'N'
  elseif nif > 0 and not ifs[cur[1]] then
    res = 'S' .. cur[1]
  elseif ifowner ~= '' and cur[2] ~= ifowner then
    res = 'O' .. cur[1]
  end
  if res == '' then
    applied = true
    if hasG then
      redis.call('HSET', gk, 's', s, 't', t, 'o', o, 'l', l, 'r', kb, 'd', doc)
      if due == '' then redis.call('ZREM', P .. 'due', gid) else redis.call('ZADD', P .. 'due', due, gid) end
      if fin == '' then redis.call('ZREM', P .. 'fin', gid) else redis.call('ZADD', P .. 'fin', fin, gid) end
      if kind == 'C' then redis.call('ZADD', P .. 'all', '0', gid) end
    end
    if hasG then cur[3] = kb end
    if #nbs > 0 and cur[3] == '1' then
      for _, b in ipairs(nbs) do
        if redis.call('SADD', P .. 'k:' .. gid, b[1]) == 1 then
          redis.call('RPUSH', P .. 'b:' .. gid, b[2])
        end
      end
    end
    for _, u in ipairs(bus) do
      redis.call('HSET', P .. 'u:' .. gid, u[1], u[2])
    end
  end
  out[m] = res
end
if applied then redis.call('SET', rk, cjson.encode(out), 'PX', '60000') end
return out
`)

// Apply applies a batch in one script (see applyScript). Branch updates
// that the new transaction row already records (the coordinator records
// every one there) are not written twice.
func (s *Store) Apply(ctx context.Context, muts []*dtx.Mutation) ([]error, error) {
	if len(muts) == 0 {
		return nil, nil
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	args := make([]any, 0, 3+12*len(muts))
	args = append(args, s.prefix, hex.EncodeToString(id[:]), strconv.Itoa(len(muts)))
	now := time.Now().UTC()
	for _, m := range muts {
		if m.Create && m.Global == nil {
			return nil, fmt.Errorf("dtx redis store: create of %s without a transaction", m.Gid)
		}
		kind := "U"
		if m.Create {
			kind = "C"
		}
		args = append(args, kind, m.Gid, strconv.Itoa(len(m.IfStatus)))
		for _, st := range m.IfStatus {
			args = append(args, st)
		}
		args = append(args, m.IfOwner)
		if g := m.Global; g != nil {
			doc, err := json.Marshal(g)
			if err != nil {
				return nil, fmt.Errorf("dtx redis store: encode %s: %w", m.Gid, err)
			}
			due, fin := scores(g)
			keeps := "0"
			if dtx.KeepsBranches(g.TransType) {
				keeps = "1"
			}
			args = append(args, "1", g.Status, g.TransType, g.Owner, ns(g.LeaseUntil), due, fin, keeps, doc)
		} else {
			args = append(args, "0")
		}
		// A saga's and a message's branches are derived from its steps:
		// only a type that keeps its branches needs them sent.
		if len(m.NewBranches) > 0 && (m.Global == nil || dtx.KeepsBranches(m.Global.TransType)) {
			args = append(args, strconv.Itoa(len(m.NewBranches)))
			for _, b := range m.NewBranches {
				b.CreateTime = now
				enc, err := json.Marshal(&b)
				if err != nil {
					return nil, fmt.Errorf("dtx redis store: encode a branch of %s: %w", m.Gid, err)
				}
				args = append(args, dtx.BranchKey(b.BranchID, b.Op), enc)
			}
		} else {
			args = append(args, "0")
		}
		var ups []any
		for _, u := range m.BranchUpdates {
			if m.Global != nil {
				if st, ok := m.Global.BranchStatus[dtx.BranchKey(u.BranchID, u.Op)]; ok && st.Status == u.Status && st.FinishTime.Equal(u.FinishTime) {
					continue
				}
			}
			ups = append(ups, updateKey(u.BranchID, u.Op), u.Status+"\x00"+ns(u.FinishTime))
		}
		args = append(args, strconv.Itoa(len(ups)/2))
		args = append(args, ups...)
	}
	v, err := s.run(ctx, applyScript, true, args...)
	if err != nil {
		return nil, s.wrap(err)
	}
	r, ok := v.([]any)
	if !ok || len(r) != len(muts) {
		// An empty Lua table comes back from cjson as an object: never for
		// a batch of one or more.
		return nil, s.wrap(fmt.Errorf("apply: unexpected reply %v", v))
	}
	errs := make([]error, len(muts))
	for i, o := range r {
		str, _ := o.(string)
		switch {
		case str == "":
		case str == "E":
			errs[i] = dtx.ErrExists
		case str == "N":
			errs[i] = dtx.ErrNotFound
		case str[0] == 'S':
			errs[i] = &dtx.ConflictError{Gid: muts[i].Gid, Status: str[1:]}
		case str[0] == 'O':
			errs[i] = &dtx.ConflictError{Gid: muts[i].Gid, Status: str[1:], LostLease: true}
		default:
			return nil, s.wrap(errors.New("apply: unexpected outcome " + strconv.Quote(str)))
		}
	}
	return errs, nil
}
