-- taskform.lua: Redis time of the per-task commands of the two layouts of
-- a plain task (docs/redis-layout.md, "The string form"), run inside one
-- script so that no network or client time is counted.
-- ARGV[1] layout: 'hash' (before: a hash with field m, read by HMGET),
-- 'string' (the string form, read as fetch.lua reads a batch: one MGET)
-- or 'hash-mget' (a hash read as fetch.lua now reads it: its nil in the
-- batch's MGET, then HMGET: the cost a task with a retention pays)
-- ARGV[2] tasks  ARGV[3] message length (bytes)  ARGV[4] fetch batch size
-- Returns {enqueue µs, fetch µs, complete µs} for all tasks: enqueue is
-- the first write (HSETNX m, or SET NX), fetch the read of fetch.lua,
-- complete the DEL of complete.lua.
local layout, n, batch = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
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
else
  for a = 1, n, batch do
    local e = math.min(a + batch - 1, n)
    local got = redis.call('MGET', unpack(keys, a, e))
    for j = 1, #got do
      if not got[j] then redis.call('HMGET', keys[a + j - 1], 'm', 'n', 'e', 'f', 'u', 'R', 'w', 'W') end
    end
  end
end
local t2 = now()
for i = 1, n do redis.call('DEL', keys[i]) end
local t3 = now()
return {t1 - t0, t2 - t1, t3 - t2}
