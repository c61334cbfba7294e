-- finish_aggregation.lua: deletes the tasks of an aggregation set and
-- enqueues the task that replaces them as pending (FinishAggregation).
-- KEYS[1] aggregation sets zset  KEYS[2] the aggregation set (hash)
-- KEYS[3] the new task's hash  KEYS[4] pending list  KEYS[5] task key
-- prefix  KEYS[6] unique lock prefix  KEYS[7] event log (stream)
-- KEYS[8] settings hash
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] set ID  ARGV[3] set token
-- ARGV[4] new task ID  ARGV[5] its message (codec)  ARGV[6] its unique key
-- ('' = none)  ARGV[7] unique TTL ms  ARGV[8] lock PX ms (cleanup only)
-- ARGV[9] retention ms  ARGV[10] events channel  ARGV[11] queue name
-- ARGV[12] event log length ('0' = off)
-- ARGV[13] its priority ('' = 0)  ARGV[14] its fair-sharing key ('' = none)
-- Returns 1 when done, 0 when the set is gone or its token is another
-- (lease lost), -1 when the new task's ID is taken, -2 when its unique
-- lock is held. The new task goes to the back of its lane (lanelib.lua).
-- Publishes r:<queue> when its lane went from empty to one
-- task. Logs the new task's enqueue (log_event).
if redis.call('HGET', KEYS[2], 't') ~= ARGV[3] then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return -1 end
local now = now_ms(ARGV[1])
local id, ukey = ARGV[4], ARGV[6]
if ukey ~= '' then
  local v = redis.call('GET', KEYS[6] .. ukey)
  if v then
    local exp = tonumber(string.sub(v, 1, (string.find(v, ':', 1, true) or 1) - 1))
    if exp and exp > now then return -2 end
  end
end
-- Every precondition holds: write.
local m = agg_members(KEYS[2])
for i = 1, #m, 2 do drop_task(KEYS[5] .. m[i], KEYS[6], m[i]) end
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[2])
local h = {'m', ARGV[5], 'p', istr(now)}
if ukey ~= '' then
  h[#h + 1] = 'u'
  h[#h + 1] = ukey
  redis.call('SET', KEYS[6] .. ukey, istr(now + tonumber(ARGV[7])) .. ':' .. id, 'PX', ARGV[8])
end
if ARGV[9] ~= '0' then
  h[#h + 1] = 'R'
  h[#h + 1] = ARGV[9]
end
local prio = ARGV[13] ~= '' and ARGV[13] or nil
local key = ARGV[14] ~= '' and ARGV[14] or nil
lane_fields(h, prio, key)
redis.call('HSET', KEYS[3], unpack(h))
if push_lane(KEYS[4], KEYS[8], id, prio, false, key) == 1 then
  redis.call('PUBLISH', ARGV[10], 'r:' .. ARGV[11])
end
log_event(KEYS[7], ARGV[12], ARGV[1], 'e', id, '2', '')
return 1
