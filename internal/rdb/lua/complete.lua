-- complete.lua: finishes a batch of active tasks of one queue that
-- succeeded. Each entry is checked and applied on its own.
-- KEYS[1] active zset  KEYS[2] completed zset  KEYS[3] task hash prefix
-- KEYS[4] unique lock prefix  KEYS[5] processed counter
-- ARGV[1] now ms ('' = Redis TIME), then pairs ARGV[2i] task ID,
-- ARGV[2i+1] lease token.
-- Returns one integer per pair: 1 completed, 0 lease lost (the task is not
-- active or the token is not its lease's).
local now = now_ms(ARGV[1])
local res = {}
local done = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local tk = KEYS[3] .. id
  local f = redis.call('HMGET', tk, 's', 'k', 'u', 'R')
  if f[1] == '1' and f[2] == ARGV[i + 1] then
    redis.call('ZREM', KEYS[1], id)
    local keep = tonumber(f[4] or '0')
    if keep > 0 then
      redis.call('HSET', tk, 's', '6', 'c', istr(now))
      redis.call('HDEL', tk, 'k', 'w')
      redis.call('ZADD', KEYS[2], now + keep, id)
    else
      redis.call('DEL', tk)
    end
    release_unique(KEYS[4], f[3], id)
    done = done + 1
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
if done > 0 then count(KEYS[5], now, done) end
return res
