-- lib.lua: helpers prepended to every script of this directory when it is
-- loaded (scripts.go). Task hash fields: m message (binary, Go codec),
-- s state (3 scheduled .. 7 aggregating, as base.TaskState; absent or 2
-- while pending or active), n retried, e last error, f last failure (ms),
-- u unique key, R retention (ms), g group key, w watched (1), p when it
-- last became pending again (ms; set by forward and requeue), r result,
-- c completion time (ms); a workflow task also has W and N (wflib.lua), and
-- s '8' while it waits for its dependencies.
-- A task is active exactly when the queue's leases hash (ID -> lease
-- token) holds its ID; its s field is then left as it was while the task
-- was pending, so that Fetch writes no task field and Complete checks a
-- whole batch of tokens with one HMGET. A token is "<server ID>/<random>",
-- one per fetch, shared by the leases that fetch granted (an earlier
-- version's "<server ID>/<random>.<n>", one per task, is read the same
-- way); the leases hash stores it with '+' appended when Complete must read the task (it has a unique key
-- or a retention, is watched, or is a workflow task).

-- now_ms returns the time in ms: arg when the caller passed one (tests with
-- a fake clock), else the Redis server's TIME.
local function now_ms(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- content is a message (codec.go) without its propagated headers, which
-- are not part of a task's identity: when flag 128 of its second byte is
-- set, its last two bytes give the length of the headers before them.
local function content(m)
  local f = string.byte(m, 2)
  if not f or f < 128 or #m < 4 then return m end
  local hi, lo = string.byte(m, #m - 1, #m)
  return string.sub(m, 1, 1) .. string.char(f - 128) .. string.sub(m, 3, #m - 2 - (hi * 256 + lo))
end

-- A task is kept in one of two forms under its key tk: a hash of the
-- fields above, or, while it has no field but its message (a plain task
-- enqueued without a retention, pending or active), a string holding the
-- message: about 140 bytes less per task, since a message longer than
-- 64 bytes (hash-max-listpack-value) makes a hash a hashtable. Scripts
-- read a task with task_get and turn it into a hash with task_hash
-- before they write one of its fields; only its deletion (DEL) needs
-- neither.

-- task_get reads the fields of task tk as HMGET would, in either form:
-- from the string form, 'm' is its value and every other field is absent.
local function task_get(tk, ...)
  local t = redis.call('TYPE', tk).ok
  if t ~= 'string' then return redis.call('HMGET', tk, ...) end
  local m = redis.call('GET', tk)
  local out = {}
  for i, f in ipairs({...}) do out[i] = f == 'm' and m end
  return out
end

-- task_hash turns task tk into a hash when it is in the string form (a
-- write that changes no field), so that its fields can be written; a
-- hash, or no key, is left as it is.
local function task_hash(tk)
  if redis.call('TYPE', tk).ok == 'string' then
    local m = redis.call('GET', tk)
    redis.call('DEL', tk)
    redis.call('HSET', tk, 'm', m)
  end
end

-- stored_same tells whether task tk, which exists, holds the message
-- msg, its propagated headers aside: an earlier attempt of the same
-- Enqueue stored it (its caller may have seen an error), and this one
-- succeeds without storing it again. It then writes the message again
-- with the value it holds: a write that changes nothing but is
-- replicated, so that a WAIT after the script also covers the first
-- attempt's writes, made maybe on another connection. A key of another
-- type than a task's holds no message.
local function stored_same(tk, msg)
  local t = redis.call('TYPE', tk).ok
  local s
  if t == 'string' then
    s = redis.call('GET', tk)
  elseif t == 'hash' then
    s = redis.call('HGET', tk, 'm')
  end
  if type(s) ~= 'string' or (s ~= msg and content(s) ~= content(msg)) then return false end
  if t == 'string' then
    redis.call('SET', tk, s)
  else
    redis.call('HSET', tk, 'm', s)
  end
  return true
end

-- istr formats an integral number without exponent.
local function istr(x)
  return string.format('%d', x)
end

-- release_unique deletes the uniqueness lock uprefix..ukey if it still
-- belongs to task id (its value is "<expiry ms>:<id>").
local function release_unique(uprefix, ukey, id)
  if not ukey or ukey == '' then return end
  local lk = uprefix .. ukey
  local v = redis.call('GET', lk)
  if v then
    local sep = string.find(v, ':', 1, true)
    if sep and string.sub(v, sep + 1) == id then
      redis.call('DEL', lk)
    end
  end
end

-- count adds n to the all-time counter key and to its day counter
-- key..':'..day, which expires 90 days after its creation.
local function count(key, now, n)
  redis.call('INCRBY', key, n)
  local dk = key .. ':' .. istr(math.floor(now / 86400000))
  if redis.call('INCRBY', dk, n) == n then
    redis.call('PEXPIRE', dk, 7776000000)
  end
end

-- call_many runs cmd key a1 a2 ... over the list args, in chunks that
-- stay within Lua's stack limit for unpack.
local function call_many(cmd, key, args)
  local n = #args
  local i = 1
  while i <= n do
    local j = math.min(i + 3999, n)
    redis.call(cmd, key, unpack(args, i, j))
    i = j + 1
  end
end

-- Lease groups (docs/redis-layout.md, "Lease groups"). The leases of one
-- fetch share its token P, and their deadline is one member of the active
-- zset, GROUP .. P, scored by it, instead of one member per task; the
-- counts hash holds P -> how many leases the group still governs, and
-- the fetch record (record prefix .. P) lists the group's IDs. A lease
-- has its own member (its ID, as before groups) when its value ends with
-- '!' (a task extended alone) or its token is an earlier version's
-- ("<server ID>/<random>.<n>": '.' and base-62 digits at the end).
-- lk, the keys these helpers take: {active zset, leases hash, counts
-- hash, record prefix}.
local GROUP = '\2'

-- numbered tells whether tok is a token of an earlier version, one a task
-- ("<server ID>/<random>.<n>"): such a lease has a member of its own.
local function numbered(tok)
  return string.find(tok, '%.%w+$') ~= nil
end

-- lease_parse splits held, a value of the leases hash, into its token,
-- whether Complete must read the task ('+'), and whether the lease has a
-- member of its own in the active zset.
local function lease_parse(held)
  local own = string.byte(held, -1) == 33 -- '!'
  if own then held = string.sub(held, 1, -2) end
  local read = string.byte(held, -1) == 43 -- '+'
  if read then held = string.sub(held, 1, -2) end
  if not own and numbered(held) then own = true end
  return held, read, own
end

-- holds tells whether held, a value of the leases hash, is token tok's.
local function holds(held, tok)
  if not held or tok == '' then return false end
  return (lease_parse(held)) == tok
end

-- lease_read tells whether held, a value of the leases hash, marks a task
-- Complete must read; lease_readable returns held so marked.
local function lease_read(held)
  local _, read = lease_parse(held)
  return read
end
local function lease_readable(held)
  local tok, read, own = lease_parse(held)
  if read then return held end
  if string.byte(held, -1) == 33 then return tok .. '+!' end
  return held .. '+'
end

-- lease_score returns the deadline (ms, ZSCORE's string) of the lease
-- held of task id: its own member's score, else its group's; nil when
-- neither is there. lease_deadline returns it as a number.
local function lease_score(active, id, held)
  local tok, _, own = lease_parse(held)
  return redis.call('ZSCORE', active, own and id or GROUP .. tok) or nil
end
local function lease_deadline(active, id, held)
  local d = lease_score(active, id, held)
  return d and tonumber(d)
end

-- group_drop deletes group tok: its member, its record and its count.
local function group_drop(lk, tok)
  redis.call('ZREM', lk[1], GROUP .. tok)
  redis.call('DEL', lk[4] .. tok)
  redis.call('HDEL', lk[3], tok)
end

-- group_release counts n leases of group tok ended; the group is dropped
-- once it governs none. Called exactly once per lease whose value is tok
-- or tok .. '+' (no member of its own) when that lease ends or gets a
-- member of its own: never twice for one lease, or a group still holding
-- tasks would be dropped and those tasks never recovered.
local function group_release(lk, tok, n)
  if redis.call('HINCRBY', lk[3], tok, -n) <= 0 then group_drop(lk, tok) end
end

-- lease_end ends the lease held of task id (HDEL; its own member, or its
-- group's count) and tells whether Complete would read the task.
local function lease_end(lk, id, held)
  local tok, read, own = lease_parse(held)
  redis.call('HDEL', lk[2], id)
  if own then
    redis.call('ZREM', lk[1], id)
  else
    group_release(lk, tok, 1)
  end
  return read
end

-- trim_archive deletes the archived tasks (hashes and unique locks) older
-- than max_age ms or beyond the newest max_size.
local function trim_archive(archived, tprefix, uprefix, now, max_size, max_age)
  local function drop(ids)
    for _, old in ipairs(ids) do
      local tk = tprefix .. old
      release_unique(uprefix, redis.call('HGET', tk, 'u'), old)
      redis.call('DEL', tk)
    end
  end
  local cutoff = '(' .. istr(now - max_age)
  local old = redis.call('ZRANGEBYSCORE', archived, '-inf', cutoff)
  if #old > 0 then
    drop(old)
    redis.call('ZREMRANGEBYSCORE', archived, '-inf', cutoff)
  end
  local extra = redis.call('ZCARD', archived) - max_size
  if extra > 0 then
    drop(redis.call('ZRANGE', archived, 0, extra - 1))
    redis.call('ZREMRANGEBYRANK', archived, 0, extra - 1)
  end
end

-- is_earliest tells whether member id has the lowest score of zset key.
local function is_earliest(key, id)
  local head = redis.call('ZRANGE', key, 0, 0)
  return head[1] == id
end

-- log_event appends one entry to a queue's event log, the stream key,
-- which keeps about max entries (XADD MAXLEN ~; max '0': the log is off
-- and nothing is written). An entry holds the events of one call and one
-- kind, in as few fields as XADD takes (each costs Redis time): one pair
-- whose field is the kind (e enqueued, s started, d succeeded, f failed,
-- r retried, a archived, x deleted, p paused, u resumed) and whose value
-- is the tasks' new states, one digit each ('0': none), then each task
-- ID on a line of its own (IDs hold no newline); the value is '' for a
-- queue's own event. E holds a failure's error, and T the time in ms
-- when tms is not '' (a caller's clock, in tests); else the entry ID's
-- time (Redis TIME) is the events'. log_event logs one task's event (id
-- '' for a queue's), log_events those of the tasks ids, whose states are
-- the string states (nothing when ids is empty).
local function log_entry(key, max, tms, kind, body, err)
  if err == '' and tms == '' then
    redis.call('XADD', key, 'MAXLEN', '~', max, '*', kind, body)
    return
  end
  local f = {kind, body}
  if err ~= '' then
    f[3], f[4] = 'E', err
  end
  if tms ~= '' then
    f[#f + 1] = 'T'
    f[#f + 1] = tms
  end
  redis.call('XADD', key, 'MAXLEN', '~', max, '*', unpack(f))
end

local function log_event(key, max, tms, kind, id, state, err)
  if max == '0' then return end
  local body = ''
  if id ~= '' then body = state .. '\n' .. id end
  log_entry(key, max, tms, kind, body, err)
end

local function log_events(key, max, tms, kind, ids, states)
  if max == '0' or #ids == 0 then return end
  log_entry(key, max, tms, kind, states .. '\n' .. table.concat(ids, '\n'), '')
end
