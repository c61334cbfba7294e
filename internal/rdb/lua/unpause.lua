-- unpause.lua: lets servers fetch a queue again (UnpauseQueue).
-- KEYS[1] paused flag  KEYS[2] pending list  KEYS[3] event log (stream)
-- ARGV[1] events channel  ARGV[2] queue name
-- ARGV[3] event time ms ('' = the log entry's)  ARGV[4] event log length
-- ('0' = off)
-- Returns 1 when the queue was paused, 0 when not. Publishes r:<queue>
-- when it was paused and has pending tasks, to wake the servers; logs
-- the resume (log_event) when it was paused.
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
log_event(KEYS[3], ARGV[4], ARGV[3], 'u', '', '', '')
if pending_count(KEYS[2]) > 0 then
  redis.call('PUBLISH', ARGV[1], 'r:' .. ARGV[2])
end
return 1
