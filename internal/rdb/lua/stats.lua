-- stats.lua: reads the sizes, counters and settings of one queue, in
-- O(groups + aggregation sets) whatever the number of tasks. Its one write:
-- the task at the head of each pending lane gets its p field (when it
-- became pending) if it has none, as a plain enqueue does not write it
-- (that would cost every enqueue a field), so its age counts from the
-- first look. The oldest pending task is the oldest of those heads.
-- KEYS[1] pending list (and its lanes, lanelib.lua)  KEYS[2] active zset  KEYS[3] leases hash
-- KEYS[4] scheduled zset  KEYS[5] retry zset  KEYS[6] archived zset
-- KEYS[7] completed zset  KEYS[8] groups set  KEYS[9] group zset prefix
-- KEYS[10] aggregation sets zset  KEYS[11] aggregation set prefix
-- KEYS[12] processed counter  KEYS[13] failed counter  KEYS[14] paused flag
-- KEYS[15] settings hash  KEYS[16] task key prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] MEMORY USAGE samples (0: do
-- not measure memory)
-- Returns {now ms, pending, active, scheduled, retry, archived, completed,
-- aggregating, groups, processed today, failed today, processed total,
-- failed total, oldest pending since ms (0: none), paused (0/1),
-- max concurrency, rate limit, rate burst, lease ms (each false when
-- unset), memory bytes (-1: not measured), exists (0/1: any key of the
-- queue exists), key max concurrency, key rate limit, key rate burst
-- (each false when unset)}.
local now = now_ms(ARGV[1])
local function num(v) return tonumber(v or '0') end
local day = ':' .. istr(math.floor(now / 86400000))
local lists = pending_lists(KEYS[1])
local pending = 0
for _, l in ipairs(lists) do pending = pending + redis.call('LLEN', l) end
local active = redis.call('HLEN', KEYS[3])
local counts = {}
for i = 4, 7 do counts[#counts + 1] = redis.call('ZCARD', KEYS[i]) end
local groups = redis.call('SMEMBERS', KEYS[8])
local aggregating = 0
for _, g in ipairs(groups) do
  aggregating = aggregating + redis.call('ZCARD', KEYS[9] .. g)
end
local sets = redis.call('ZRANGE', KEYS[10], 0, -1)
for _, s in ipairs(sets) do
  -- Two fields of a set are its token and group; the others are tasks.
  aggregating = aggregating + math.max(redis.call('HLEN', KEYS[11] .. s) - 2, 0)
end
local oldest = 0
local head
for _, l in ipairs(lists) do
  local h = redis.call('LINDEX', l, -1)
  if h then
    head = head or h
    local tk = KEYS[16] .. h
    local f = task_get(tk, 'p', 'm')
    local since = tonumber(f[1])
    if not since then
      since = now
      if f[2] then
        task_hash(tk)
        redis.call('HSET', tk, 'p', istr(now))
      end
    end
    if oldest == 0 or since < oldest then oldest = since end
  end
end
local st = redis.call('HMGET', KEYS[15], 'mc', 'rl', 'rb', 'ld', 'kc', 'kr', 'kb')
local mem = -1
local samples = tonumber(ARGV[2])
if samples > 0 then
  mem = 0
  local function usage(k)
    return redis.call('MEMORY', 'USAGE', k, 'SAMPLES', samples) or 0
  end
  for i = 1, 15 do
    if i ~= 9 and i ~= 11 then mem = mem + usage(KEYS[i]) end
  end
  for i = 1, #lists - 1 do mem = mem + usage(lists[i]) end
  for _, g in ipairs(groups) do mem = mem + usage(KEYS[9] .. g) end
  for _, s in ipairs(sets) do mem = mem + usage(KEYS[11] .. s) end
  -- Task hashes: the average of a few, times the number of tasks.
  local ids = {}
  local function sample(id)
    if id then ids[#ids + 1] = id end
  end
  sample(head)
  sample(redis.call('LINDEX', KEYS[1], 0))
  for i = 4, 7 do sample(redis.call('ZRANGE', KEYS[i], 0, 0)[1]) end
  local a = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if a and string.byte(a, 1) ~= 2 then sample(a) end -- a lease group's member names no task
  local sum, n = 0, 0
  for _, id in ipairs(ids) do
    local u = redis.call('MEMORY', 'USAGE', KEYS[16] .. id)
    if u then
      sum = sum + u
      n = n + 1
    end
  end
  local total = pending + active + counts[1] + counts[2] + counts[3] + counts[4] + aggregating
  if n > 0 then mem = mem + math.floor(sum / n * total) end
end
local exists = redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7],
  KEYS[8], KEYS[10], KEYS[12], KEYS[13], KEYS[14], KEYS[15])
return {now, pending, active, counts[1], counts[2], counts[3], counts[4], aggregating, #groups,
  num(redis.call('GET', KEYS[12] .. day)), num(redis.call('GET', KEYS[13] .. day)),
  num(redis.call('GET', KEYS[12])), num(redis.call('GET', KEYS[13])),
  oldest, redis.call('EXISTS', KEYS[14]), st[1], st[2], st[3], st[4], mem, math.min(exists, 1), st[5], st[6], st[7]}
