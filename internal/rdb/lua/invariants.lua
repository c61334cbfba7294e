-- invariants.lua: checks the consistency of one queue (read only; for
-- tests and operators, it reads every key of the queue).
-- KEYS[1] task hash prefix  KEYS[2] pending list  KEYS[3] active zset
-- KEYS[4] scheduled zset  KEYS[5] retry zset  KEYS[6] archived zset
-- KEYS[7] completed zset  KEYS[8] groups set  KEYS[9] group zset prefix
-- KEYS[10] leases hash  KEYS[11] aggregation sets zset
-- KEYS[12] aggregation set prefix (hashes; fields "i:<id>" are its tasks)
-- ARGV[1] glob matching every task hash of the queue (not a key: escaping
-- can change its hash tag)
-- Returns a list of violations (strings); empty when consistent.
local bad = {}
local where = {}
local function add(id, name, state)
  local w = where[id]
  if not w then
    w = {}
    where[id] = w
  end
  w[#w + 1] = {name, state}
end
for _, id in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do add(id, 'pending', '2') end
local zsets = {{KEYS[3], 'active', '1'}, {KEYS[4], 'scheduled', '3'}, {KEYS[5], 'retry', '4'},
  {KEYS[6], 'archived', '5'}, {KEYS[7], 'completed', '6'}}
for _, z in ipairs(zsets) do
  for _, id in ipairs(redis.call('ZRANGE', z[1], 0, -1)) do add(id, z[2], z[3]) end
end
for _, g in ipairs(redis.call('SMEMBERS', KEYS[8])) do
  local ids = redis.call('ZRANGE', KEYS[9] .. g, 0, -1)
  if #ids == 0 then bad[#bad + 1] = 'group ' .. g .. ' listed but empty' end
  for _, id in ipairs(ids) do add(id, 'group ' .. g, '7') end
end
for _, set in ipairs(redis.call('ZRANGE', KEYS[11], 0, -1)) do
  local fields = redis.call('HKEYS', KEYS[12] .. set)
  if #fields == 0 then bad[#bad + 1] = 'aggregation set ' .. set .. ' listed but missing' end
  for _, f in ipairs(fields) do
    if string.sub(f, 1, 2) == 'i:' then add(string.sub(f, 3), 'aggregation set ' .. set, '7') end
  end
end
local seen = {}
local plen = string.len(KEYS[1])
for _, key in ipairs(redis.call('KEYS', ARGV[1])) do
  local id = string.sub(key, plen + 1)
  seen[id] = true
  local f = redis.call('HMGET', key, 's', 'm')
  f[3] = f[2]
  f[2] = redis.call('HGET', KEYS[10], id)
  -- Pending and active tasks have s absent or 2; the leases hash tells
  -- active.
  if f[1] == '1' then bad[#bad + 1] = 'task ' .. id .. ' has s = 1 (active is told by the leases hash)' end
  if f[2] then
    if f[1] and f[1] ~= '2' then bad[#bad + 1] = 'leased task ' .. id .. ' has s = ' .. f[1] .. ', want none or 2' end
    f[1] = '1'
  elseif not f[1] then
    f[1] = '2'
  end
  local w = where[id]
  if not f[3] then bad[#bad + 1] = 'task ' .. id .. ': no message field' end
  if not w then
    bad[#bad + 1] = 'task ' .. id .. ' (state ' .. tostring(f[1]) .. ') is in no structure'
  else
    if #w > 1 then
      local names = {}
      for _, e in ipairs(w) do names[#names + 1] = e[1] end
      bad[#bad + 1] = 'task ' .. id .. ' is in ' .. #w .. ' structures: ' .. table.concat(names, ', ')
    end
    for _, e in ipairs(w) do
      if f[1] ~= e[2] then
        bad[#bad + 1] = 'task ' .. id .. ' has state ' .. tostring(f[1]) .. ' but is in ' .. e[1]
      end
    end
  end
  if f[1] == '1' then
    if not f[2] or f[2] == '' then bad[#bad + 1] = 'active task ' .. id .. ' has no lease token' end
    if not redis.call('ZSCORE', KEYS[3], id) then bad[#bad + 1] = 'active task ' .. id .. ' has no active-zset entry' end
  elseif f[2] then
    bad[#bad + 1] = 'task ' .. id .. ' in state ' .. tostring(f[1]) .. ' has a lease token'
  end
end
for _, id in ipairs(redis.call('HKEYS', KEYS[10])) do
  if not seen[id] then bad[#bad + 1] = 'lease of ' .. id .. ' has no task hash' end
end
for id, w in pairs(where) do
  if not seen[id] then
    for _, e in ipairs(w) do
      bad[#bad + 1] = e[1] .. ' entry ' .. id .. ' has no task hash'
    end
  end
end
table.sort(bad)
return bad
