-- reclaim_aggregations.lua: gives the tasks of up to ARGV[2] aggregation
-- sets whose lease ran out back to their groups, with their old scores
-- (ReclaimAggregations).
-- KEYS[1] aggregation sets zset  KEYS[2] aggregation set prefix
-- KEYS[3] group zset prefix  KEYS[4] groups set  KEYS[5] task key prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] limit (sets)
-- Returns {sets reclaimed, tasks given back}. A member without a task
-- hash (deleted meanwhile) is dropped.
local now = now_ms(ARGV[1])
local sets = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local tasks = 0
for _, s in ipairs(sets) do
  local ak = KEYS[2] .. s
  local m = agg_members(ak)
  for i = 1, #m, 2 do
    local id = m[i]
    local f = redis.call('HMGET', KEYS[5] .. id, 'm', 'g')
    if f[1] and f[2] then
      redis.call('ZADD', KEYS[3] .. f[2], m[i + 1], id)
      redis.call('SADD', KEYS[4], f[2])
      tasks = tasks + 1
    end
  end
  redis.call('DEL', ak)
end
if #sets > 0 then redis.call('ZREM', KEYS[1], unpack(sets)) end
return {#sets, tasks}
