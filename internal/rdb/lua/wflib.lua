-- wflib.lua: the workflow rules (broker.Workflows), prepended after
-- lib.lua (and adminlib.lua) and lanelib.lua to the scripts that finish,
-- cancel, store or read workflow tasks (scripts.go). A workflow task's
-- hash has two more fields: W, the name of its workflow's hash, and N, its
-- ID within the workflow; s is '8' while it waits for its dependencies (in
-- the queue's waiting zset).
--
-- The workflow hash "htq:{<home queue>}:w:<workflow ID>" holds:
--   h digest  c created (ms)  q home queue  R retention (ms)
--   L tasks not finished  x '1' once canceled  d finished (ms)
--   O the task IDs in order, one per line
--   N:<task> its queue, task ID and ProcessAt (ms, 0 none), one per line,
--            then one line per task that depends on it: the policy
--            ('c' cancel, 'r' run) and that task's ID
--   P:<task> one line per dependency: the policy and the dependency's ID
--   r:<task> dependencies not finished yet (tasks that have some)
--   o:<task> its outcome ('s' succeeded, 'f' failed, 'x' canceled,
--            'd' deleted) and when (ms), once it finished
--   e:<task> its error or why it was canceled  v:<task> its result
-- IDs hold no control characters, so a newline ends each line.
-- The changes the rules make to other tasks are logged in those tasks'
-- queues (log_event): a release as 'l' (released, the new state 2 or 3),
-- a cancellation as 'c' (canceled, state 5); lmax and tms are the event
-- log length and time of log_event.
-- The keys of a task's queue are named here from the queue's name, as
-- keys.go names them (keys_test.go checks that both agree); on a Redis
-- Cluster every queue of a workflow is in one hash slot (Go checks it),
-- so every key a script reaches is in the slot of its first key.

local WF_OUTCOME = {s = 'succeeded', f = 'failed', x = 'canceled', d = 'deleted'}

-- wf_qkey names key suffix of queue q ("htq:{q}:" .. suffix).
local function wf_qkey(q, suffix)
  return 'htq:{' .. q .. '}:' .. suffix
end

-- wf_lines splits text into its lines.
local function wf_lines(text)
  local out = {}
  for line in string.gmatch(text or '', '[^\n]+') do out[#out + 1] = line end
  return out
end

-- wf_node returns the N record of task id: {queue, task, at, succ =
-- {{id, policy}, ...}}, or nil.
local function wf_node(wk, id)
  local l = wf_lines(redis.call('HGET', wk, 'N:' .. id))
  if #l < 3 then return nil end
  local n = {queue = l[1], task = l[2], at = tonumber(l[3]), succ = {}}
  for i = 4, #l do
    n.succ[#n.succ + 1] = {string.sub(l[i], 2), string.sub(l[i], 1, 1)}
  end
  return n
end

-- wf_done records that the last task of the workflow finished at now: the
-- record is kept for its retention in its home queue's wfdone zset.
local function wf_done(wk, now)
  local f = redis.call('HMGET', wk, 'q', 'R')
  redis.call('HSET', wk, 'd', istr(now))
  redis.call('ZADD', wf_qkey(f[1], 'wfdone'), now + tonumber(f[2]), wk)
end

-- wf_release makes task id, whose last dependency just finished, pending
-- (or scheduled until its ProcessAt), if it is still waiting.
local function wf_release(wk, id, now, chan, lmax, tms)
  local n = wf_node(wk, id)
  if not n then return end
  local tk = wf_qkey(n.queue, 't:') .. n.task
  -- task_get: the ID may since be another task's, in the string form.
  local f = task_get(tk, 's', 'W')
  if f[1] ~= '8' or f[2] ~= wk then return end
  redis.call('ZREM', wf_qkey(n.queue, 'waiting'), n.task)
  if n.at > now then
    local sk = wf_qkey(n.queue, 'scheduled')
    redis.call('HSET', tk, 's', '3')
    redis.call('ZADD', sk, n.at, n.task)
    if is_earliest(sk, n.task) then redis.call('PUBLISH', chan, 's:' .. n.queue) end
    log_event(wf_qkey(n.queue, 'events'), lmax, tms, 'l', n.task, '3', '')
  else
    redis.call('HSET', tk, 's', '2', 'p', istr(now))
    if push_task(wf_qkey(n.queue, 'pending'), wf_qkey(n.queue, 'settings'), tk, n.task) == 1 then
      redis.call('PUBLISH', chan, 'r:' .. n.queue)
    end
    log_event(wf_qkey(n.queue, 'events'), lmax, tms, 'l', n.task, '2', '')
  end
end

-- wf_cancel_task archives the task of workflow task id with LastErr msg,
-- unless it is active or has finished; it reports whether it did.
local function wf_cancel_task(wk, id, msg, now, lmax, tms)
  local n = wf_node(wk, id)
  if not n then return false end
  local tk = wf_qkey(n.queue, 't:') .. n.task
  local f = task_get(tk, 's', 'W', 'u')
  if f[2] ~= wk then return false end
  if redis.call('HEXISTS', wf_qkey(n.queue, 'leases'), n.task) == 1 then return false end
  local s = f[1] or '2'
  if s == '8' then
    redis.call('ZREM', wf_qkey(n.queue, 'waiting'), n.task)
  elseif s == '2' then
    remove_pending(wf_qkey(n.queue, 'pending'), wf_qkey(n.queue, 'settings'), tk, n.task)
  elseif s == '3' then
    redis.call('ZREM', wf_qkey(n.queue, 'scheduled'), n.task)
  elseif s == '4' then
    redis.call('ZREM', wf_qkey(n.queue, 'retry'), n.task)
  else
    return false
  end
  redis.call('HSET', tk, 's', '5', 'e', msg, 'f', istr(now))
  redis.call('ZADD', wf_qkey(n.queue, 'archived'), now, n.task)
  release_unique(wf_qkey(n.queue, 'unique:'), f[3], n.task)
  log_event(wf_qkey(n.queue, 'events'), lmax, tms, 'c', n.task, '5', msg)
  return true
end

-- wf_finish records outcome o (a letter of WF_OUTCOME) of workflow task
-- id of the workflow hash wk, unless it has one already, and applies it
-- to what depends on it, breadth first: a dependency that succeeded, or
-- whose dependent runs anyway, counts as done, and a dependent with none
-- left is released; any other outcome cancels the dependent, whose own
-- dependents are then seen to in turn. err and result (nil for none) are
-- kept with the outcome. A workflow whose record is gone (its retention
-- ran out) is left alone. lmax and tms are the event log's (log_event).
local function wf_finish(wk, id, o, err, result, now, chan, lmax, tms)
  if not wk or not id then return end
  if redis.call('HEXISTS', wk, 'O') == 0 then return end
  if redis.call('HSETNX', wk, 'o:' .. id, o .. istr(now)) == 0 then return end
  if err and err ~= '' then redis.call('HSET', wk, 'e:' .. id, err) end
  if o == 's' and result then redis.call('HSET', wk, 'v:' .. id, result) end
  local left = redis.call('HINCRBY', wk, 'L', -1)
  local todo, head = {{id, o}}, 1
  while head <= #todo do
    local cur, co = todo[head][1], todo[head][2]
    head = head + 1
    local n = wf_node(wk, cur)
    for _, s in ipairs(n and n.succ or {}) do
      local sid, pol = s[1], s[2]
      if redis.call('HEXISTS', wk, 'o:' .. sid) == 0 then
        if co == 's' or pol == 'r' then
          if redis.call('HINCRBY', wk, 'r:' .. sid, -1) == 0 then wf_release(wk, sid, now, chan, lmax, tms) end
        else
          local msg = 'htq: canceled: dependency "' .. cur .. '" ' .. WF_OUTCOME[co]
          redis.call('HSET', wk, 'o:' .. sid, 'x' .. istr(now), 'e:' .. sid, msg)
          left = redis.call('HINCRBY', wk, 'L', -1)
          wf_cancel_task(wk, sid, msg, now, lmax, tms)
          todo[#todo + 1] = {sid, 'x'}
        end
      end
    end
  end
  if left == 0 then wf_done(wk, now) end
end

