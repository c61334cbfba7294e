-- archive.lua: moves an active task to archived after its last failure and
-- trims the archive to its newest ARGV[6] tasks and ARGV[7] ms of age.
-- KEYS[1] task key  KEYS[2] active zset  KEYS[3] leases hash
-- KEYS[4] archived zset  KEYS[5] task key prefix  KEYS[6] unique lock prefix
-- KEYS[7] processed counter  KEYS[8] failed counter
-- KEYS[9] event log (stream)  KEYS[10] pending list (the lanes, lanelib.lua)
-- KEYS[11] the lease groups' counts  KEYS[12] fetch record prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] task ID  ARGV[3] lease token
-- ARGV[4] error message  ARGV[5] '1' requires the lease to have expired
-- ARGV[6] max archive size  ARGV[7] max archive age ms
-- ARGV[8] events channel  ARGV[9] queue name
-- ARGV[10] event log length ('0' = off)
-- Returns 1 when archived, 0 when the lease is lost. Publishes
-- d:<queue>:<id> when the task is watched. Logs the failure (log_event),
-- then applies it to the task's workflow, if any (wf_finish). Prepended:
-- lib.lua, lanelib.lua, wflib.lua.
local id = ARGV[2]
local h = redis.call('HGET', KEYS[3], id)
if not holds(h, ARGV[3]) then return 0 end
local now = now_ms(ARGV[1])
if ARGV[5] == '1' then
  local d = lease_deadline(KEYS[2], id, h)
  if not d or d > now then return 0 end
end
local wf = task_get(KEYS[1], 'W', 'N')
if lease_end({KEYS[2], KEYS[3], KEYS[11], KEYS[12]}, id, h) then -- '+': the task may have a key
  local k = redis.call('HGET', KEYS[1], 'k')
  if k and release_key(KEYS[10], k) then redis.call('PUBLISH', ARGV[8], 'r:' .. ARGV[9]) end
end
task_hash(KEYS[1])
redis.call('HSET', KEYS[1], 's', '5', 'e', ARGV[4], 'f', istr(now))
redis.call('ZADD', KEYS[4], now, id)
count(KEYS[7], now, 1)
count(KEYS[8], now, 1)
if redis.call('HEXISTS', KEYS[1], 'w') == 1 then
  redis.call('PUBLISH', ARGV[8], 'd:' .. ARGV[9] .. ':' .. id)
end
trim_archive(KEYS[4], KEYS[5], KEYS[6], now, tonumber(ARGV[6]), tonumber(ARGV[7]))
log_event(KEYS[9], ARGV[10], ARGV[1], 'f', id, '5', ARGV[4])
if wf[1] then wf_finish(wf[1], wf[2], 'f', ARGV[4], nil, now, ARGV[8], ARGV[10], ARGV[1]) end
return 1
