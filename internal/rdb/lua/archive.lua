-- archive.lua: moves an active task to archived after its last failure and
-- trims the archive to its newest ARGV[6] tasks and ARGV[7] ms of age.
-- KEYS[1] task hash  KEYS[2] active zset  KEYS[3] archived zset
-- KEYS[4] task hash prefix  KEYS[5] unique lock prefix
-- KEYS[6] processed counter  KEYS[7] failed counter
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] task ID  ARGV[3] lease token
-- ARGV[4] error message  ARGV[5] '1' requires the lease to have expired
-- ARGV[6] max archive size  ARGV[7] max archive age ms
-- Returns 1 when archived, 0 when the lease is lost.
local f = redis.call('HMGET', KEYS[1], 's', 'k')
if f[1] ~= '1' or f[2] ~= ARGV[3] then return 0 end
local now = now_ms(ARGV[1])
local id = ARGV[2]
if ARGV[5] == '1' then
  local d = redis.call('ZSCORE', KEYS[2], id)
  if not d or tonumber(d) > now then return 0 end
end
redis.call('ZREM', KEYS[2], id)
redis.call('HSET', KEYS[1], 's', '5', 'e', ARGV[4], 'f', istr(now))
redis.call('HDEL', KEYS[1], 'k', 'w')
redis.call('ZADD', KEYS[3], now, id)
count(KEYS[6], now, 1)
count(KEYS[7], now, 1)
-- Trim: drop the hashes (and locks) of archived tasks too old or too many.
local function drop(ids)
  for _, old in ipairs(ids) do
    local tk = KEYS[4] .. old
    release_unique(KEYS[5], redis.call('HGET', tk, 'u'), old)
    redis.call('DEL', tk)
  end
end
local cutoff = now - tonumber(ARGV[7])
local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. istr(cutoff))
if #old > 0 then
  drop(old)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. istr(cutoff))
end
local extra = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[6])
if extra > 0 then
  drop(redis.call('ZRANGE', KEYS[3], 0, extra - 1))
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, extra - 1)
end
return 1
