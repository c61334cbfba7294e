-- expired_workflows.lua: deletes up to ARGV[2] workflow hashes whose
-- retention ran out (DeleteExpiredWorkflows).
-- KEYS[1] the queue's wfdone zset (finished workflow hashes, score = end
-- of retention ms)
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] limit
-- Returns the names of the hashes it deleted.
local now = now_ms(ARGV[1])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
if #gone > 0 then
  redis.call('DEL', unpack(gone))
  redis.call('ZREM', KEYS[1], unpack(gone))
end
return gone
