-- take_group.lua: when a group is ready (it holds ARGV[3] tasks or more,
-- its oldest task waited ARGV[4] ms, or its newest waited ARGV[5] ms),
-- moves up to ARGV[3] of its oldest tasks into a new aggregation set
-- leased for ARGV[6] ms (TakeGroup). The tasks keep s = 7 (aggregating).
-- KEYS[1] group zset  KEYS[2] groups set  KEYS[3] aggregation sets zset
-- KEYS[4] the new aggregation set (hash)  KEYS[5] task key prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] group key  ARGV[3] max size
-- ARGV[4] max delay ms (0: none)  ARGV[5] grace period ms
-- ARGV[6] lease ms  ARGV[7] set ID  ARGV[8] set token
-- Returns {} when the group is empty or not ready, else {lease deadline
-- ms, id, m, n, e, f, id, ...}. An entry without a task is dropped.
local size = redis.call('ZCARD', KEYS[1])
if size == 0 then return {} end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return redis.error_reply('aggregation set ' .. ARGV[7] .. ' exists')
end
local now = now_ms(ARGV[1])
local maxn, delay, grace = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local ready = size >= maxn
if not ready and delay > 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  ready = now - tonumber(oldest[2]) >= delay
end
if not ready then
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  ready = now - tonumber(newest[2]) >= grace
end
if not ready then return {} end
local r = redis.call('ZPOPMIN', KEYS[1], maxn)
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], ARGV[2]) end
local deadline = now + tonumber(ARGV[6])
local h = {'t', ARGV[8], 'g', ARGV[2]}
local out = {deadline}
for i = 1, #r, 2 do
  local id = r[i]
  local f = redis.call('HMGET', KEYS[5] .. id, 'm', 'n', 'e', 'f')
  if f[1] then
    h[#h + 1] = 'i:' .. id
    h[#h + 1] = r[i + 1]
    out[#out + 1] = id
    for j = 1, 4 do out[#out + 1] = f[j] end
  end
end
if #out == 1 then return {} end
call_many('HSET', KEYS[4], h)
redis.call('ZADD', KEYS[3], deadline, ARGV[7])
return out
