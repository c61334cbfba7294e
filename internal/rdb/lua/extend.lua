-- extend.lua: pushes the deadline of each still-held lease of one queue.
-- KEYS[1] active zset  KEYS[2] leases hash
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] lease ms, then pairs
-- ARGV[2i+1] task ID, ARGV[2i+2] lease token.
-- Returns {new deadline ms, lost ID, lost ID, ...}. A lease is lost when
-- the task is not active, the token is not its lease's, or its deadline
-- has passed (an expired lease may be being recovered; it is not revived).
local now = now_ms(ARGV[1])
local deadline = now + tonumber(ARGV[2])
local dl = istr(deadline) -- a number argument would be formatted once per task
local out = {deadline}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local d = redis.call('ZSCORE', KEYS[1], id)
  if d and tonumber(d) > now and holds(redis.call('HGET', KEYS[2], id), ARGV[i + 1]) then
    redis.call('ZADD', KEYS[1], dl, id)
  else
    out[#out + 1] = id
  end
end
return out
