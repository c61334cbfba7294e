-- extend.lua: pushes the deadline of each still-held lease of one queue.
-- KEYS[1] active zset  KEYS[2] leases hash  KEYS[3] the lease groups'
-- counts  KEYS[4] fetch record prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] lease ms, then pairs
-- ARGV[2i+1] task ID, ARGV[2i+2] lease token.
-- Returns {new deadline ms, lost ID, lost ID, ...}. A lease is lost when
-- the task is not active, the token is not its lease's, or its deadline
-- has passed (an expired lease may be being recovered; it is not revived).
-- A lease with a member of its own gets the new deadline there. The
-- leases of a lease group (lib.lua) named here: when they are every lease
-- the group still governs (a Server's heartbeat), the group's member gets
-- the new deadline (extending no other task); else each of them gets a
-- member of its own with it, its value in the leases hash '!', and the
-- group's count falls by them (a pull worker extending one task: the
-- group's other tasks keep their deadline).
local now = now_ms(ARGV[1])
local deadline = now + tonumber(ARGV[2])
local dl = istr(deadline) -- a number argument would be formatted once per task
local lk = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}
local out = {deadline}
local seen = {}
local gids, gheld, gs = {}, {}, {} -- per group token: its IDs named here and their values
local gdl = {} -- per group token: its deadline (false: none)
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local ok = seen[id] -- named twice: the first settled it
  local h = not ok and redis.call('HGET', KEYS[2], id)
  if h then
    local tok, _, own = lease_parse(h)
    if tok == ARGV[i + 1] and ARGV[i + 1] ~= '' then
      if own then
        local d = redis.call('ZSCORE', KEYS[1], id)
        if d and tonumber(d) > now then
          redis.call('ZADD', KEYS[1], dl, id)
          ok = true
        end
      else
        local d = gdl[tok]
        if d == nil then
          d = redis.call('ZSCORE', KEYS[1], GROUP .. tok)
          d = d and tonumber(d) or false
          gdl[tok] = d
        end
        if d and d > now then
          if not gids[tok] then
            gids[tok], gheld[tok] = {}, {}
            gs[#gs + 1] = tok
          end
          local t = gids[tok]
          t[#t + 1] = id
          gheld[tok][#t] = h
          ok = true
        end
      end
    end
  end
  if ok then
    seen[id] = true
  elseif not seen[id] then
    out[#out + 1] = id
  end
end
for _, tok in ipairs(gs) do
  local ids = gids[tok]
  -- Fewer than named (a count gone wrong) re-scores too: dropping the
  -- group could leave a task it governs without a deadline.
  if tonumber(redis.call('HGET', KEYS[3], tok) or '0') <= #ids then
    redis.call('ZADD', KEYS[1], 'XX', dl, GROUP .. tok)
  else
    for j, id in ipairs(ids) do
      redis.call('ZADD', KEYS[1], dl, id)
      redis.call('HSET', KEYS[2], id, gheld[tok][j] .. '!')
    end
    group_release(lk, tok, #ids)
  end
end
return out
