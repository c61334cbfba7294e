-- groups.lua: lists the groups of a queue with their sizes (read only).
-- KEYS[1] groups set  KEYS[2] group zset prefix
-- Returns {group, size, group, size, ...} (unsorted).
local out = {}
for _, g in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local n = redis.call('ZCARD', KEYS[2] .. g)
  if n > 0 then
    out[#out + 1] = g
    out[#out + 1] = n
  end
end
return out
