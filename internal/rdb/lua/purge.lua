-- purge.lua: deletes up to ARGV[2] completed tasks whose retention ran out.
-- KEYS[1] completed zset  KEYS[2] task key prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] limit
-- Returns how many tasks were deleted.
local now = now_ms(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('DEL', KEYS[2] .. id)
end
if #ids > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #ids - 1) end
return #ids
