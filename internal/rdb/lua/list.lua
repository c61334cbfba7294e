-- list.lua: reads one page of the tasks of one structure of a queue, by
-- rank: O(log n + page), never a scan (read only).
-- KEYS[1] the structure (a zset, or the pending list)  KEYS[2] task key
-- prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] 'p' (the pending lanes of
-- lanelib.lua in fetch order, each oldest first, that is from its right
-- end; O(lanes + log n + page)), 'z' (zset, lowest score first) or 'r'
-- (zset, highest score first)  ARGV[3] offset  ARGV[4] limit
-- Returns {now ms, id, score (false for the list), m, n, e, f, r, c, id,
-- ...}; an entry without a task is left out.
local now = now_ms(ARGV[1])
local kind, off, lim = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local ids, scores = {}, {}
if kind == 'p' then
  for _, l in ipairs(pending_lists(KEYS[1])) do
    local n = redis.call('LLEN', l)
    if off >= n then
      off = off - n
    else
      local r = redis.call('LRANGE', l, -math.min(off + lim - #ids, n), -(off + 1))
      for i = #r, 1, -1 do ids[#ids + 1] = r[i] end
      off = 0
      if #ids >= lim then break end
    end
  end
else
  local r
  if kind == 'z' then
    r = redis.call('ZRANGE', KEYS[1], off, off + lim - 1, 'WITHSCORES')
  else
    r = redis.call('ZREVRANGE', KEYS[1], off, off + lim - 1, 'WITHSCORES')
  end
  for i = 1, #r, 2 do
    ids[#ids + 1] = r[i]
    scores[#ids] = r[i + 1]
  end
end
local out = {now}
for i, id in ipairs(ids) do
  local f = task_get(KEYS[2] .. id, 'm', 'n', 'e', 'f', 'r', 'c')
  if f[1] then
    out[#out + 1] = id
    out[#out + 1] = scores[i] or false
    for j = 1, 6 do out[#out + 1] = f[j] end
  end
end
return out
