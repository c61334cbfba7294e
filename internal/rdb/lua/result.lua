-- result.lua: stores the result of an active task.
-- KEYS[1] task key  KEYS[2] leases hash
-- ARGV[1] task ID  ARGV[2] lease token  ARGV[3] result
-- Returns 1 when stored, 0 when the lease is lost.
if not holds(redis.call('HGET', KEYS[2], ARGV[1]), ARGV[2]) then return 0 end
task_hash(KEYS[1])
redis.call('HSET', KEYS[1], 'r', ARGV[3])
return 1
