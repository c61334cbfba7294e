-- unpause.lua: lets servers fetch a queue again (UnpauseQueue).
-- KEYS[1] paused flag  KEYS[2] pending list
-- ARGV[1] events channel  ARGV[2] queue name
-- Returns 1 when the queue was paused, 0 when not. Publishes r:<queue>
-- when it was paused and has pending tasks, to wake the servers.
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
if redis.call('LLEN', KEYS[2]) > 0 then
  redis.call('PUBLISH', ARGV[1], 'r:' .. ARGV[2])
end
return 1
