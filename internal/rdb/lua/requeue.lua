-- requeue.lua: moves an active task back to the head of its pending lane
-- (the next of its priority to be fetched) without counting an attempt;
-- its lease ends.
-- KEYS[1] task key  KEYS[2] active zset
-- KEYS[3] leases hash  KEYS[4] pending list  KEYS[5] event log (stream)
-- KEYS[6] settings hash  KEYS[7] the lease groups' counts
-- KEYS[8] fetch record prefix
-- ARGV[1] task ID  ARGV[2] lease token  ARGV[3] events channel
-- ARGV[4] queue name  ARGV[5] now ms ('' = Redis TIME)
-- ARGV[6] event log length ('0' = off)
-- Returns 1 when requeued, 0 when the lease is lost. Publishes r:<queue>
-- when its lane went from empty to one task, or when its key, held back by
-- its limit, rejoined the rotation (the task frees its key's slot). Logs it
-- as retried
-- (log_event).
local id = ARGV[1]
local h = redis.call('HGET', KEYS[3], id)
if not holds(h, ARGV[2]) then return 0 end
lease_end({KEYS[2], KEYS[3], KEYS[7], KEYS[8]}, id, h)
task_hash(KEYS[1])
redis.call('HSET', KEYS[1], 'p', istr(now_ms(ARGV[5])))
local f = redis.call('HMGET', KEYS[1], 'P', 'k')
local ready = push_lane(KEYS[4], KEYS[6], id, f[1], true, f[2]) == 1
if f[2] and release_key(KEYS[4], f[2]) then ready = true end
if ready then
  redis.call('PUBLISH', ARGV[3], 'r:' .. ARGV[4])
end
log_event(KEYS[5], ARGV[6], ARGV[5], 'r', id, '2', '')
return 1
