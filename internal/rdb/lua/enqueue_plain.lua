-- enqueue_plain.lua: stores one new task that goes straight to pending and
-- has no unique key, group or due time (the common Enqueue, with or
-- without a retention), exactly as enqueue.lua would, with no library
-- prepended (lib.lua's functions would be built on every call, which
-- costs more Redis CPU than the writes themselves).
-- KEYS[1] task key    KEYS[2] pending list   KEYS[3] event log (stream)
-- ARGV[1] message (codec)   ARGV[2] task ID
-- ARGV[3] events channel    ARGV[4] queue name
-- ARGV[5] retention ms ('0' = none; htq serve keeps completed tasks, so
--         most of its tasks carry one)
-- ARGV[6] event time ms ('' = the log entry's)  ARGV[7] event log length
-- ('0' = off)
-- Returns 2 (pending), 0 when the task is stored already with this very
-- message, propagated headers aside (an earlier attempt of the same
-- Enqueue; see lib.lua's stored_same, inlined here; nothing is logged),
-- or -1 when another task holds the ID (nothing written).
-- The first write is also the ID check: SET NX of the message, the
-- task's string form (lib.lua's task_get), without a retention; HSETNX
-- of m with one, which HSET R then joins. Publishes r:<queue> when
-- pending went from empty to one task; logs the enqueue as lib.lua's
-- log_event would.
local stored
if ARGV[5] == '0' then
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
if ARGV[5] ~= '0' then redis.call('HSET', KEYS[1], 'R', ARGV[5]) end
if redis.call('LPUSH', KEYS[2], ARGV[2]) == 1 then
  redis.call('PUBLISH', ARGV[3], 'r:' .. ARGV[4])
end
if ARGV[7] ~= '0' then
  if ARGV[6] == '' then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'e', '2\n' .. ARGV[2])
  else
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'e', '2\n' .. ARGV[2], 'T', ARGV[6])
  end
end
return 2
