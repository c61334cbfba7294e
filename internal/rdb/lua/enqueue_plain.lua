-- enqueue_plain.lua: stores one new task that goes straight to pending and
-- has no unique key, group, due time or retention (the common Enqueue),
-- exactly as enqueue.lua would, with no library prepended (lib.lua's
-- functions would be built on every call).
-- KEYS[1] task hash   KEYS[2] pending list   KEYS[3] event log (stream)
-- ARGV[1] message (codec)   ARGV[2] task ID
-- ARGV[3] events channel    ARGV[4] queue name
-- ARGV[5] event time ms ('' = the log entry's)  ARGV[6] event log length
-- ('0' = off)
-- Returns 2 (pending), or -1 when the task ID is taken (nothing written).
-- HSETNX is both the ID check and the first write; publishes r:<queue>
-- when pending went from empty to one task; logs the enqueue as
-- lib.lua's log_event would.
if redis.call('HSETNX', KEYS[1], 'm', ARGV[1]) == 0 then return -1 end
if redis.call('LPUSH', KEYS[2], ARGV[2]) == 1 then
  redis.call('PUBLISH', ARGV[3], 'r:' .. ARGV[4])
end
if ARGV[6] ~= '0' then
  if ARGV[5] == '' then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*', 'k', 'e', 'i', ARGV[2], 's', '2')
  else
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*', 'k', 'e', 'i', ARGV[2], 's', '2', 't', ARGV[5])
  end
end
return 2
