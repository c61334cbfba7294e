-- complete.lua: finishes a batch of active tasks of one queue that
-- succeeded. Each entry is checked and applied on its own.
-- KEYS[1] active zset  KEYS[2] leases hash  KEYS[3] completed zset
-- KEYS[4] task key prefix  KEYS[5] unique lock prefix
-- KEYS[6] processed counter  KEYS[7] event log (stream)
-- KEYS[8] pending list (the lanes, lanelib.lua)
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] events channel
-- ARGV[3] queue name  ARGV[4] watch grace ms  ARGV[5] event log length
-- ('0' = off), then pairs ARGV[2i+4] task ID, ARGV[2i+5] lease token.
-- Returns one integer per pair: 1 completed, 0 lease lost (the task is not
-- active, the token is not its lease's, or the pair repeats an earlier one).
-- A watched task publishes d:<queue>:<id> and, without retention, is kept
-- completed for the watch grace so that its watcher can read it. A task
-- with a fair-sharing key frees its key's slot; publishes r:<queue> when
-- that lets a key held back by its limit rejoin the rotation.
-- The successes are logged in one entry (log_events). A workflow task's
-- success, with its result, is then applied to its workflow in this same
-- script (wf_finish: the tasks it releases become pending here, and are
-- logged in their queues). Prepended: lib.lua, lanelib.lua, wflib.lua.
local now = now_ms(ARGV[1])
local ids = {}
for i = 6, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
local held = {}
local i = 1
while i <= #ids do
  local j = math.min(i + 3999, #ids)
  local part = redis.call('HMGET', KEYS[2], unpack(ids, i, j))
  for k = 1, #part do held[i + k - 1] = part[k] end
  i = j + 1
end
local res, done, dels, seen, states, wfs, kept = {}, {}, {}, {}, {}, {}, {}
local nowstr, lastkeep, expiry
local rejoined = false
for n = 1, #ids do
  local id = ids[n]
  local tok = ARGV[2 * n + 5]
  if holds(held[n], tok) and not seen[id] then
    seen[id] = true
    done[#done + 1] = id
    local tk = KEYS[4] .. id
    local keep = 0
    if string.byte(held[n], -1) == 43 then -- '+': the task must be read
      local f = redis.call('HMGET', tk, 'u', 'R', 'w', 'k', 'W', 'N', 'r')
      release_unique(KEYS[5], f[1], id)
      if f[4] and release_key(KEYS[8], f[4]) then rejoined = true end
      if f[5] then wfs[#wfs + 1] = {f[5], f[6], f[7] or nil} end
      keep = tonumber(f[2] or '0')
      if f[3] then
        if keep == 0 then keep = tonumber(ARGV[4]) end
        redis.call('PUBLISH', ARGV[2], 'd:' .. ARGV[3] .. ':' .. id)
      end
    end
    if keep > 0 then
      -- Numbers formatted once per batch, not per task (it costs Redis).
      nowstr = nowstr or istr(now)
      if keep ~= lastkeep then lastkeep, expiry = keep, istr(now + keep) end
      redis.call('HSET', tk, 's', '6', 'c', nowstr)
      kept[#kept + 1] = expiry
      kept[#kept + 1] = id
      states[#states + 1] = '6'
    else
      dels[#dels + 1] = tk
      states[#states + 1] = '0'
    end
    res[n] = 1
  else
    res[n] = 0
  end
end
if #kept > 0 then call_many('ZADD', KEYS[3], kept) end
if #done > 0 then
  call_many('ZREM', KEYS[1], done)
  call_many('HDEL', KEYS[2], done)
  count(KEYS[6], now, #done)
  log_events(KEYS[7], ARGV[5], ARGV[1], 'd', done, table.concat(states))
end
if rejoined then redis.call('PUBLISH', ARGV[2], 'r:' .. ARGV[3]) end
for _, w in ipairs(wfs) do
  wf_finish(w[1], w[2], 's', nil, w[3], now, ARGV[2], ARGV[5], ARGV[1])
end
if #dels > 0 then
  local k = 1
  while k <= #dels do
    local j = math.min(k + 3999, #dels)
    redis.call('DEL', unpack(dels, k, j))
    k = j + 1
  end
end
return res
