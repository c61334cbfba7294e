-- run_task.lua: moves a scheduled, retry, archived or aggregating task to
-- pending (RunTask).
-- KEYS[1] task key  KEYS[2] pending list  KEYS[3] scheduled zset
-- KEYS[4] retry zset  KEYS[5] archived zset  KEYS[6] group zset prefix
-- KEYS[7] groups set  KEYS[8] leases hash  KEYS[9] event log (stream)
-- KEYS[10] settings hash
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] task ID  ARGV[3] events channel
-- ARGV[4] queue name  ARGV[5] event log length ('0' = off)
-- Returns 1 when moved, -1 when there is no such task, -2 when it is in
-- another state (pending, active, completed, or aggregating but taken by
-- an aggregator). The task goes to the back of its lane (lanelib.lua).
-- Publishes r:<queue> when its lane went from empty to one
-- task. Logs it as retried (log_event).
local id = ARGV[2]
local s = state_of(KEYS[1], KEYS[8], id)
if not s then return -1 end
-- The ZREM is the last check: when it removes nothing, nothing was written.
local from, g
if s == '3' then
  from = KEYS[3]
elseif s == '4' then
  from = KEYS[4]
elseif s == '5' then
  from = KEYS[5]
elseif s == '7' then
  g = redis.call('HGET', KEYS[1], 'g')
  if not g then return -2 end
  from = KEYS[6] .. g
else
  return -2
end
if redis.call('ZREM', from, id) == 0 then return -2 end
if g and redis.call('ZCARD', from) == 0 then redis.call('SREM', KEYS[7], g) end
local now = now_ms(ARGV[1])
make_pending(KEYS[1], now)
if push_task(KEYS[2], KEYS[10], KEYS[1], id) == 1 then
  redis.call('PUBLISH', ARGV[3], 'r:' .. ARGV[4])
end
log_event(KEYS[9], ARGV[5], ARGV[1], 'r', id, '2', '')
return 1
