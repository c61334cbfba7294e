-- delete_queue_batch.lua: deletes up to ARGV[1] tasks of a queue that
-- delete_queue.lua paused, from every structure but active (which is
-- empty), releasing their uniqueness locks.
-- KEYS[1] pending list (and its lanes, lanelib.lua)  KEYS[2] scheduled zset  KEYS[3] retry zset
-- KEYS[4] archived zset  KEYS[5] completed zset  KEYS[6] groups set
-- KEYS[7] group zset prefix  KEYS[8] aggregation sets zset
-- KEYS[9] aggregation set prefix  KEYS[10] task key prefix
-- KEYS[11] unique lock prefix  KEYS[12] waiting zset
-- Workflow tasks are deleted as plain tasks: no workflow rule applies.
-- ARGV[1] batch size
-- Returns how many entries were taken; 0 when nothing is left.
local n = tonumber(ARGV[1])
local taken = 0
local function drop(ids)
  for _, id in ipairs(ids) do drop_task(KEYS[10] .. id, KEYS[11], id) end
  taken = taken + #ids
end
local function popz(key)
  local r = redis.call('ZPOPMIN', key, n - taken)
  local ids = {}
  for i = 1, #r, 2 do ids[#ids + 1] = r[i] end
  drop(ids)
end
for _, l in ipairs(pending_lists(KEYS[1])) do
  if taken < n then drop(redis.call('RPOP', l, n - taken) or {}) end
end
for i = 2, 5 do
  if taken < n then popz(KEYS[i]) end
end
if taken < n then popz(KEYS[12]) end
for _, g in ipairs(redis.call('SMEMBERS', KEYS[6])) do
  if taken >= n then break end
  popz(KEYS[7] .. g)
  if redis.call('EXISTS', KEYS[7] .. g) == 0 then redis.call('SREM', KEYS[6], g) end
end
while taken < n do
  local s = redis.call('ZRANGE', KEYS[8], 0, 0)[1]
  if not s then break end
  local m = agg_members(KEYS[9] .. s)
  local ids = {}
  for i = 1, #m, 2 do ids[#ids + 1] = m[i] end
  drop(ids)
  taken = taken + 1 -- an empty set counts, so that the caller goes on
  redis.call('DEL', KEYS[9] .. s)
  redis.call('ZREM', KEYS[8], s)
end
return taken
