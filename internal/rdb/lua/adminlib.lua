-- adminlib.lua: helpers of the management scripts (broker.Admin),
-- prepended after lib.lua (admin_scripts.go).

-- state_of returns the state digit of task id, whose key is tk: '1' when
-- the leases hash lkey holds it, else its s field, '2' (pending) when
-- absent; nil when there is no such task.
local function state_of(tk, lkey, id)
  local f = task_get(tk, 'm', 's')
  if not f[1] then return nil end
  if redis.call('HEXISTS', lkey, id) == 1 then return '1' end
  return f[2] or '2'
end

-- make_pending writes the fields of a task that becomes pending, as
-- forward.lua does. The task is not pending or active, so it is a hash
-- (lib.lua's task_get).
local function make_pending(tk, now)
  redis.call('HSET', tk, 's', '2', 'p', istr(now))
end

-- drop_task deletes task id (key tk) and releases its uniqueness lock.
local function drop_task(tk, uprefix, id)
  release_unique(uprefix, task_get(tk, 'u')[1], id)
  redis.call('DEL', tk)
end

-- agg_members returns the task IDs of aggregation set hash akey with
-- their group scores, oldest first: {id, score, id, score, ...}. Task
-- fields are "i:<id>"; "t" holds the set's token and "g" its group.
local function agg_members(akey)
  local all = redis.call('HGETALL', akey)
  local m = {}
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 2) == 'i:' then
      m[#m + 1] = {string.sub(f, 3), tonumber(all[i + 1])}
    end
  end
  table.sort(m, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[1] < b[1]
  end)
  local out = {}
  for _, e in ipairs(m) do
    out[#out + 1] = e[1]
    out[#out + 1] = e[2]
  end
  return out
end
