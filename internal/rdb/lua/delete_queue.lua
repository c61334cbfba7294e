-- delete_queue.lua: checks that a queue may be deleted and deletes it when
-- it holds no task; with force, a queue that holds tasks is paused so that
-- delete_queue_batch.lua can delete them in batches (DeleteQueue).
-- KEYS[1] pending list (and its lanes, lanelib.lua)  KEYS[2] active zset  KEYS[3] leases hash
-- KEYS[4] scheduled zset  KEYS[5] retry zset  KEYS[6] archived zset
-- KEYS[7] completed zset  KEYS[8] groups set  KEYS[9] aggregation sets zset
-- KEYS[10] paused flag  KEYS[11] settings hash  KEYS[12] processed counter
-- KEYS[13] failed counter  KEYS[14] event log (stream)  KEYS[15] waiting zset
-- KEYS[16] the lease groups' counts
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] '1' to delete tasks too (force)
-- Returns -1 when the queue holds tasks and ARGV[2] is not '1', -2 when it
-- holds active tasks, 0 when it held no task and every key of it is
-- deleted, else the number of tasks left (the queue is then paused).
if redis.call('HLEN', KEYS[3]) > 0 or redis.call('ZCARD', KEYS[2]) > 0 then return -2 end
local left = pending_count(KEYS[1]) + redis.call('SCARD', KEYS[8]) + redis.call('ZCARD', KEYS[9]) +
  redis.call('ZCARD', KEYS[15])
for i = 4, 7 do left = left + redis.call('ZCARD', KEYS[i]) end
if left > 0 then
  if ARGV[2] ~= '1' then return -1 end
  redis.call('SET', KEYS[10], '1')
  return left
end
-- Day counters expire 90 days after their creation; delete those that may
-- still be there.
local today = math.floor(now_ms(ARGV[1]) / 86400000)
local dels = {}
for d = today - 91, today + 1 do
  dels[#dels + 1] = KEYS[12] .. ':' .. istr(d)
  dels[#dels + 1] = KEYS[13] .. ':' .. istr(d)
end
for i = 8, 14 do dels[#dels + 1] = KEYS[i] end
dels[#dels + 1] = KEYS[16]
for _, s in ipairs({':keys', ':ring', ':wait', ':held'}) do dels[#dels + 1] = KEYS[1] .. s end
redis.call('DEL', unpack(dels))
return 0
