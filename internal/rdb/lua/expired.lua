-- expired.lua: lists active tasks whose lease deadline has passed
-- (read only).
-- KEYS[1] active zset  KEYS[2] leases hash  KEYS[3] task key prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] limit
-- Returns {id, token, deadline ms, m, n, e, f, id, ...}.
local now = now_ms(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for i = 1, #ids, 2 do
  local id = ids[i]
  local tok = redis.call('HGET', KEYS[2], id)
  if tok and string.byte(tok, -1) == 43 then tok = string.sub(tok, 1, -2) end
  local f = task_get(KEYS[3] .. id, 'm', 'n', 'e', 'f')
  if tok and f[1] then
    out[#out + 1] = id
    out[#out + 1] = tok
    out[#out + 1] = tonumber(ids[i + 1])
    out[#out + 1] = f[1]
    out[#out + 1] = f[2]
    out[#out + 1] = f[3]
    out[#out + 1] = f[4]
  end
end
return out
