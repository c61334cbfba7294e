-- forward.lua: moves up to ARGV[2] due scheduled and retry tasks to
-- pending (each to the back of its lane), earliest due first.
-- KEYS[1] scheduled zset  KEYS[2] retry zset  KEYS[3] pending list
-- KEYS[4] task key prefix  KEYS[5] event log (stream)  KEYS[6] settings hash
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] limit  ARGV[3] events channel
-- ARGV[4] queue name  ARGV[5] event log length ('0' = off)
-- Returns {moved, has next (0/1), ms until the next due task (0 if due)}.
-- Publishes r:<queue> when a lane went from empty to not empty. A zset
-- entry without a task is dropped. The retry tasks moved are logged
-- as retried in one entry (log_events); scheduled tasks coming due are
-- not logged.
local now = now_ms(ARGV[1])
local limit = tonumber(ARGV[2])
local a = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
local b = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
local ready = false
local i, j, taken_a, taken_b, moved = 1, 1, 0, 0, 0
local retried = {}
while taken_a + taken_b < limit do
  local id, retry
  if i <= #a and (j > #b or tonumber(a[i + 1]) <= tonumber(b[j + 1])) then
    id = a[i]
    i = i + 2
    taken_a = taken_a + 1
  elseif j <= #b then
    id = b[j]
    retry = true
    j = j + 2
    taken_b = taken_b + 1
  else
    break
  end
  local tk = KEYS[4] .. id
  local f = redis.call('HMGET', tk, 'm', 'P', 'k')
  if f[1] then
    redis.call('HSET', tk, 's', '2', 'p', istr(now))
    if push_lane(KEYS[3], KEYS[6], id, f[2], false, f[3]) == 1 then ready = true end
    moved = moved + 1
    if retry then retried[#retried + 1] = id end
  end
end
-- The taken entries are the lowest-ranked of each zset.
if taken_a > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, taken_a - 1) end
if taken_b > 0 then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, taken_b - 1) end
log_events(KEYS[5], ARGV[5], ARGV[1], 'r', retried, string.rep('2', #retried))
if ready then
  redis.call('PUBLISH', ARGV[3], 'r:' .. ARGV[4])
end
local next
local ha = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local hb = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if ha[2] then next = tonumber(ha[2]) end
if hb[2] and (not next or tonumber(hb[2]) < next) then next = tonumber(hb[2]) end
if not next then return {moved, 0, 0} end
if next < now then next = now end
return {moved, 1, next - now}
