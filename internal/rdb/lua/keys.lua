-- keys.lua: lists the fair-sharing keys of a queue that have pending or
-- active tasks, sorted by key (read only; O(keys), see lanelib.lua).
-- KEYS[1] pending list
-- Returns {key, pending, active, key, ...}.
local P = KEYS[1]
local seen, names, active = {}, {}, {}
for _, k in ipairs(redis.call('ZRANGE', P .. ':keys', 0, -1)) do
  seen[k] = true
  names[#names + 1] = k
end
local held = redis.call('HGETALL', P .. ':held')
for i = 1, #held, 2 do
  active[held[i]] = tonumber(held[i + 1])
  if not seen[held[i]] then names[#names + 1] = held[i] end
end
table.sort(names)
local out = {}
for _, k in ipairs(names) do
  out[#out + 1] = k
  out[#out + 1] = redis.call('LLEN', P .. ':k:' .. k)
  out[#out + 1] = active[k] or 0
end
return out
