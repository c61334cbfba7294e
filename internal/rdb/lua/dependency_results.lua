-- dependency_results.lua: reads the outcomes of the dependencies of an
-- active workflow task (DependencyResults). Prepended: lib.lua, lanelib.lua, wflib.lua.
-- KEYS[1] task key  KEYS[2] leases hash
-- ARGV[1] task ID  ARGV[2] lease token
-- Returns -1 when the token does not hold the task; else, per dependency
-- in order: its ID, policy ('c' or 'r'), queue, task ID, outcome field
-- (letter and ms), error (false: none), result (false: none).
if not holds(redis.call('HGET', KEYS[2], ARGV[1]), ARGV[2]) then return -1 end
local f = task_get(KEYS[1], 'W', 'N')
if not f[1] then return {} end
local wk = f[1]
local out = {}
for _, line in ipairs(wf_lines(redis.call('HGET', wk, 'P:' .. f[2]))) do
  local did = string.sub(line, 2)
  local nd = wf_node(wk, did)
  local v = redis.call('HMGET', wk, 'o:' .. did, 'e:' .. did, 'v:' .. did)
  out[#out + 1] = did
  out[#out + 1] = string.sub(line, 1, 1)
  out[#out + 1] = nd and nd.queue or ''
  out[#out + 1] = nd and nd.task or ''
  out[#out + 1] = v[1] or ''
  out[#out + 1] = v[2]
  out[#out + 1] = v[3]
end
return out
