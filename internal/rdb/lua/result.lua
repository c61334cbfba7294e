-- result.lua: stores the result of an active task.
-- KEYS[1] task hash
-- ARGV[1] lease token  ARGV[2] result
-- Returns 1 when stored, 0 when the lease is lost.
local f = redis.call('HMGET', KEYS[1], 's', 'k')
if f[1] ~= '1' or f[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[2])
return 1
