-- cancel_workflow.lua: cancels every task of a workflow that has not
-- finished (CancelWorkflow): each one not active is archived with LastErr
-- ARGV[3] and outcome canceled; each active one gets a cancel event
-- (c:<task ID>) and finishes as its handler decides, but retry.lua will
-- not retry it (the x field). Prepended: lib.lua, lanelib.lua, wflib.lua.
-- KEYS[1] workflow hash
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] events channel
-- ARGV[3] the LastErr of canceled tasks  ARGV[4] event log length ('0' =
-- off); each archived task is logged as canceled in its queue
-- Returns how many tasks were archived, or -1 when there is no such
-- workflow.
local wk = KEYS[1]
local order = redis.call('HGET', wk, 'O')
if not order then return -1 end
local now = now_ms(ARGV[1])
redis.call('HSET', wk, 'x', '1')
local n = 0
for _, id in ipairs(wf_lines(order)) do
  if redis.call('HEXISTS', wk, 'o:' .. id) == 0 then
    local nd = wf_node(wk, id)
    if nd and redis.call('HEXISTS', wf_qkey(nd.queue, 'leases'), nd.task) == 1 and
      task_get(wf_qkey(nd.queue, 't:') .. nd.task, 'W')[1] == wk then
      redis.call('PUBLISH', ARGV[2], 'c:' .. nd.task)
    else
      if wf_cancel_task(wk, id, ARGV[3], now, ARGV[4], ARGV[1]) then n = n + 1 end
      redis.call('HSET', wk, 'o:' .. id, 'x' .. istr(now), 'e:' .. id, ARGV[3])
      if redis.call('HINCRBY', wk, 'L', -1) == 0 then wf_done(wk, now) end
    end
  end
end
return n
