-- delete.lua: deletes a task that is not active and releases its lock.
-- KEYS[1] task key  KEYS[2] pending list  KEYS[3] scheduled zset
-- KEYS[4] retry zset  KEYS[5] archived zset  KEYS[6] completed zset
-- KEYS[7] unique lock prefix  KEYS[8] group zset prefix  KEYS[9] groups set
-- KEYS[10] leases hash  KEYS[11] event log (stream)  KEYS[12] settings hash
-- (a pending task is removed from its lane, lanelib.lua)  KEYS[13] waiting zset
-- ARGV[1] task ID  ARGV[2] event time ms ('' = the log entry's)
-- ARGV[3] event log length ('0' = off)  ARGV[4] events channel
-- Returns 1 when deleted, -1 when there is no such task, -2 when it is
-- active. Logs the deletion (log_event); deleting a workflow task that
-- has not finished is then applied to its workflow (wf_finish).
-- Prepended: lib.lua, lanelib.lua, wflib.lua.
local f = task_get(KEYS[1], 's', 'u', 'g', 'm', 'W', 'N')
if not f[4] then return -1 end
if redis.call('HEXISTS', KEYS[10], ARGV[1]) == 1 then return -2 end
local id = ARGV[1]
local s = f[1] or '2'
if s == '2' then
  remove_pending(KEYS[2], KEYS[12], KEYS[1], id)
elseif s == '3' then
  redis.call('ZREM', KEYS[3], id)
elseif s == '4' then
  redis.call('ZREM', KEYS[4], id)
elseif s == '5' then
  redis.call('ZREM', KEYS[5], id)
elseif s == '6' then
  redis.call('ZREM', KEYS[6], id)
elseif s == '8' then
  redis.call('ZREM', KEYS[13], id)
elseif s == '7' and f[3] then
  local gk = KEYS[8] .. f[3]
  redis.call('ZREM', gk, id)
  if redis.call('ZCARD', gk) == 0 then redis.call('SREM', KEYS[9], f[3]) end
end
release_unique(KEYS[7], f[2], id)
redis.call('DEL', KEYS[1])
log_event(KEYS[11], ARGV[3], ARGV[2], 'x', id, '0', '')
if f[5] then wf_finish(f[5], f[6], 'd', nil, nil, now_ms(ARGV[2]), ARGV[4], ARGV[3], ARGV[2]) end
return 1
