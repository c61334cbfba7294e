-- watch.lua: marks a task so that completing or archiving it publishes
-- d:<queue>:<id> (WatchTask), and reads it as info.lua does. A task that
-- is completed or archived already is not marked. An active task's lease
-- token in the leases hash gets its '+' (Complete must read the task).
-- KEYS[1] task key  KEYS[2] active zset  KEYS[3] scheduled zset
-- KEYS[4] retry zset  KEYS[5] leases hash
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] task ID
-- Returns false when there is no such task, else {m, s, n, e, f, r, c,
-- score or false, now ms} as info.lua (an active task's score is its
-- lease's deadline, lib.lua's lease_deadline), with s the state digit (1 active,
-- 2 pending).
local id = ARGV[2]
local f = task_get(KEYS[1], 'm', 's', 'n', 'e', 'f', 'r', 'c')
if not f[1] then return false end
local held = redis.call('HGET', KEYS[5], id)
if held then
  f[2] = '1'
elseif not f[2] then
  f[2] = '2'
end
if f[2] ~= '5' and f[2] ~= '6' then
  task_hash(KEYS[1])
  redis.call('HSET', KEYS[1], 'w', '1')
  if held and not lease_read(held) then
    redis.call('HSET', KEYS[5], id, lease_readable(held))
  end
end
local score = false
if f[2] == '1' then
  score = lease_score(KEYS[2], id, held) or false
elseif f[2] == '3' then
  score = redis.call('ZSCORE', KEYS[3], id)
elseif f[2] == '4' then
  score = redis.call('ZSCORE', KEYS[4], id)
end
f[8] = score
f[9] = now_ms(ARGV[1])
return f
