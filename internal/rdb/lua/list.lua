-- list.lua: reads one page of the tasks of one structure of a queue, by
-- rank: O(log n + page), never a scan (read only).
-- KEYS[1] the structure (a zset, or the pending list)  KEYS[2] task key
-- prefix  KEYS[3] leases hash, KEYS[4] fetch record prefix (kind 'a')
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] 'p' (the pending lanes of
-- lanelib.lua in fetch order, each oldest first, that is from its right
-- end; O(lanes + log n + page)), 'z' (zset, lowest score first) or 'r'
-- (zset, highest score first) or 'a' (the active zset, earliest deadline
-- first, each lease group's member read as its tasks: those of its record
-- whose lease value is its token or with '+', lib.lua; O(active tasks
-- before the page))  ARGV[3] offset  ARGV[4] limit
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
elseif kind == 'a' then
  local start = 0
  while #ids < lim do
    local r = redis.call('ZRANGE', KEYS[1], start, start + 99, 'WITHSCORES')
    if #r == 0 then break end
    start = start + 100
    for i = 1, #r, 2 do
      local m = r[i]
      local page = {m}
      if string.byte(m, 1) == 2 then
        local tok = string.sub(m, 2)
        local tokp = tok .. '+'
        page = {}
        local rec = redis.call('GET', KEYS[4] .. tok)
        if rec then
          local cand, first = {}, true
          for id in string.gmatch(rec, '[^\n]+') do
            if first then first = false else cand[#cand + 1] = id end
          end
          for a = 1, #cand, 4000 do
            local held = redis.call('HMGET', KEYS[3], unpack(cand, a, math.min(a + 3999, #cand)))
            for j = 1, #held do
              if held[j] == tok or held[j] == tokp then page[#page + 1] = cand[a + j - 1] end
            end
          end
        end
      end
      for _, id in ipairs(page) do
        if off > 0 then
          off = off - 1
        elseif #ids < lim then
          ids[#ids + 1] = id
          scores[#ids] = r[i + 1]
        end
      end
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
