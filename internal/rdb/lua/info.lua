-- info.lua: reads one task (read only).
-- KEYS[1] task key  KEYS[2] active zset  KEYS[3] scheduled zset
-- KEYS[4] retry zset  KEYS[5] leases hash
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] task ID
-- Returns false when there is no such task, else
-- {m, s, n, e, f, r, c, score or false, now ms} where score is the lease
-- deadline (active: its own member's score, else its lease group's,
-- lib.lua) or the due time (scheduled, retry).
local f = task_get(KEYS[1], 'm', 's', 'n', 'e', 'f', 'r', 'c')
if not f[1] then return false end
local held = redis.call('HGET', KEYS[5], ARGV[2])
if held then
  f[2] = '1'
elseif not f[2] then
  f[2] = '2'
end
local score = false
if f[2] == '1' then
  score = lease_score(KEYS[2], ARGV[2], held) or false
elseif f[2] == '3' then
  score = redis.call('ZSCORE', KEYS[3], ARGV[2])
elseif f[2] == '4' then
  score = redis.call('ZSCORE', KEYS[4], ARGV[2])
end
f[8] = score
f[9] = now_ms(ARGV[1])
return f
