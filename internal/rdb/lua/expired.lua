-- expired.lua: lists active tasks whose lease deadline has passed, and
-- drops the lease groups that govern no lease any more.
-- KEYS[1] active zset  KEYS[2] leases hash  KEYS[3] task key prefix
-- KEYS[4] the lease groups' counts  KEYS[5] fetch record prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] limit
-- Returns {id, token, deadline ms, m, n, e, f, id, ...}, at most limit
-- tasks. A due member of the active zset that is an ID is a lease of its
-- own (lib.lua); a due lease group's expired leases are those of its
-- record's IDs whose value is still its token (or with '+'): not ended,
-- without a member of their own. Such a group stays until the recoverer
-- ends them (Retry or Archive lower its count); one holding none is
-- dropped here. A group without a record (none is written so; a leak
-- must not lose tasks) is read from the leases hash (HSCAN).
local now = now_ms(ARGV[1])
local limit = tonumber(ARGV[2])
local lk = {KEYS[1], KEYS[2], KEYS[4], KEYS[5]}
local out, n = {}, 0
local function add(id, tok, d)
  local f = task_get(KEYS[3] .. id, 'm', 'n', 'e', 'f')
  if not f[1] then return end
  n = n + 1
  out[#out + 1] = id
  out[#out + 1] = tok
  out[#out + 1] = d
  out[#out + 1] = f[1]
  out[#out + 1] = f[2]
  out[#out + 1] = f[3]
  out[#out + 1] = f[4]
end
-- Due members in pages: a group may hold fewer tasks than limit, or none.
local off = 0
while n < limit do
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', off, limit)
  if #due == 0 then break end
  off = off + #due / 2
  for i = 1, #due, 2 do
    if n >= limit then break end
    local m, d = due[i], tonumber(due[i + 1])
    if string.byte(m, 1) == 2 then -- a lease group
      local tok = string.sub(m, 2)
      local tokp = tok .. '+'
      local rec = redis.call('GET', KEYS[5] .. tok)
      local ids = {}
      if rec then
        local first = true -- the first line holds no ID (fetch.lua)
        for id in string.gmatch(rec, '[^\n]+') do
          if first then first = false else ids[#ids + 1] = id end
        end
      else
        local cur = '0'
        repeat
          local r = redis.call('HSCAN', KEYS[2], cur, 'COUNT', 1000)
          cur = r[1]
          for j = 1, #r[2], 2 do
            if r[2][j + 1] == tok or r[2][j + 1] == tokp then ids[#ids + 1] = r[2][j] end
          end
        until cur == '0'
      end
      local held = {}
      for a = 1, #ids, 4000 do
        local part = redis.call('HMGET', KEYS[2], unpack(ids, a, math.min(a + 3999, #ids)))
        for j = 1, #part do held[a + j - 1] = part[j] end
      end
      local any = false
      for j = 1, #ids do
        local h = held[j]
        if h == tok or h == tokp then
          any = true
          if n < limit then add(ids[j], tok, d) end
        end
      end
      if not any then
        group_drop(lk, tok)
        off = off - 1
      end
    else
      local h = redis.call('HGET', KEYS[2], m)
      if h then add(m, (lease_parse(h)), d) end
    end
  end
end
return out
