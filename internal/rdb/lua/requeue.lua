-- requeue.lua: moves an active task back to the head of pending (the next
-- to be fetched) without counting an attempt; its lease ends.
-- KEYS[1] task hash  KEYS[2] active zset  KEYS[3] pending list
-- ARGV[1] task ID  ARGV[2] lease token  ARGV[3] events channel
-- ARGV[4] queue name
-- Returns 1 when requeued, 0 when the lease is lost. Publishes r:<queue>
-- when pending went from empty to one task.
local f = redis.call('HMGET', KEYS[1], 's', 'k')
if f[1] ~= '1' or f[2] ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 's', '2')
redis.call('HDEL', KEYS[1], 'k', 'w')
if redis.call('RPUSH', KEYS[3], ARGV[1]) == 1 then
  redis.call('PUBLISH', ARGV[3], 'r:' .. ARGV[4])
end
return 1
