-- lanelib.lua: the pending lanes of a queue (broker.Broker.Fetch's doc),
-- prepended after lib.lua to the scripts that move tasks into or out of
-- pending or active (scripts.go). With P the queue's pending list:
--   P             tasks of priority 0 without a fair-sharing key
--   P:<p>         tasks of priority p (1-9; hash field P)
--   P:k:<key>     tasks of priority 0 with key <key> (hash field k)
--   P:keys        zset, score 0: the keys whose lane holds tasks (by name)
--   P:ring        zset: the rotation, member = key ('' for P), score =
--                 turn (the back has the highest)
--   P:wait        zset: keys out of the rotation until a rate token is
--                 due, score = that time (ms)
--   P:held        hash: key -> its active tasks (KeyMaxConcurrency)
--   P:b:<key>     string "<tokens>:<ms>": the key's rate bucket, PX until
--                 it is full again (absent: full)
-- A key with tasks is in exactly one of P:ring, P:wait, or held back by
-- KeyMaxConcurrency (in P:held). Fields of the settings hash: bit p of pl
-- is set while P:<p> may hold tasks (set by a push, cleared by fetch.lua
-- when it finds the list empty); kk is set while P:keys is not empty; kc,
-- kr, kb are KeyMaxConcurrency, KeyRateLimit, KeyRateBurst. So a fetch of
-- a queue with neither priorities nor keys reads two more fields of a hash
-- it reads anyway, and nothing else.

-- lane_of returns the list a pending task of priority prio (its P field)
-- and key key (its k field) waits in; nil for either means none.
local function lane_of(pending, prio, key)
  if prio then return pending .. ':' .. prio end
  if key then return pending .. ':k:' .. key end
  return pending
end

-- lane_fields appends to h, the fields of a new task's hash, those of its
-- priority prio and key key (nil: none): P, k, and, when it is pending
-- (since now), p.
local function lane_fields(h, prio, key, now)
  if prio then
    h[#h + 1] = 'P'
    h[#h + 1] = prio
  end
  if key then
    h[#h + 1] = 'k'
    h[#h + 1] = key
  end
  if now and (prio or key) then
    h[#h + 1] = 'p'
    h[#h + 1] = istr(now)
  end
end

-- ring_back puts member at the back of the rotation.
local function ring_back(pending, member)
  local ring = pending .. ':ring'
  local last = redis.call('ZRANGE', ring, -1, -1, 'WITHSCORES')
  redis.call('ZADD', ring, last[2] and tonumber(last[2]) + 1 or 1, member)
end

-- ring_join puts member ('' for the lane without a key) at the back of
-- the rotation unless it is in it; a key joining puts the lane without a
-- key first when that one holds tasks and is out.
local function ring_join(pending, member)
  local ring = pending .. ':ring'
  if redis.call('ZSCORE', ring, member) then return end
  if member ~= '' and not redis.call('ZSCORE', ring, '') and redis.call('LLEN', pending) > 0 then
    ring_back(pending, '')
  end
  ring_back(pending, member)
end

-- push_lane pushes task id of priority prio and key key (its P and k
-- fields) to the back of its lane, or with front to its head, and returns
-- the lane's new length (1: the lane was empty). A key's lane that got
-- its first task joins the rotation.
local function push_lane(pending, settings, id, prio, front, key)
  local cmd = 'LPUSH'
  if front then cmd = 'RPUSH' end
  if prio then
    local mask = tonumber(redis.call('HGET', settings, 'pl') or '0')
    local b = bit.lshift(1, tonumber(prio))
    if bit.band(mask, b) == 0 then redis.call('HSET', settings, 'pl', bit.bor(mask, b)) end
    return redis.call(cmd, pending .. ':' .. prio, id)
  end
  if key then
    local n = redis.call(cmd, pending .. ':k:' .. key, id)
    if n == 1 then
      redis.call('ZADD', pending .. ':keys', 0, key)
      redis.call('HSET', settings, 'kk', '1')
      ring_join(pending, key)
    end
    return n
  end
  return redis.call(cmd, pending, id)
end

-- push_task is push_lane for the task whose hash is tk.
local function push_task(pending, settings, tk, id, front)
  local f = task_get(tk, 'P', 'k')
  return push_lane(pending, settings, id, f[1], front, f[2])
end

-- lane_left is called when the lane of key (nil: the lane without a key)
-- has no task left: it leaves the rotation (and the waiting keys), and
-- with the last key the rotation is cleared.
local function lane_left(pending, settings, key)
  if not key then
    redis.call('ZREM', pending .. ':ring', '')
    return
  end
  redis.call('ZREM', pending .. ':ring', key)
  redis.call('ZREM', pending .. ':wait', key)
  redis.call('ZREM', pending .. ':keys', key)
  if redis.call('ZCARD', pending .. ':keys') == 0 then
    redis.call('DEL', pending .. ':ring')
    redis.call('HDEL', settings, 'kk')
  end
end

-- remove_pending takes pending task id (hash tk) out of its lane and
-- returns how many entries it removed (0: it was not there). An LREM:
-- O(lane).
local function remove_pending(pending, settings, tk, id)
  local f = task_get(tk, 'P', 'k')
  local l = lane_of(pending, f[1], f[2])
  local n = redis.call('LREM', l, -1, id)
  if n > 0 and not f[1] and redis.call('LLEN', l) == 0 then lane_left(pending, settings, f[2]) end
  return n
end

-- release_key frees a slot of key (one of its tasks left active) and
-- returns true when the key, held back by KeyMaxConcurrency with tasks
-- pending, rejoined the rotation.
local function release_key(pending, key)
  local held = pending .. ':held'
  if redis.call('HINCRBY', held, key, -1) <= 0 then redis.call('HDEL', held, key) end
  if redis.call('LLEN', pending .. ':k:' .. key) > 0 and not redis.call('ZSCORE', pending .. ':ring', key)
    and not redis.call('ZSCORE', pending .. ':wait', key) then
    ring_join(pending, key)
    return true
  end
  return false
end

-- pending_lists returns every pending list of a queue in list order: the
-- highest priority first, then P, then the keys' lanes by key.
local function pending_lists(pending)
  local out = {}
  for p = 9, 1, -1 do out[#out + 1] = pending .. ':' .. p end
  out[#out + 1] = pending
  for _, k in ipairs(redis.call('ZRANGE', pending .. ':keys', 0, -1)) do
    out[#out + 1] = pending .. ':k:' .. k
  end
  return out
end

-- pending_count returns how many tasks wait in the lanes of a queue.
local function pending_count(pending)
  local n = 0
  for _, l in ipairs(pending_lists(pending)) do n = n + redis.call('LLEN', l) end
  return n
end

-- pop_pending takes up to n pending tasks of a queue in list order out of
-- their lanes (for the bulk operations) and returns their IDs.
local function pop_pending(pending, settings, n)
  local ids = {}
  for _, l in ipairs(pending_lists(pending)) do
    if #ids >= n then break end
    local got = redis.call('RPOP', l, n - #ids)
    if got then
      for _, id in ipairs(got) do ids[#ids + 1] = id end
      if redis.call('LLEN', l) == 0 then
        local plen = string.len(pending)
        if l == pending then
          lane_left(pending, settings, nil)
        elseif string.sub(l, plen + 1, plen + 3) == ':k:' then
          lane_left(pending, settings, string.sub(l, plen + 4))
        end
      end
    end
  end
  return ids
end
