-- enqueue_plain.lua: stores one new task that has no unique key, group,
-- priority or fair-sharing key (the common Enqueue: pending at once or at
-- a due time, with or without a retention), exactly as enqueue.lua would,
-- with no library prepended (lib.lua's and lanelib.lua's functions would
-- be built on every call, which costs more Redis CPU than the writes
-- themselves). Its arguments are as few as each call allows: each one
-- costs Redis about a tenth of what the script's own writes cost
-- (docs/performance.md, "Single enqueue on Redis").
-- KEYS[1] task key    KEYS[2] pending list   KEYS[3] event log (stream)
-- KEYS[4] scheduled zset (with ARGV[7] only)
-- ARGV[1] message (codec)   ARGV[2] task ID   ARGV[3] queue name
-- ARGV[4] event log length ('0' = off)
-- ARGV[5] retention ms (absent or '0' = none; htq serve keeps completed
--         tasks, so most of its tasks carry one)
-- ARGV[6] now ms (absent or '' = Redis TIME; when given, also the time of
--         the log entry)
-- ARGV[7] process-at ms (absent = now): a task due later than now is
--         scheduled, else pending
-- CHANNEL, the events channel (keys.go's channelEvents), is set by the
-- line rdb prepends (scripts.go).
-- Returns the new state (2 pending, 3 scheduled), 0 when the task is
-- stored already with this very message, propagated headers aside (an
-- earlier attempt of the same Enqueue; see lib.lua's stored_same, inlined
-- here; nothing is logged), or -1 when another task holds the ID (nothing
-- written).
-- The first write is also the ID check: SET NX of the message, the
-- task's string form (lib.lua's task_get), for a pending task without a
-- retention; else HSETNX of m, which HSET of s (scheduled) and R then
-- join. Publishes r:<queue> when pending went from empty to one task and
-- s:<queue> when the task became the earliest scheduled one; logs the
-- enqueue as lib.lua's log_event would, except that the log is trimmed
-- (XTRIM MAXLEN ~) by the first entry of each millisecond only, the one
-- whose ID ends in -0: trimming in every XADD cost more than the entry
-- itself, and the log still never holds more than the length, a node of
-- the stream and one millisecond's entries (every other script trims on
-- each entry).
local ret = ARGV[5]
if ret == '0' then ret = nil end
local tms = ARGV[6]
if tms == '' then tms = nil end
local state, st = 2, '2' -- st: the state as text (a number converted costs a format)
if ARGV[7] then
  local now
  if tms then
    now = tonumber(tms)
  else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  if tonumber(ARGV[7]) > now then state, st = 3, '3' end
end
local stored
if not ret and state == 2 then
  stored = redis.call('SET', KEYS[1], ARGV[1], 'NX')
else
  local r = redis.pcall('HSETNX', KEYS[1], 'm', ARGV[1])
  if type(r) == 'table' and string.sub(r.err, 1, 9) ~= 'WRONGTYPE' then
    return r -- refused before the first write: nothing was written
  end
  stored = r == 1 -- WRONGTYPE: a task in the string form holds the ID
end
if not stored then
  local t = redis.call('TYPE', KEYS[1]).ok
  local s
  if t == 'string' then
    s = redis.call('GET', KEYS[1])
  elseif t == 'hash' then
    s = redis.call('HGET', KEYS[1], 'm')
  end
  if not s then return -1 end
  if s ~= ARGV[1] then
    -- The same task but for its propagated headers (lib.lua's content).
    local function content(m)
      local f = string.byte(m, 2)
      if not f or f < 128 or #m < 4 then return m end
      local hi, lo = string.byte(m, #m - 1, #m)
      return string.sub(m, 1, 1) .. string.char(f - 128) .. string.sub(m, 3, #m - 2 - (hi * 256 + lo))
    end
    if content(s) ~= content(ARGV[1]) then return -1 end
  end
  -- Replicated, for a WAIT (lib.lua's stored_same).
  if t == 'string' then
    redis.call('SET', KEYS[1], s)
  else
    redis.call('HSET', KEYS[1], 'm', s)
  end
  return 0
end
if state == 3 then
  if ret then
    redis.call('HSET', KEYS[1], 's', st, 'R', ret)
  else
    redis.call('HSET', KEYS[1], 's', st)
  end
  redis.call('ZADD', KEYS[4], ARGV[7], ARGV[2])
  if redis.call('ZRANGE', KEYS[4], 0, 0)[1] == ARGV[2] then
    redis.call('PUBLISH', CHANNEL, 's:' .. ARGV[3])
  end
else
  if ret then redis.call('HSET', KEYS[1], 'R', ret) end
  if redis.call('LPUSH', KEYS[2], ARGV[2]) == 1 then
    redis.call('PUBLISH', CHANNEL, 'r:' .. ARGV[3])
  end
end
if ARGV[4] ~= '0' then
  local ev = st .. '\n' .. ARGV[2]
  local id
  if tms then
    id = redis.call('XADD', KEYS[3], '*', 'e', ev, 'T', tms)
  else
    id = redis.call('XADD', KEYS[3], '*', 'e', ev)
  end
  if string.byte(id, -1) == 48 and string.byte(id, -2) == 45 then -- '-0'
    redis.call('XTRIM', KEYS[3], 'MAXLEN', '~', ARGV[4])
  end
end
return state
