-- enqueue.lua: stores one new task as pending, scheduled or aggregating.
-- KEYS[1] task key           KEYS[2] pending list     KEYS[3] scheduled zset
-- KEYS[4] unique lock prefix KEYS[5] group zset prefix KEYS[6] groups set
-- KEYS[7] event log (stream)  KEYS[8] settings hash (the lanes' marks,
-- lanelib.lua)
-- ARGV[1] now ms ('' = Redis TIME)   ARGV[2] task ID   ARGV[3] message (codec)
-- ARGV[4] process-at ms (0 = now)    ARGV[5] unique key ('' = none)
-- ARGV[6] unique TTL ms              ARGV[7] lock PX ms (cleanup only)
-- ARGV[8] group key ('' = none)      ARGV[9] retention ms
-- ARGV[10] events channel            ARGV[11] queue name
-- ARGV[12] event log length ('0' = off)
-- ARGV[13] priority ('' = 0)        ARGV[14] fair-sharing key ('' = none)
-- Returns the new state (2 pending, 3 scheduled, 7 aggregating), 0 when
-- the task is stored already with this very message (an earlier attempt
-- of the same Enqueue, in whatever state; see stored_same), -1 when
-- another task holds the ID, -2 when the unique lock is held.
-- Publishes r:<queue> when pending went from empty to one task and
-- s:<queue> when the task became the earliest scheduled one. Logs the
-- enqueue (log_event).
-- A plain task (no unique key, group, due time or retention) costs SET NX
-- + LPUSH: SET NX is both the ID check and the first write.
local id = ARGV[2]
local ukey, gkey, at = ARGV[5], ARGV[8], tonumber(ARGV[4])
local now
if ukey ~= '' then
  -- The ID check comes first, so that a taken ID is reported as such
  -- and a repeat does not meet its own lock.
  if redis.call('EXISTS', KEYS[1]) == 1 then return stored_same(KEYS[1], ARGV[3]) and 0 or -1 end
  now = now_ms(ARGV[1])
  local v = redis.call('GET', KEYS[4] .. ukey)
  if v then
    local exp = tonumber(string.sub(v, 1, (string.find(v, ':', 1, true) or 1) - 1))
    if exp and exp > now then return -2 end
  end
end
local state = 2
local prio = ARGV[13] ~= '' and ARGV[13] or nil
local key = ARGV[14] ~= '' and ARGV[14] or nil
if prio or key then now = now or now_ms(ARGV[1]) end
if gkey ~= '' then
  state = 7
  now = now or now_ms(ARGV[1])
elseif at > 0 then
  now = now or now_ms(ARGV[1])
  if at > now then state = 3 end
end
-- Every precondition but the ID holds; the first write checks it: SET NX
-- of the message for a task that has no other field (the string form,
-- lib.lua's task_get), else HSETNX of m.
local h = {}
if state ~= 2 then
  h[1] = 's'
  h[2] = state
end
if ukey ~= '' then
  h[#h + 1] = 'u'
  h[#h + 1] = ukey
end
if ARGV[9] ~= '0' then
  h[#h + 1] = 'R'
  h[#h + 1] = ARGV[9]
end
if state == 7 then
  h[#h + 1] = 'g'
  h[#h + 1] = gkey
end
lane_fields(h, prio, key, state == 2 and now)
if #h == 0 then
  if not redis.call('SET', KEYS[1], ARGV[3], 'NX') then return stored_same(KEYS[1], ARGV[3]) and 0 or -1 end
else
  local r = redis.pcall('HSETNX', KEYS[1], 'm', ARGV[3])
  if type(r) == 'table' and string.sub(r.err, 1, 9) ~= 'WRONGTYPE' then
    return r -- refused before the first write: nothing was written
  end
  -- WRONGTYPE: a task in the string form holds the ID.
  if r ~= 1 then return stored_same(KEYS[1], ARGV[3]) and 0 or -1 end
  redis.call('HSET', KEYS[1], unpack(h))
end
if ukey ~= '' then
  redis.call('SET', KEYS[4] .. ukey, istr(now + tonumber(ARGV[6])) .. ':' .. id, 'PX', ARGV[7])
end
if state == 7 then
  redis.call('ZADD', KEYS[5] .. gkey, now, id)
  redis.call('SADD', KEYS[6], gkey)
elseif state == 3 then
  redis.call('ZADD', KEYS[3], at, id)
  if is_earliest(KEYS[3], id) then
    redis.call('PUBLISH', ARGV[10], 's:' .. ARGV[11])
  end
elseif push_lane(KEYS[2], KEYS[8], id, prio, false, key) == 1 then
  redis.call('PUBLISH', ARGV[10], 'r:' .. ARGV[11])
end
log_event(KEYS[7], ARGV[12], ARGV[1], 'e', id, istr(state), '')
return state
