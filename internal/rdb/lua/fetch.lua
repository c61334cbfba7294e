-- fetch.lua: moves up to ARGV[2] pending tasks (oldest first) to active and
-- grants each a lease with a fresh token.
-- KEYS[1] pending list  KEYS[2] active zset  KEYS[3] paused flag
-- KEYS[4] task hash prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] max tasks  ARGV[3] lease ms
-- ARGV[4] token prefix (random, from the caller)  ARGV[5] server ID
-- Returns {} when the queue is paused or empty, else
-- {deadline ms, id, m, n, e, f, id, m, n, e, f, ...}; the i-th task's
-- token is ARGV[4] .. i. An ID without a task hash (never written by these
-- scripts) is dropped from pending.
if redis.call('EXISTS', KEYS[3]) == 1 then return {} end
local ids = redis.call('RPOP', KEYS[1], ARGV[2])
if not ids then return {} end
local now = now_ms(ARGV[1])
local deadline = now + tonumber(ARGV[3])
local out = {deadline}
local n = 0
for _, id in ipairs(ids) do
  local tk = KEYS[4] .. id
  local f = redis.call('HMGET', tk, 'm', 'n', 'e', 'f')
  if f[1] then
    n = n + 1
    redis.call('HSET', tk, 's', '1', 'k', ARGV[4] .. n, 'w', ARGV[5])
    redis.call('ZADD', KEYS[2], deadline, id)
    out[#out + 1] = id
    out[#out + 1] = f[1]
    out[#out + 1] = f[2]
    out[#out + 1] = f[3]
    out[#out + 1] = f[4]
  end
end
return out
