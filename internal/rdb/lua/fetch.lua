-- fetch.lua: moves up to ARGV[2] pending tasks to active and grants each a
-- lease, within the queue's settings: the highest priority first, oldest
-- first within one; at priority 0, while tasks with a fair-sharing key are
-- pending, the lanes in turn within each key's limits (lanelib.lua,
-- broker.Broker.Fetch's doc).
-- KEYS[1] pending list  KEYS[2] active zset  KEYS[3] leases hash
-- KEYS[4] paused flag   KEYS[5] task key prefix  KEYS[6] settings hash
-- KEYS[7] event log (stream)  KEYS[8] this fetch's record (a string)
-- KEYS[9] the lease groups' counts (a hash)
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] max tasks  ARGV[3] lease ms
-- ARGV[4] the fetch's token P ("<server ID>/<random>", from the caller)
-- ARGV[5] event log length ('0' = off)
-- ARGV[6] '1' when ARGV[4] is used again (its record is then read)
-- ARGV[7] '1' when the caller reads plain tasks' messages itself (ext)
-- Returns {} when the queue is paused or empty; {-1, retry-in ms} when the
-- settings (max concurrency, rate limit, the keys' limits) allow no task
-- now; {-2, 0} when a call again has nothing to answer (the caller then
-- fetches with a new token); else {deadline ms, lease ms, form, then each
-- task: id, m when it has neither n, e nor f (a plain task), else 0, id,
-- m, n, e, f (an absent field false)}; or, when every task of the fetch
-- is plain and none came from a key's lane (the common case), {deadline
-- ms, lease ms, 3, the IDs, their messages} (two arrays, in order), with
-- ARGV[7] '1' {deadline ms, lease ms, 4, the IDs} (form 4: the caller
-- reads their messages, the string form's values, with MGET).
-- Every lease of one call has the token P (a task is leased at most once
-- per fetch, so that queue, ID and token name one lease), which the reply
-- does not repeat. form is 0 (or 3, above) for a fetch, 1 for a call
-- again (below), 2 for a call again that leaves tasks for the next. The
-- leases hash stores P, or P .. '+' when the task has a unique key, a
-- retention or a fair-sharing key, is watched or is a workflow task
-- (Complete must read it).
-- The leases of one fetch are a lease group (lib.lua): one member of the
-- active zset, GROUP .. P, scored by their deadline; KEYS[9] holds P ->
-- the number of leases; the record (KEYS[8], named after P) holds a first
-- line (the states of the log entry, or '@k' below) and then the group's
-- IDs, one a line, until the group is done (no expiry): the same string
-- as the started entry of the event log, made once. A call again with the
-- same token and ARGV[6] '1' (rdb.Fetch's, after an error that may hide a
-- reply) answers the tasks of the record that P still holds (the group's,
-- without a member of their own), the group's deadline renewed, and
-- leases no new task. When they are more than ARGV[2], it answers ARGV[2]
-- of them with form 2, and the record's first line becomes '@k', k the
-- IDs handed out, which the next call again skips.
-- An ID without a task (never written by these scripts) is dropped
-- from pending. The tasks' starts are logged in one entry (lib.lua's log_entry).
-- Settings (hash fields, settings.lua writes them): mc max concurrency,
-- rl rate (tasks/s), rb burst, ld lease ms; tk, tt the rate limit's token
-- bucket (tokens at time tt ms); pl, kk, kc, kr, kb the lanes' marks and
-- the keys' limits (lanelib.lua).
if ARGV[6] == '1' then
  local rec = redis.call('GET', KEYS[8])
  if not rec then return {-2, 0} end
  local t = now_ms(ARGV[1])
  local ld = tonumber(redis.call('HGET', KEYS[6], 'ld') or ARGV[3])
  local dl = istr(t + ld)
  local out = {t + ld, ld, 1}
  local room = tonumber(ARGV[2])
  local lines, nl, skip, stop = {}, 0, 0, nil
  local tok, tokp = ARGV[4], ARGV[4] .. '+'
  for id in string.gmatch(rec .. '\n', '([^\n]*)\n') do
    nl = nl + 1
    lines[nl] = id
    if nl == 1 then
      -- '@k': a call again handed out the first k IDs already.
      if string.byte(id, 1) == 64 then skip = tonumber(string.sub(id, 2)) end
    elseif nl - 1 > skip and not stop and id ~= '' then
      local h = redis.call('HGET', KEYS[3], id)
      if h and (h == tok or h == tokp) then
        local f = task_get(KEYS[5] .. id, 'm', 'n', 'e', 'f')
        if f[1] and room == 0 then
          stop = nl - 2 -- the IDs handed out: those before this one
        elseif f[1] then
          room = room - 1
          local full = f[2] or f[3] or f[4] -- not a plain task
          if full then out[#out + 1] = 0 end
          out[#out + 1] = id
          out[#out + 1] = f[1]
          if full then
            for j = 2, 4 do out[#out + 1] = f[j] end
          end
        end
      end
    end
  end
  if #out > 3 then
    redis.call('ZADD', KEYS[2], 'XX', dl, GROUP .. tok)
    if stop then
      lines[1] = '@' .. istr(stop)
      redis.call('SET', KEYS[8], table.concat(lines, '\n'))
      out[3] = 2
    end
    return out
  end
  -- Nothing left to answer: the caller leases afresh with a new token.
  if tonumber(redis.call('HGET', KEYS[9], tok) or '0') <= 0 then
    redis.call('ZREM', KEYS[2], GROUP .. tok)
    redis.call('DEL', KEYS[8])
    redis.call('HDEL', KEYS[9], tok)
  end
  return {-2, 0}
end
if redis.call('EXISTS', KEYS[4]) == 1 then return {} end
local max = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local cfg = redis.call('HMGET', KEYS[6], 'mc', 'rl', 'rb', 'ld', 'tk', 'tt', 'pl', 'kk', 'kc', 'kr', 'kb')
local mask = tonumber(cfg[7] or '0')
local keyed = cfg[8]
-- idle tells whether no lane holds a task.
local function idle()
  if keyed or redis.call('LLEN', KEYS[1]) > 0 then return false end
  for p = 1, 9 do
    if bit.band(mask, bit.lshift(1, p)) ~= 0 and redis.call('LLEN', KEYS[1] .. ':' .. p) > 0 then return false end
  end
  return true
end
local now, tokens
if cfg[1] or cfg[2] or cfg[4] then
  if cfg[4] then lease = tonumber(cfg[4]) end
  if cfg[1] then
    local room = tonumber(cfg[1]) - redis.call('HLEN', KEYS[3])
    if room <= 0 then
      if idle() then return {} end
      return {-1, 100}
    end
    if room < max then max = room end
  end
  if cfg[2] then
    local rate = tonumber(cfg[2])
    local burst = math.max(tonumber(cfg[3] or '1'), 1)
    now = now_ms(ARGV[1])
    tokens = burst
    if cfg[5] and cfg[6] then
      tokens = math.min(burst, tonumber(cfg[5]) + math.max(0, now - tonumber(cfg[6])) * rate / 1000)
    end
    if tokens < 1 then
      if idle() then return {} end
      return {-1, math.max(1, math.ceil((1 - tokens) * 1000 / rate))}
    end
    if math.floor(tokens) < max then max = math.floor(tokens) end
  end
end
local ids
local held = {} -- ID -> its key, for the tasks taken from a key's lane
if mask == 0 and not keyed then
  ids = redis.call('RPOP', KEYS[1], max)
  if not ids then return {} end
else
  ids = {}
  -- The priority lanes, highest first. A lane that gave fewer tasks than
  -- asked is empty: its mark is cleared.
  if mask ~= 0 then
    local keep = mask
    for p = 9, 1, -1 do
      local b = bit.lshift(1, p)
      if bit.band(mask, b) ~= 0 then
        local want = max - #ids
        local got = redis.call('RPOP', KEYS[1] .. ':' .. p, want)
        if got then
          for _, id in ipairs(got) do ids[#ids + 1] = id end
        end
        if not got or #got < want then keep = bit.band(keep, bit.bnot(b)) end
        if #ids == max then break end
      end
    end
    if keep == 0 then
      redis.call('HDEL', KEYS[6], 'pl')
    elseif keep ~= mask then
      redis.call('HSET', KEYS[6], 'pl', keep)
    end
  end
  if #ids < max and not keyed then
    local got = redis.call('RPOP', KEYS[1], max - #ids)
    if got then
      for _, id in ipairs(got) do ids[#ids + 1] = id end
    end
  elseif #ids < max then
    -- The rotation: each turn takes the oldest task of the lane at the
    -- front and puts the lane at the back, within its key's limits.
    local P = KEYS[1]
    local ring, wait, hheld = P .. ':ring', P .. ':wait', P .. ':held'
    now = now or now_ms(ARGV[1])
    for _, k in ipairs(redis.call('ZRANGEBYSCORE', wait, '-inf', now)) do
      redis.call('ZREM', wait, k)
      ring_join(P, k)
    end
    if redis.call('LLEN', P) > 0 then ring_join(P, '') end
    local cap = tonumber(cfg[9] or '0')
    local rate = tonumber(cfg[10] or '0')
    local burst = math.max(tonumber(cfg[11] or '1'), 1)
    -- The back of the rotation, kept here while lanes go to it.
    local last = redis.call('ZRANGE', ring, -1, -1, 'WITHSCORES')
    local back = last[2] and tonumber(last[2]) or 0
    while #ids < max do
      local k = redis.call('ZPOPMIN', ring)[1]
      if not k then break end
      local go = true
      if k ~= '' and cap > 0 and tonumber(redis.call('HGET', hheld, k) or '0') >= cap then
        go = false -- held back until a task of k ends (release_key)
      elseif k ~= '' and rate > 0 then
        local bk = P .. ':b:' .. k
        local v = redis.call('GET', bk)
        local tk = burst
        if v then
          local sep = string.find(v, ':', 1, true)
          tk = math.min(burst, tonumber(string.sub(v, 1, sep - 1)) + math.max(0, now - tonumber(string.sub(v, sep + 1))) * rate / 1000)
        end
        if tk < 1 then
          redis.call('ZADD', wait, now + math.ceil((1 - tk) * 1000 / rate), k)
          go = false
        else
          tk = tk - 1
          redis.call('SET', bk, string.format('%.17g', tk) .. ':' .. istr(now), 'PX', math.ceil((burst - tk) * 1000 / rate) + 1000)
        end
      end
      if go then
        local key = k ~= '' and k or nil
        local l = lane_of(P, nil, key)
        local id = redis.call('RPOP', l)
        if id then
          ids[#ids + 1] = id
          if key then
            held[id] = k
            redis.call('HINCRBY', hheld, k, 1)
          end
        end
        if id and redis.call('LLEN', l) > 0 then
          back = back + 1
          redis.call('ZADD', ring, back, k)
        else
          lane_left(P, KEYS[6], key)
        end
      end
    end
    if #ids == 0 and redis.call('ZCARD', P .. ':keys') > 0 then
      -- Every lane is held back by its key's limits.
      local w = 0
      local first = redis.call('ZRANGE', wait, 0, 0, 'WITHSCORES')
      if first[2] then w = math.max(tonumber(first[2]) - now, 1) end
      if redis.call('ZCARD', P .. ':keys') > redis.call('ZCARD', wait) and (w == 0 or w > 100) then w = 100 end
      if w > 0 then return {-1, w} end
    end
  end
  if #ids == 0 then return {} end
end
now = now or now_ms(ARGV[1])
local deadline = now + lease
local dl = istr(deadline) -- a number argument would be formatted once per task
local out = {deadline, lease, 0}
local no = 3 -- #out, kept here: # costs a search per use
local lset = {}
-- lg: the started entry of the event log and the record, one string made
-- once: the states first (set below), then the IDs.
local lg = {''}
local n = 0
local tokp -- ARGV[4] .. '+', made once when a task needs it
-- One MGET reads the tasks in the string form (lib.lua's task_get): it
-- answers nil for a hash, or no key, which HGETALL then reads (a task hash
-- holds few fields, and one argument costs Redis less than naming eight
-- that are mostly absent).
local tks = {}
for i, id in ipairs(ids) do tks[i] = KEYS[5] .. id end
-- grant writes the lease group of the n leases in lset (lib.lua), body
-- its record (the states line, then the IDs), and takes the n tasks from
-- the rate limit's bucket. The group has one member of the active zset:
-- 66 bytes or more (a control character, then the token), longer than
-- zset-max-listpack-value (64 by default), so that a new active zset is a
-- skiplist at once (docs/redis-layout.md). As a listpack, which Redis
-- keeps up to 128 members, every ZADD and ZREM scans and moves the whole
-- zset. The record lives as long as the group (no expiry).
local function grant(body)
  if n > 0 then
    redis.call('ZADD', KEYS[2], dl, GROUP .. ARGV[4])
    redis.call('HSET', KEYS[9], ARGV[4], n)
    call_many('HSET', KEYS[3], lset)
    if ARGV[5] ~= '0' then log_entry(KEYS[7], ARGV[5], ARGV[1], 's', body, '') end
    redis.call('SET', KEYS[8], body)
  end
  if tokens then
    redis.call('HSET', KEYS[6], 'tk', string.format('%.17g', tokens - n), 'tt', istr(now))
  end
end
-- ext (ARGV[7] '1'): the caller reads the messages of a batch of plain
-- tasks itself (form 4, below), for large messages: Lua hashes every byte
-- of a string it makes, so each task's type is asked instead of its
-- message read; a batch with another task is read as without ARGV[7].
local ext = ARGV[7] == '1' and next(held) == nil
if ext then
  for i = 1, #tks do
    if redis.call('TYPE', tks[i]).ok ~= 'string' then
      ext = false
      break
    end
  end
end
local strs
if ext then
  strs = ids -- every task plain: not read
elseif #tks <= 4000 then
  strs = redis.call('MGET', unpack(tks))
else
  strs = {}
  for a = 1, #tks, 4000 do
    local part = redis.call('MGET', unpack(tks, a, math.min(a + 3999, #tks)))
    for j = 1, #part do strs[a + j - 1] = part[j] end
  end
end
-- The common case: every task plain (a string), none taken from a key's
-- lane. The reply is then the RPOP's and the MGET's tables as they are
-- (form 3), and the record's lines are the IDs with the states at [0]:
-- no table is built per task but the leases' pairs.
local plain = next(held) == nil
if plain then
  for i = 1, #ids do
    if not strs[i] then
      plain = false
      break
    end
  end
end
if plain then
  n = #ids
  local tok = ARGV[4]
  for i = 1, n do
    lset[2 * i - 1] = ids[i]
    lset[2 * i] = tok
  end
  ids[0] = string.rep('1', n)
  grant(table.concat(ids, '\n', 0, n))
  ids[0] = nil
  if ext then return {deadline, lease, 4, ids} end
  return {deadline, lease, 3, ids, strs}
end
for i, id in ipairs(ids) do
  local m, rn, re, rf, read = strs[i], nil, nil, nil, false
  if not m then
    local f = redis.call('HGETALL', tks[i])
    for j = 1, #f, 2 do
      local k = f[j]
      if k == 'm' then m = f[j + 1]
      elseif k == 'n' then rn = f[j + 1]
      elseif k == 'e' then re = f[j + 1]
      elseif k == 'f' then rf = f[j + 1]
      elseif k == 'u' or k == 'R' or k == 'w' or k == 'W' then read = true
      end
    end
  end
  if m then
    n = n + 1
    local h = ARGV[4]
    if read or held[id] then
      tokp = tokp or ARGV[4] .. '+'
      h = tokp
    end
    lset[2 * n - 1] = id
    lset[2 * n] = h
    lg[n + 1] = id
    if rn or re or rf then
      out[no + 1] = 0
      out[no + 2] = id
      out[no + 3] = m
      out[no + 4] = rn or false
      out[no + 5] = re or false
      out[no + 6] = rf or false
      no = no + 6
    else
      out[no + 1] = id
      out[no + 2] = m
      no = no + 2
    end
  elseif held[id] then
    release_key(KEYS[1], held[id])
  end
end
lg[1] = string.rep('1', n)
grant(table.concat(lg, '\n'))
return out
