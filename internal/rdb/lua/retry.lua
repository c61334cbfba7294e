-- retry.lua: moves an active task to retry after a failed attempt.
-- KEYS[1] task key  KEYS[2] active zset  KEYS[3] leases hash
-- KEYS[4] retry zset  KEYS[5] processed counter  KEYS[6] failed counter
-- KEYS[7] event log (stream)  KEYS[8] pending list (the lanes, lanelib.lua)
-- KEYS[9] the lease groups' counts  KEYS[10] fetch record prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] task ID  ARGV[3] lease token
-- ARGV[4] delay ms  ARGV[5] error message  ARGV[6] '1' is a failure: it
-- counts in Retried and the failed counters
-- ARGV[7] '1' requires the lease to have expired
-- ARGV[8] events channel  ARGV[9] queue name
-- ARGV[10] event log length ('0' = off)
-- Returns 1 when moved, 0 when the lease is lost (not active, other token,
-- or, with ARGV[7], not expired yet), 2 when nothing was written because
-- the task's workflow was canceled (the caller archives it instead).
-- Publishes s:<queue> when the task became the earliest retry task. Logs
-- the failure (log_event). A task with a fair-sharing key frees its key's
-- slot (publishing r:<queue> when a key held back rejoins).
local id = ARGV[2]
local h = redis.call('HGET', KEYS[3], id)
if not holds(h, ARGV[3]) then return 0 end
local now = now_ms(ARGV[1])
if ARGV[7] == '1' then
  local d = lease_deadline(KEYS[2], id, h)
  if not d or d > now then return 0 end
end
local wk = task_get(KEYS[1], 'W')[1]
if wk and redis.call('HGET', wk, 'x') == '1' then return 2 end
if lease_end({KEYS[2], KEYS[3], KEYS[9], KEYS[10]}, id, h) then -- '+': the task may have a key
  local k = redis.call('HGET', KEYS[1], 'k')
  if k and release_key(KEYS[8], k) then redis.call('PUBLISH', ARGV[8], 'r:' .. ARGV[9]) end
end
task_hash(KEYS[1])
redis.call('HSET', KEYS[1], 's', '4', 'e', ARGV[5], 'f', istr(now))
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[4]), id)
count(KEYS[5], now, 1)
if ARGV[6] == '1' then
  redis.call('HINCRBY', KEYS[1], 'n', 1)
  count(KEYS[6], now, 1)
end
if is_earliest(KEYS[4], id) then
  redis.call('PUBLISH', ARGV[8], 's:' .. ARGV[9])
end
log_event(KEYS[7], ARGV[10], ARGV[1], 'f', id, '4', ARGV[5])
return 1
