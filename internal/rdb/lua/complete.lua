-- complete.lua: finishes a batch of active tasks of one queue that
-- succeeded. Each entry is checked and applied on its own.
-- KEYS[1] active zset  KEYS[2] leases hash  KEYS[3] completed zset
-- KEYS[4] task key prefix  KEYS[5] unique lock prefix
-- KEYS[6] processed counter  KEYS[7] event log (stream)
-- KEYS[8] pending list (the lanes, lanelib.lua)
-- KEYS[9] the lease groups' counts  KEYS[10] fetch record prefix
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] events channel
-- ARGV[3] queue name  ARGV[4] watch grace ms  ARGV[5] event log length
-- ('0' = off)  ARGV[6] n, the number of tasks (the script writes the
-- log entry's states there), then the n task IDs ARGV[7..6+n], then
-- their lease tokens as runs: a count c and a token, the token of the
-- next c IDs, and so on (the leases of one fetch share a token: each is
-- sent and made a Lua string once per run, and compared by reference).
-- The IDs are distinct (rdb.Complete answers a repeated one itself).
-- Returns a string of one digit per task: '1' completed, '0' lease lost
-- (the task is not active, or the token is not its lease's).
-- A lease of a group (lib.lua) ends without a ZREM: its group's count
-- falls by the leases of it ended here, once per group and call, and the
-- group is dropped at 0; a lease with a member of its own loses it.
-- A watched task publishes d:<queue>:<id> and, without retention, is kept
-- completed for the watch grace so that its watcher can read it. A task
-- with a fair-sharing key frees its key's slot; publishes r:<queue> when
-- that lets a key held back by its limit rejoin the rotation.
-- The successes are logged in one entry (log_events). A workflow task's
-- success, with its result, is then applied to its workflow in this same
-- script (wf_finish: the tasks it releases become pending here, and are
-- logged in their queues). Prepended: lib.lua, lanelib.lua, wflib.lua.
local now = now_ms(ARGV[1])
local n = tonumber(ARGV[6])
-- The IDs are read from ARGV where they are, not copied into a table of
-- their own: while every lease holds (the usual case), ARGV[7..6+n] is
-- what HDEL and the log take.
local held
if n <= 4000 then
  held = redis.call('HMGET', KEYS[2], unpack(ARGV, 7, 6 + n))
else
  held = {}
  local i = 1
  while i <= n do
    local j = math.min(i + 3999, n)
    local part = redis.call('HMGET', KEYS[2], unpack(ARGV, 6 + i, 6 + j))
    for k = 1, #part do held[i + k - 1] = part[k] end
    i = j + 1
  end
end
-- done: the IDs completed, made only once a lease is found lost (else
-- ARGV[7..6+n]); res: the reply's digits, likewise; states: the log's
-- digits, made only once a task is kept.
local done, res, states
local nd, nk, ndel = 0, 0, 0
local dels, wfs, kept = {}, {}, {}
local nowstr, lastkeep, expiry
local rejoined = false
-- The current token and its lease values (lib.lua's lease groups): tok,
-- tok '+', tok '!', tok '+!'; grouped: its leases without a member of
-- their own are a group's (not an earlier version's token).
local tok, tokp, tokx, tokpx, grouped
-- The groups' counts of leases ended here (token -> n, and in order), and
-- the IDs whose own member goes.
local gn, gs, ng, own, no = {}, {}, 0, {}, 0
-- rp: where the next run of tokens is in ARGV; left: the leases left in
-- the current run; rn: the leases of its group ended in it (counted into
-- gn once per run, not per task).
local rp, left, rn = 7 + n, 0, 0
local function run_end()
  if rn > 0 then
    local c = gn[tok]
    if not c then
      ng = ng + 1
      gs[ng] = tok
      c = 0
    end
    gn[tok] = c + rn
    rn = 0
  end
end
for i = 1, n do
  local id = ARGV[6 + i]
  local h = held[i]
  if left == 0 then
    run_end()
    left = tonumber(ARGV[rp])
    local t = ARGV[rp + 1]
    rp = rp + 2
    tok, tokp, tokx, tokpx = t, t .. '+', t .. '!', t .. '+!'
    grouped = not numbered(t)
  end
  left = left - 1
  if h and (h == tok or h == tokp or h == tokx or h == tokpx) then
    nd = nd + 1
    if done then done[nd] = id end
    if res then res[i] = '1' end
    if grouped and (h == tok or h == tokp) then
      rn = rn + 1
    else
      no = no + 1
      own[no] = id
    end
    local tk = KEYS[4] .. id
    local keep = 0
    if h == tokp or h == tokpx then -- '+': the task must be read
      local f = redis.call('HMGET', tk, 'u', 'R', 'w', 'k', 'W', 'N', 'r')
      release_unique(KEYS[5], f[1], id)
      if f[4] and release_key(KEYS[8], f[4]) then rejoined = true end
      if f[5] then wfs[#wfs + 1] = {f[5], f[6], f[7] or nil} end
      keep = tonumber(f[2] or '0')
      if f[3] then
        if keep == 0 then keep = tonumber(ARGV[4]) end
        redis.call('PUBLISH', ARGV[2], 'd:' .. ARGV[3] .. ':' .. id)
      end
    end
    if keep > 0 then
      -- Numbers formatted once per batch, not per task (it costs Redis).
      nowstr = nowstr or istr(now)
      if keep ~= lastkeep then lastkeep, expiry = keep, istr(now + keep) end
      redis.call('HSET', tk, 's', '6', 'c', nowstr)
      nk = nk + 1
      kept[2 * nk - 1] = expiry
      kept[2 * nk] = id
      if not states then
        states = {}
        for j = 1, nd - 1 do states[j] = '0' end
      end
      states[nd] = '6'
    else
      ndel = ndel + 1
      dels[ndel] = tk
      if states then states[nd] = '0' end
    end
  else
    if not done then
      done, res = {}, {}
      for j = 1, i - 1 do
        done[j] = ARGV[6 + j]
        res[j] = '1'
      end
    end
    res[i] = '0'
  end
end
run_end()
if nk > 0 then call_many('ZADD', KEYS[3], kept) end
if nd > 0 then
  local st = states and table.concat(states) or string.rep('0', nd)
  if no > 0 then call_many('ZREM', KEYS[1], own) end
  if ng > 0 then
    local lk = {KEYS[1], KEYS[2], KEYS[9], KEYS[10]}
    for j = 1, ng do group_release(lk, gs[j], gn[gs[j]]) end
  end
  if done then
    call_many('HDEL', KEYS[2], done)
    count(KEYS[6], now, nd)
    log_events(KEYS[7], ARGV[5], ARGV[1], 'd', done, st)
  else
    for a = 7, 6 + n, 4000 do
      redis.call('HDEL', KEYS[2], unpack(ARGV, a, math.min(a + 3999, 6 + n)))
    end
    count(KEYS[6], now, nd)
    if ARGV[5] ~= '0' then
      -- The entry's body is ARGV[6..6+n] joined: the states in ARGV[6].
      ARGV[6] = st
      log_entry(KEYS[7], ARGV[5], ARGV[1], 'd', table.concat(ARGV, '\n', 6, 6 + n), '')
    end
  end
end
if rejoined then redis.call('PUBLISH', ARGV[2], 'r:' .. ARGV[3]) end
for _, w in ipairs(wfs) do
  wf_finish(w[1], w[2], 's', nil, w[3], now, ARGV[2], ARGV[5], ARGV[1])
end
for a = 1, ndel, 4000 do redis.call('DEL', unpack(dels, a, math.min(a + 3999, ndel))) end
if res then return table.concat(res) end
return string.rep('1', n)
