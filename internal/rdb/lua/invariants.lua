-- invariants.lua: checks the consistency of one queue (read only; for
-- tests and operators, it reads every key of the queue).
-- KEYS[1] task key prefix  KEYS[2] pending list  KEYS[3] active zset
-- KEYS[4] scheduled zset  KEYS[5] retry zset  KEYS[6] archived zset
-- KEYS[7] completed zset  KEYS[8] groups set  KEYS[9] group zset prefix
-- KEYS[10] leases hash  KEYS[11] aggregation sets zset
-- KEYS[12] aggregation set prefix (hashes; fields "i:<id>" are its tasks)
-- KEYS[13] settings hash  KEYS[14] waiting zset
-- KEYS[15] the lease groups' counts  KEYS[16] fetch record prefix
-- ARGV[1] glob matching every task key of the queue (not a key: escaping
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
-- lane_name names a pending lane in the violations: 'pending' for the
-- pending list, 'pending:<p>' for the lane of priority p, 'pending:k:<key>'
-- for the lane of a key.
local function lane_name(l)
  return 'pending' .. string.sub(l, string.len(KEYS[2]) + 1)
end
for _, l in ipairs(pending_lists(KEYS[2])) do
  for _, id in ipairs(redis.call('LRANGE', l, 0, -1)) do add(id, lane_name(l), '2') end
end
local zsets = {{KEYS[3], 'active', '1'}, {KEYS[4], 'scheduled', '3'}, {KEYS[5], 'retry', '4'},
  {KEYS[6], 'archived', '5'}, {KEYS[7], 'completed', '6'}, {KEYS[14], 'waiting', '8'}}
local gz = {} -- the lease groups' members of the active zset: token -> true
for _, z in ipairs(zsets) do
  for _, id in ipairs(redis.call('ZRANGE', z[1], 0, -1)) do
    if z[3] == '1' and string.byte(id, 1) == 2 then
      gz[string.sub(id, 2)] = true
    else
      add(id, z[2], z[3])
    end
  end
end
-- The lease groups (lib.lua): a lease without a member of its own is in
-- its group (which must be in the active zset, list the task in its
-- record and count it); the counts hash counts exactly those.
local gn, grec = {}, {}
local lh = redis.call('HGETALL', KEYS[10])
for i = 1, #lh, 2 do
  local id, tok, _, own = lh[i], lease_parse(lh[i + 1])
  if not own then
    gn[tok] = (gn[tok] or 0) + 1
    add(id, 'lease group ' .. tok, '1')
    if not gz[tok] then bad[#bad + 1] = 'lease of ' .. id .. ': its group ' .. tok .. ' has no member in the active zset' end
    if grec[tok] == nil then
      grec[tok] = {}
      local rec = redis.call('GET', KEYS[16] .. tok)
      if not rec then
        bad[#bad + 1] = 'lease group ' .. tok .. ' has no record'
      else
        local first = true -- the first line holds no ID (fetch.lua)
        for l in string.gmatch(rec, '[^\n]+') do
          if first then first = false else grec[tok][l] = true end
        end
      end
    end
    if not grec[tok][id] then bad[#bad + 1] = 'lease of ' .. id .. ': its group ' .. tok .. "'s record does not list it" end
  end
end
local ch = redis.call('HGETALL', KEYS[15])
local counted = {}
for i = 1, #ch, 2 do
  counted[ch[i]] = true
  if tonumber(ch[i + 1]) ~= (gn[ch[i]] or 0) then
    bad[#bad + 1] = 'lease group ' .. ch[i] .. ' counts ' .. ch[i + 1] .. ' leases, it governs ' .. (gn[ch[i]] or 0)
  end
  if not gz[ch[i]] then bad[#bad + 1] = 'lease group ' .. ch[i] .. ' is counted but has no member in the active zset' end
end
for tok in pairs(gz) do
  if not counted[tok] then bad[#bad + 1] = 'lease group ' .. tok .. ' is in the active zset but has no count' end
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
local held_by = {} -- key -> its active tasks
local plen = string.len(KEYS[1])
for _, key in ipairs(redis.call('KEYS', ARGV[1])) do
  local id = string.sub(key, plen + 1)
  seen[id] = true
  local f = task_get(key, 's', 'm', 'P', 'k')
  local prio, fkey = f[3], f[4]
  f[3] = f[2]
  f[4] = nil
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
  local own = lane_name(lane_of(KEYS[2], prio, fkey))
  if f[1] == '2' and w and #w == 1 and w[1][1] ~= own then
    bad[#bad + 1] = 'pending task ' .. id .. ' waits in ' .. w[1][1] .. ', not in its lane ' .. own
  end
  if f[2] and fkey then held_by[fkey] = (held_by[fkey] or 0) + 1 end
  if f[1] == '2' and fkey and not prio and not redis.call('ZSCORE', KEYS[2] .. ':keys', fkey) then
    bad[#bad + 1] = 'pending task ' .. id .. ' has key ' .. fkey .. ', which is not listed'
  end
  if f[1] == '1' then
    if not f[2] or f[2] == '' then bad[#bad + 1] = 'active task ' .. id .. ' has no lease token' end
    if not where[id] then bad[#bad + 1] = 'active task ' .. id .. ' has no active-zset entry' end
  elseif f[2] then
    bad[#bad + 1] = 'task ' .. id .. ' in state ' .. tostring(f[1]) .. ' has a lease token'
  end
end
for _, id in ipairs(redis.call('HKEYS', KEYS[10])) do
  if not seen[id] then bad[#bad + 1] = 'lease of ' .. id .. ' has no task' end
end
for id, w in pairs(where) do
  if not seen[id] then
    for _, e in ipairs(w) do
      bad[#bad + 1] = e[1] .. ' entry ' .. id .. ' has no task'
    end
  end
end
-- The fair-sharing state (lanelib.lua).
local P = KEYS[2]
local listed = redis.call('ZRANGE', P .. ':keys', 0, -1)
for _, k in ipairs(listed) do
  if redis.call('LLEN', P .. ':k:' .. k) == 0 then bad[#bad + 1] = 'key ' .. k .. ' is listed but its lane is empty' end
  if not redis.call('ZSCORE', P .. ':ring', k) and not redis.call('ZSCORE', P .. ':wait', k) and not redis.call('HGET', P .. ':held', k) then
    bad[#bad + 1] = 'key ' .. k .. ' has pending tasks but is neither in the rotation, waiting nor held back'
  end
end
if (#listed > 0) ~= (redis.call('HEXISTS', KEYS[13], 'kk') == 1) then
  bad[#bad + 1] = 'the settings flag kk disagrees with the ' .. #listed .. ' listed keys'
end
for _, m in ipairs(redis.call('ZRANGE', P .. ':ring', 0, -1)) do
  if redis.call('LLEN', lane_of(P, nil, m ~= '' and m or nil)) == 0 then
    bad[#bad + 1] = 'the rotation holds the empty lane of key "' .. m .. '"'
  end
end
if #listed == 0 and redis.call('EXISTS', P .. ':ring') == 1 then bad[#bad + 1] = 'the rotation holds lanes and no task with a key is pending' end
for _, k in ipairs(redis.call('ZRANGE', P .. ':wait', 0, -1)) do
  if redis.call('LLEN', P .. ':k:' .. k) == 0 then bad[#bad + 1] = 'key ' .. k .. ' waits with an empty lane' end
end
local hh = redis.call('HGETALL', P .. ':held')
for i = 1, #hh, 2 do
  if tonumber(hh[i + 1]) ~= (held_by[hh[i]] or 0) then
    bad[#bad + 1] = 'key ' .. hh[i] .. ' counts ' .. hh[i + 1] .. ' active tasks, it has ' .. (held_by[hh[i]] or 0)
  end
  held_by[hh[i]] = nil
end
for k, n in pairs(held_by) do bad[#bad + 1] = 'key ' .. k .. ' has ' .. n .. ' active tasks and no count' end
table.sort(bad)
return bad
