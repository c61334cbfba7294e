-- pause.lua: stops servers from fetching a queue (PauseQueue).
-- KEYS[1] paused flag  KEYS[2] event log (stream)
-- ARGV[1] event time ms ('' = the log entry's)  ARGV[2] event log length
-- ('0' = off)
-- Returns 1 when the queue was not paused, 0 when it was. Logs the pause
-- (log_event) when it was not paused.
if not redis.call('SET', KEYS[1], '1', 'NX') then return 0 end
log_event(KEYS[2], ARGV[2], ARGV[1], 'p', '', '', '')
return 1
