-- fetch.lua: moves up to ARGV[2] pending tasks (oldest first) to active and
-- grants each a lease with a fresh token.
-- KEYS[1] pending list  KEYS[2] active zset  KEYS[3] leases hash
-- KEYS[4] paused flag   KEYS[5] task hash prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] max tasks  ARGV[3] lease ms
-- ARGV[4] token prefix ("<server ID>/<random>.", from the caller)
-- Returns {} when the queue is paused or empty, else
-- {deadline ms, id, token, m, n, e, f, id, token, m, n, e, f, ...}. The
-- i-th task's token is ARGV[4] .. i; the leases hash stores it with '+'
-- appended when the task has a unique key or a retention. An ID without a
-- task hash (never written by these scripts) is dropped from pending.
if redis.call('EXISTS', KEYS[4]) == 1 then return {} end
local ids = redis.call('RPOP', KEYS[1], ARGV[2])
if not ids then return {} end
local now = now_ms(ARGV[1])
local deadline = now + tonumber(ARGV[3])
local out = {deadline}
local zadd, lset = {}, {}
local n = 0
for _, id in ipairs(ids) do
  local tk = KEYS[5] .. id
  local f = redis.call('HMGET', tk, 'm', 'n', 'e', 'f', 'u', 'R')
  if f[1] then
    n = n + 1
    local tok = ARGV[4] .. n
    local held = tok
    if f[5] or f[6] then held = tok .. '+' end
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
end
return out
