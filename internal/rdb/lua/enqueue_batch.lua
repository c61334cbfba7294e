-- enqueue_batch.lua: stores many new tasks of one queue (a chunk of
-- EnqueueBatch), each as enqueue.lua would, one after the other in order.
-- KEYS[1] pending list       KEYS[2] scheduled zset   KEYS[3] task key prefix
-- KEYS[4] unique lock prefix KEYS[5] group zset prefix KEYS[6] groups set
-- KEYS[7] event log (stream)  KEYS[8] settings hash (the lanes' marks,
-- lanelib.lua)
-- ARGV[1] now ms ('' = Redis TIME)   ARGV[2] events channel
-- ARGV[3] queue name                 ARGV[4] kinds: one byte per task, '.'
--   plain (pending now; no unique key, group or retention), 'r' plain with
--   a retention, 'x' any other
-- ARGV[5] event log length ('0' = off)
-- ARGV[6 .. 5+n] the n task IDs, ARGV[6+n .. 5+2n] their messages (codec),
-- then, in task order, 1 argument per 'r' task (retention ms) and 8 per
-- 'x' task: process-at ms (0 = now), unique key ('' = none), unique TTL
-- ms, lock PX ms (cleanup only), group key ('' = none), retention ms,
-- priority ('' = 0), fair-sharing key ('' = none).
-- A pending task of a priority or a key goes to its lane (lanelib.lua) on
-- its own; the plain tasks before a keyed one are pushed first, so that
-- the rotation sees them as single Enqueues would.
-- Returns a string of one code per task: '2' pending, '3' scheduled,
-- '7' aggregating, '=' stored already with this very message (an earlier
-- attempt of the same Enqueue; see stored_same), 'i' another task holds
-- the ID, 'u' the unique lock is held.
-- A task sees the tasks stored before it in the chunk (an ID or a unique
-- key used twice: the first one stored wins, and the same task twice is
-- stored once). A refused task writes nothing.
-- Costs: a plain task one SET NX (its ID check and its write, as in
-- enqueue.lua; the string form of lib.lua's task_get), or with a
-- retention an HSETNX and an HSET of it; any other task an EXISTS (which also sees the IDs stored
-- earlier in the chunk) and an HSET, plus the SET of its lock; the locks
-- are read with one MGET first. The lists are written once per chunk: one
-- LPUSH, one ZADD, one ZADD per group, one SADD. Publishes r:<queue> once
-- when pending went from empty to not empty and s:<queue> once when a task
-- of the chunk became the earliest scheduled one. The stored tasks'
-- enqueues are logged in one entry, in task order (log_events); a task
-- stored already ('=') is not logged again.
-- No task is left half written by an error: MGET and EXISTS do not fail;
-- SET NX and HSETNX are called with pcall, WRONGTYPE (a key of another
-- type holds the task's name) goes to stored_same, which reads by type, and OOM or a write ban can only refuse the
-- first write of a script, before anything was written (the script then
-- ends with that error). As in enqueue.lua, only a pending, scheduled,
-- group or groups key of another type would fail a write after others.
local kinds = ARGV[4]
local n = #kinds
local tprefix = KEYS[3]
local m0 = 5 + n -- ARGV[m0 + i] is the message of task i
local tk = {}
for i = 1, n do tk[i] = tprefix .. ARGV[5 + i] end

-- Reads.
local xb -- task index -> ARGV index of its first 'x' argument
local rb -- task index -> ARGV index of an 'r' task's retention
local now
local locks = {} -- task index -> value of its lock (false: none)
if string.find(kinds, '[^.]') then
  xb, rb = {}, {}
  local lkeys, li = {}, {}
  local need_now = false
  local b = 6 + 2 * n
  for i = 1, n do
    local k = string.byte(kinds, i)
    if k == 114 then -- 'r'
      rb[i] = b
      b = b + 1
    elseif k ~= 46 then -- not '.'
      xb[i] = b
      if ARGV[b + 1] ~= '' then
        lkeys[#lkeys + 1] = KEYS[4] .. ARGV[b + 1]
        li[#li + 1] = i
        need_now = true
      elseif ARGV[b + 4] ~= '' or ARGV[b] ~= '0' or ARGV[b + 6] ~= '' or ARGV[b + 7] ~= '' then
        need_now = true
      end
      b = b + 8
    end
  end
  if need_now then now = now_ms(ARGV[1]) end
  for a = 1, #lkeys, 4000 do
    local vals = redis.call('MGET', unpack(lkeys, a, math.min(a + 3999, #lkeys)))
    for x = 1, #vals do locks[li[a + x - 1]] = vals[x] end
  end
end

-- Each task in order: its checks, then its writes.
local pend, np = {}, 0
local lane_ready = false -- a lane went from empty to one task
-- flush pushes the plain tasks gathered in pend (LPUSH a b c pushes a
-- first, as one LPUSH per task would).
local function flush()
  for a = 1, np, 4000 do
    local e = math.min(a + 3999, np)
    local len = redis.call('LPUSH', KEYS[1], unpack(pend, a, e))
    if a == 1 and len == e then lane_ready = true end
  end
  pend, np = {}, 0
end
local sched, sched_ids = {}, {}
local groups, gnames = {}, {}
local claimed = {} -- unique key -> true once a task of the chunk holds it
local lids, lstates = {}, {} -- the stored tasks, for the log
local codes -- nil while every task so far was stored as pending
for i = 1, n do
  local c
  local b = xb and xb[i]
  if not b then
    local ret = rb and rb[i]
    local r
    if ret then
      r = redis.pcall('HSETNX', tk[i], 'm', ARGV[m0 + i])
    else
      r = redis.pcall('SET', tk[i], ARGV[m0 + i], 'NX') -- the string form
      if type(r) == 'table' and r.ok then r = 1 elseif not r then r = 0 end
    end
    if r == 1 then
      c = '2'
      if ret then redis.call('HSET', tk[i], 'R', ARGV[ret]) end
      np = np + 1
      pend[np] = ARGV[5 + i]
    elseif r == 0 or string.sub(r.err, 1, 9) == 'WRONGTYPE' then
      -- WRONGTYPE: a key of another type, maybe a task in the string
      -- form, holds the ID.
      c = stored_same(tk[i], ARGV[m0 + i]) and '=' or 'i'
    else
      return r -- refused before the first write: nothing was written
    end
  elseif redis.call('EXISTS', tk[i]) == 1 then
    c = stored_same(tk[i], ARGV[m0 + i]) and '=' or 'i'
  else
    local id = ARGV[5 + i]
    local ukey, gkey, ret = ARGV[b + 1], ARGV[b + 4], ARGV[b + 5]
    local held = false
    if ukey ~= '' then
      if claimed[ukey] then
        held = true
      else
        local v = locks[i]
        if v then
          local exp = tonumber(string.sub(v, 1, (string.find(v, ':', 1, true) or 1) - 1))
          if exp and exp > now then held = true end
        end
      end
    end
    if held then
      c = 'u'
    else
      local at = tonumber(ARGV[b])
      if gkey ~= '' then
        c = '7'
      elseif at > 0 and at > now then
        c = '3'
      else
        c = '2'
      end
      local h = {'m', ARGV[m0 + i]}
      if c ~= '2' then
        h[3] = 's'
        h[4] = c
      end
      if ukey ~= '' then
        h[#h + 1] = 'u'
        h[#h + 1] = ukey
        claimed[ukey] = true
        redis.call('SET', KEYS[4] .. ukey, istr(now + tonumber(ARGV[b + 2])) .. ':' .. id, 'PX', ARGV[b + 3])
      end
      if ret ~= '0' then
        h[#h + 1] = 'R'
        h[#h + 1] = ret
      end
      if c == '7' then
        h[#h + 1] = 'g'
        h[#h + 1] = gkey
      end
      local prio, fkey = ARGV[b + 6], ARGV[b + 7]
      lane_fields(h, prio ~= '' and prio or nil, fkey ~= '' and fkey or nil, c == '2' and now)
      if #h == 2 then
        redis.call('SET', tk[i], h[2]) -- the string form, as enqueue.lua
      else
        redis.call('HSET', tk[i], unpack(h))
      end
      if c == '7' then
        local g = groups[gkey]
        if not g then
          g = {}
          groups[gkey] = g
          gnames[#gnames + 1] = gkey
        end
        g[#g + 1] = now
        g[#g + 1] = id
      elseif c == '3' then
        sched[#sched + 1] = ARGV[b]
        sched[#sched + 1] = id
        sched_ids[id] = true
      elseif prio ~= '' then
        if push_lane(KEYS[1], KEYS[8], id, prio) == 1 then lane_ready = true end
      elseif fkey ~= '' then
        flush()
        if push_lane(KEYS[1], KEYS[8], id, nil, false, fkey) == 1 then lane_ready = true end
      else
        np = np + 1
        pend[np] = id
      end
    end
  end
  if c ~= '2' and not codes then
    codes = {}
    for x = 1, i - 1 do codes[x] = '2' end
  end
  if codes then codes[i] = c end
  if c ~= 'i' and c ~= 'u' and c ~= '=' then
    lids[#lids + 1] = ARGV[5 + i]
    lstates[#lstates + 1] = c
  end
end
log_events(KEYS[7], ARGV[5], ARGV[1], 'e', lids, table.concat(lstates))

flush()
if lane_ready then redis.call('PUBLISH', ARGV[2], 'r:' .. ARGV[3]) end
if #sched > 0 then
  call_many('ZADD', KEYS[2], sched)
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)
  if head[1] and sched_ids[head[1]] then
    redis.call('PUBLISH', ARGV[2], 's:' .. ARGV[3])
  end
end
for _, gkey in ipairs(gnames) do
  call_many('ZADD', KEYS[5] .. gkey, groups[gkey])
end
if #gnames > 0 then call_many('SADD', KEYS[6], gnames) end
if codes then return table.concat(codes) end
return string.rep('2', n)
