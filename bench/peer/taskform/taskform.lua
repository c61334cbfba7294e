-- taskform.lua: Redis time of the per-task commands of the two layouts of
-- a plain task (docs/redis-layout.md, "The string form"), run inside one
-- script so that no network or client time is counted.
-- ARGV[1] layout: 'hash' (before: a hash with field m), 'string' (the
-- string form) or 'hash-typed' (a hash, read as fetch.lua now reads a
-- task in either form: the cost a task with a retention pays)  ARGV[2] tasks  ARGV[3] message length (bytes)
-- Returns {enqueue µs, fetch µs, complete µs} for all tasks: enqueue is
-- the first write (HSETNX m, or SET NX), fetch the read of fetch.lua
-- (HMGET of 8 fields, or TYPE + GET), complete the DEL of complete.lua.
local layout, n = ARGV[1], tonumber(ARGV[2])
local msg = string.rep('x', tonumber(ARGV[3]))
local keys = {}
for i = 1, n do keys[i] = 'htq:{bench}:t:' .. string.format('%08x-0000-4000-8000-000000000000', i) end
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1e6 + tonumber(t[2])
end
local t0 = now()
if layout ~= 'string' then
  for i = 1, n do redis.call('HSETNX', keys[i], 'm', msg) end
else
  for i = 1, n do redis.call('SET', keys[i], msg, 'NX') end
end
local t1 = now()
if layout == 'hash' then
  for i = 1, n do redis.call('HMGET', keys[i], 'm', 'n', 'e', 'f', 'u', 'R', 'w', 'W') end
elseif layout == 'hash-typed' then
  for i = 1, n do
    if redis.call('TYPE', keys[i]).ok ~= 'string' then redis.call('HMGET', keys[i], 'm', 'n', 'e', 'f', 'u', 'R', 'w', 'W') end
  end
else
  for i = 1, n do
    if redis.call('TYPE', keys[i]).ok == 'string' then redis.call('GET', keys[i]) end
  end
end
local t2 = now()
for i = 1, n do redis.call('DEL', keys[i]) end
local t3 = now()
return {t1 - t0, t2 - t1, t3 - t2}
