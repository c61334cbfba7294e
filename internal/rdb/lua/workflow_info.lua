-- workflow_info.lua: reads a workflow (GetWorkflow). Prepended: lib.lua,
-- lanelib.lua, wflib.lua.
-- KEYS[1] workflow hash
-- Returns false when there is no such workflow, else {every field and
-- value of the hash, the state of each task in the order of O}: the
-- digit of base.TaskState, 1 while it is active, 0 when its task no
-- longer exists.
local wk = KEYS[1]
local order = redis.call('HGET', wk, 'O')
if not order then return false end
local states = {}
for _, id in ipairs(wf_lines(order)) do
  local st = 0
  local nd = wf_node(wk, id)
  if nd then
    local f = task_get(wf_qkey(nd.queue, 't:') .. nd.task, 'W', 's')
    if f[1] == wk then
      if redis.call('HEXISTS', wf_qkey(nd.queue, 'leases'), nd.task) == 1 then
        st = 1
      else
        st = tonumber(f[2] or '2')
      end
    end
  end
  states[#states + 1] = st
end
return {redis.call('HGETALL', wk), states}
