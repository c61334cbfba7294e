-- enqueue_workflow.lua: stores a workflow and its tasks, all or nothing
-- (EnqueueWorkflow). Prepended: lib.lua, lanelib.lua, wflib.lua (which describes the
-- workflow hash).
-- KEYS[1] workflow hash; then seven keys per queue of the workflow (the
-- i-th queue's at KEYS[2 + 7(i-1)] ..): task key prefix, pending list,
-- scheduled zset, waiting zset, unique lock prefix, event log (stream),
-- settings hash (the lanes of priorities and keys, lanelib.lua).
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] events channel  ARGV[3] digest
-- ARGV[4] home queue  ARGV[5] retention ms  ARGV[6] the task IDs, one per
-- line  ARGV[7] number of tasks  ARGV[8] event log length ('0' = off);
-- then 15 values per task: its workflow
-- task ID, queue number (from 1), queue name, task ID, message (codec),
-- ProcessAt ms (0: none), unique key ('' none), unique TTL ms, lock PX ms
-- (cleanup only), retention ms, its N record, its P record, its number of
-- dependencies, its priority ('' for 0) and its fair-sharing key ('' none).
-- Returns 1 when stored; 0 when a workflow with this ID and digest is
-- stored already (nothing is written but the digest, again, so that a
-- WAIT after the script covers the first attempt); -1 when one with
-- another digest is; {-2, i} when the i-th task's task ID is taken in its
-- queue; {-3, i} when its uniqueness key is locked (by another task or an
-- earlier one of the workflow). Every check comes before the first write.
-- The tasks are logged as enqueued, one entry per queue (log_events).
local wk = KEYS[1]
local have = redis.call('HGET', wk, 'h')
if have then
  if have ~= ARGV[3] then return -1 end
  redis.call('HSET', wk, 'h', have)
  return 0
end
local now = now_ms(ARGV[1])
local n = tonumber(ARGV[7])
local P = 15
local function key(qi, j) return KEYS[1 + 7 * (qi - 1) + j] end
local locks = {}
for i = 1, n do
  local a = 8 + P * (i - 1)
  local qi = tonumber(ARGV[a + 2])
  if redis.call('EXISTS', key(qi, 1) .. ARGV[a + 4]) == 1 then return {-2, i} end
  local uk = ARGV[a + 7]
  if uk ~= '' then
    local lk = key(qi, 5) .. uk
    if locks[lk] then return {-3, i} end
    locks[lk] = true
    local v = redis.call('GET', lk)
    if v then
      local exp = tonumber(string.sub(v, 1, (string.find(v, ':', 1, true) or 1) - 1))
      if exp and exp > now then return {-3, i} end
    end
  end
end
local h = {'h', ARGV[3], 'c', istr(now), 'q', ARGV[4], 'R', ARGV[5], 'L', ARGV[7], 'O', ARGV[6]}
for i = 1, n do
  local a = 8 + P * (i - 1)
  local id = ARGV[a + 1]
  h[#h + 1] = 'N:' .. id
  h[#h + 1] = ARGV[a + 11]
  if ARGV[a + 13] ~= '0' then
    h[#h + 1] = 'P:' .. id
    h[#h + 1] = ARGV[a + 12]
    h[#h + 1] = 'r:' .. id
    h[#h + 1] = ARGV[a + 13]
  end
end
call_many('HSET', wk, h)
local logged = {} -- queue number -> {ids, states}
for i = 1, n do
  local a = 8 + P * (i - 1)
  local qi = tonumber(ARGV[a + 2])
  local q, tid = ARGV[a + 3], ARGV[a + 4]
  local tk = key(qi, 1) .. tid
  local f = {'m', ARGV[a + 5], 'W', wk, 'N', ARGV[a + 1]}
  local uk = ARGV[a + 7]
  if uk ~= '' then
    f[#f + 1] = 'u'
    f[#f + 1] = uk
    redis.call('SET', key(qi, 5) .. uk, istr(now + tonumber(ARGV[a + 8])) .. ':' .. tid, 'PX', ARGV[a + 9])
  end
  if ARGV[a + 10] ~= '0' then
    f[#f + 1] = 'R'
    f[#f + 1] = ARGV[a + 10]
  end
  local at = tonumber(ARGV[a + 6])
  local prio, fkey = ARGV[a + 14], ARGV[a + 15]
  if prio == '' then prio = nil end
  if fkey == '' then fkey = nil end
  local lg = logged[qi]
  if not lg then
    lg = {{}, {}}
    logged[qi] = lg
  end
  lg[1][#lg[1] + 1] = tid
  if ARGV[a + 13] ~= '0' then
    lg[2][#lg[2] + 1] = '8'
    lane_fields(f, prio, fkey)
    f[#f + 1] = 's'
    f[#f + 1] = '8'
    redis.call('HSET', tk, unpack(f))
    redis.call('ZADD', key(qi, 4), now, tid)
  elseif at > now then
    lg[2][#lg[2] + 1] = '3'
    lane_fields(f, prio, fkey)
    f[#f + 1] = 's'
    f[#f + 1] = '3'
    redis.call('HSET', tk, unpack(f))
    redis.call('ZADD', key(qi, 3), at, tid)
    if is_earliest(key(qi, 3), tid) then redis.call('PUBLISH', ARGV[2], 's:' .. q) end
  else
    lg[2][#lg[2] + 1] = '2'
    lane_fields(f, prio, fkey, now)
    redis.call('HSET', tk, unpack(f))
    if push_lane(key(qi, 2), key(qi, 7), tid, prio, false, fkey) == 1 then redis.call('PUBLISH', ARGV[2], 'r:' .. q) end
  end
end
for qi, lg in pairs(logged) do
  log_events(key(qi, 6), ARGV[8], ARGV[1], 'e', lg[1], table.concat(lg[2]))
end
return 1
