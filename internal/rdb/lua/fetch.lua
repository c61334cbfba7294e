-- fetch.lua: moves up to ARGV[2] pending tasks (oldest first) to active and
-- grants each a lease with a fresh token, within the queue's settings.
-- KEYS[1] pending list  KEYS[2] active zset  KEYS[3] leases hash
-- KEYS[4] paused flag   KEYS[5] task hash prefix  KEYS[6] settings hash
-- KEYS[7] event log (stream)
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] max tasks  ARGV[3] lease ms
-- ARGV[4] token prefix ("<server ID>/<random>.", from the caller)
-- ARGV[5] event log length ('0' = off)
-- Returns {} when the queue is paused or empty; {-1, retry-in ms} when the
-- settings (max concurrency, rate limit) allow no task now; else
-- {deadline ms, lease ms, id, token, m, n, e, f, id, token, ...}. The
-- i-th task's token is ARGV[4] .. i; the leases hash stores it with '+'
-- appended when the task has a unique key or a retention or is watched.
-- An ID without a
-- task hash (never written by these scripts) is dropped from pending.
-- The tasks' starts are logged in one entry (log_events).
-- Settings (hash fields, settings.lua writes them): mc max concurrency,
-- rl rate (tasks/s), rb burst, ld lease ms; tk, tt the rate limit's token
-- bucket (tokens at time tt ms).
if redis.call('EXISTS', KEYS[4]) == 1 then return {} end
local max = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local cfg = redis.call('HMGET', KEYS[6], 'mc', 'rl', 'rb', 'ld', 'tk', 'tt')
local now, tokens
if cfg[1] or cfg[2] or cfg[4] then
  if cfg[4] then lease = tonumber(cfg[4]) end
  if cfg[1] then
    local room = tonumber(cfg[1]) - redis.call('HLEN', KEYS[3])
    if room <= 0 then
      if redis.call('LLEN', KEYS[1]) == 0 then return {} end
      return {-1, 100}
    end
    if room < max then max = room end
  end
  if cfg[2] then
    local rate = tonumber(cfg[2])
    local burst = math.max(tonumber(cfg[3] or '1'), 1)
    now = now_ms(ARGV[1])
    tokens = burst
    if cfg[5] and cfg[6] then
      tokens = math.min(burst, tonumber(cfg[5]) + math.max(0, now - tonumber(cfg[6])) * rate / 1000)
    end
    if tokens < 1 then
      if redis.call('LLEN', KEYS[1]) == 0 then return {} end
      return {-1, math.max(1, math.ceil((1 - tokens) * 1000 / rate))}
    end
    if math.floor(tokens) < max then max = math.floor(tokens) end
  end
end
local ids = redis.call('RPOP', KEYS[1], max)
if not ids then return {} end
now = now or now_ms(ARGV[1])
local deadline = now + lease
local out = {deadline, lease}
local zadd, lset = {}, {}
local n = 0
for _, id in ipairs(ids) do
  local tk = KEYS[5] .. id
  local f = redis.call('HMGET', tk, 'm', 'n', 'e', 'f', 'u', 'R', 'w')
  if f[1] then
    n = n + 1
    local tok = ARGV[4] .. n
    local held = tok
    if f[5] or f[6] or f[7] then held = tok .. '+' end
    zadd[#zadd + 1] = deadline
    zadd[#zadd + 1] = id
    lset[#lset + 1] = id
    lset[#lset + 1] = held
    out[#out + 1] = id
    out[#out + 1] = tok
    out[#out + 1] = f[1]
    out[#out + 1] = f[2]
    out[#out + 1] = f[3]
    out[#out + 1] = f[4]
  end
end
if n > 0 then
  call_many('ZADD', KEYS[2], zadd)
  call_many('HSET', KEYS[3], lset)
  local started = {}
  for i = 1, #lset, 2 do started[#started + 1] = lset[i] end
  log_events(KEYS[7], ARGV[5], ARGV[1], 's', started, string.rep('1', n))
end
if tokens then
  redis.call('HSET', KEYS[6], 'tk', string.format('%.17g', tokens - n), 'tt', istr(now))
end
return out
