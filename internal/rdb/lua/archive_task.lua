-- archive_task.lua: moves a pending, scheduled, retry or aggregating task
-- to archived (ArchiveTask) and trims the archive as archive.lua does.
-- KEYS[1] task key  KEYS[2] pending list  KEYS[3] scheduled zset
-- KEYS[4] retry zset  KEYS[5] archived zset  KEYS[6] group zset prefix
-- KEYS[7] groups set  KEYS[8] leases hash  KEYS[9] task key prefix
-- KEYS[10] unique lock prefix  KEYS[11] event log (stream)
-- KEYS[12] settings hash  KEYS[13] waiting zset
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] task ID
-- ARGV[3] max archive size  ARGV[4] max archive age ms
-- ARGV[5] event log length ('0' = off)  ARGV[6] events channel
-- A waiting workflow task is taken too; a workflow task's archiving is
-- applied to its workflow after it is logged (wf_finish). Prepended:
-- lib.lua, adminlib.lua, lanelib.lua, wflib.lua.
-- Returns 1 when archived, 0 when it already was, -1 when there is no
-- such task, -2 when it is in another state (active, completed, or
-- aggregating but taken by an aggregator). A pending task costs an LREM of its lane (lanelib.lua),
-- O(pending). Logs the archiving (log_event).
local id = ARGV[2]
local s = state_of(KEYS[1], KEYS[8], id)
if not s then return -1 end
if s == '5' then return 0 end
-- The removal is the last check: when it removes nothing, nothing was
-- written.
local removed = 0
if s == '2' then
  removed = remove_pending(KEYS[2], KEYS[12], KEYS[1], id)
elseif s == '3' then
  removed = redis.call('ZREM', KEYS[3], id)
elseif s == '4' then
  removed = redis.call('ZREM', KEYS[4], id)
elseif s == '8' then
  removed = redis.call('ZREM', KEYS[13], id)
elseif s == '7' then
  local g = redis.call('HGET', KEYS[1], 'g')
  if g then
    local gk = KEYS[6] .. g
    removed = redis.call('ZREM', gk, id)
    if removed == 1 and redis.call('ZCARD', gk) == 0 then redis.call('SREM', KEYS[7], g) end
  end
end
if removed == 0 then return -2 end
local now = now_ms(ARGV[1])
local wf = task_get(KEYS[1], 'W', 'N', 'e')
task_hash(KEYS[1])
redis.call('HSET', KEYS[1], 's', '5')
redis.call('ZADD', KEYS[5], now, id)
trim_archive(KEYS[5], KEYS[9], KEYS[10], now, tonumber(ARGV[3]), tonumber(ARGV[4]))
log_event(KEYS[11], ARGV[5], ARGV[1], 'a', id, '5', '')
if wf[1] then wf_finish(wf[1], wf[2], 'f', wf[3] or nil, nil, now, ARGV[6], ARGV[5], ARGV[1]) end
return 1
