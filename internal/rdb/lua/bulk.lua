-- bulk.lua: deletes, runs or archives one batch of the tasks of one
-- structure of a queue (DeleteAll, RunAll, ArchiveAll), oldest first.
-- KEYS[1] the structure: the pending list (with ARGV[3] 'p': every pending
-- lane, in list order, lanelib.lua), or a scheduled, retry, archived,
-- completed or group zset  KEYS[2] pending list  KEYS[3] archived zset
-- KEYS[4] task key prefix  KEYS[5] unique lock prefix  KEYS[6] groups set
-- KEYS[7] event log (stream)  KEYS[8] settings hash
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] 'd' delete, 'r' run (to
-- pending), 'a' archive  ARGV[3] 'p' for the pending lanes, 'z' a zset
-- ARGV[4] batch size  ARGV[5] group key when KEYS[1] is a group ('' if not)
-- ARGV[6] events channel  ARGV[7] queue name  ARGV[8] max archive size
-- ARGV[9] max archive age ms  ARGV[10] event log length ('0' = off)
-- ARGV[11] the state digit of the structure's tasks when a task taken
-- from it may have left that state since (waiting tasks canceled by the
-- workflow rules of one before them): those are skipped; '' checks
-- nothing.
-- Returns {tasks changed, entries taken from KEYS[1], entries left in
-- KEYS[1]}. Entries without a task are dropped. A task run goes to
-- the back of its lane; publishes r:<queue> when a lane went from empty to
-- not empty. The tasks
-- changed are logged in one entry (log_events: deleted, retried or
-- archived); then deleting or archiving a workflow task is applied to its
-- workflow (wf_finish). Prepended: lib.lua, adminlib.lua, lanelib.lua, wflib.lua.
local op, n = ARGV[2], tonumber(ARGV[4])
local pend = ARGV[3] == 'p'
local ids = {}
if ARGV[3] == 'p' then
  ids = pop_pending(KEYS[2], KEYS[8], n)
else
  local r = redis.call('ZPOPMIN', KEYS[1], n)
  for i = 1, #r, 2 do ids[#ids + 1] = r[i] end
end
if #ids == 0 then return {0, 0, 0} end
local now = now_ms(ARGV[1])
local ready = false
local changed = 0
local zadd, logged, wfs = {}, {}, {}
for _, id in ipairs(ids) do
  local tk = KEYS[4] .. id
  -- Only a pending task may be in the string form (lib.lua's task_get).
  local f = pend and task_get(tk, 'm', 's', 'W', 'N', 'e') or redis.call('HMGET', tk, 'm', 's', 'W', 'N', 'e')
  if f[1] and (ARGV[11] == '' or f[2] == ARGV[11]) then
    changed = changed + 1
    if f[3] and op ~= 'r' then wfs[#wfs + 1] = {f[3], f[4], f[5] or nil} end
    if op == 'd' then
      drop_task(tk, KEYS[5], id)
    elseif op == 'r' then
      make_pending(tk, now)
      if push_task(KEYS[2], KEYS[8], tk, id) == 1 then ready = true end
    else
      if pend then task_hash(tk) end
      redis.call('HSET', tk, 's', '5')
      zadd[#zadd + 1] = now
      zadd[#zadd + 1] = id
    end
    logged[#logged + 1] = id
  end
end
local kind, state = 'x', '0'
if op == 'r' then
  kind, state = 'r', '2'
elseif op == 'a' then
  kind, state = 'a', '5'
end
log_events(KEYS[7], ARGV[10], ARGV[1], kind, logged, string.rep(state, #logged))
if ARGV[5] ~= '' and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[6], ARGV[5])
end
if #zadd > 0 then
  call_many('ZADD', KEYS[3], zadd)
  trim_archive(KEYS[3], KEYS[4], KEYS[5], now, tonumber(ARGV[8]), tonumber(ARGV[9]))
end
if ready then
  redis.call('PUBLISH', ARGV[6], 'r:' .. ARGV[7])
end
for _, w in ipairs(wfs) do
  if op == 'd' then
    wf_finish(w[1], w[2], 'd', nil, nil, now, ARGV[6], ARGV[10], ARGV[1])
  else
    wf_finish(w[1], w[2], 'f', w[3], nil, now, ARGV[6], ARGV[10], ARGV[1])
  end
end
local left
if ARGV[3] == 'p' then
  left = pending_count(KEYS[2])
else
  left = redis.call('ZCARD', KEYS[1])
end
return {changed, #ids, left}
