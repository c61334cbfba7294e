-- settings.lua: stores the settings of a queue (SetQueueSettings); fetch.lua
-- obeys them. When the keys' limits change, the keys they held back may
-- rejoin the rotation (lanelib.lua): without KeyRateLimit every waiting
-- key, by due time then name (their buckets are dropped); then each key
-- held back by KeyMaxConcurrency that now has room, by name. A rate limit keeps its token bucket (tk tokens at time tt
-- ms) across changes, refilled at the old rate up to now and capped at the
-- new burst; without a rate limit the bucket is dropped (a new one starts
-- full).
-- KEYS[1] settings hash  KEYS[2] pending list (the lanes)
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] max concurrency
-- ARGV[3] rate limit (tasks per second)  ARGV[4] rate burst
-- ARGV[5] lease ms  ARGV[6] key max concurrency  ARGV[7] key rate limit
-- ARGV[8] key rate burst; a '0' leaves that setting unset
-- Returns 1.
local old = redis.call('HMGET', KEYS[1], 'rl', 'rb', 'tk', 'tt')
local set, del = {}, {}
local names = {'mc', 'rl', 'rb', 'ld', 'kc', 'kr', 'kb'}
for i, name in ipairs(names) do
  local v = ARGV[i + 1]
  if v == '0' then
    del[#del + 1] = name
  else
    set[#set + 1] = name
    set[#set + 1] = v
  end
end
local rl = tonumber(ARGV[3])
if rl == 0 then
  del[#del + 1] = 'tk'
  del[#del + 1] = 'tt'
elseif old[1] and old[3] then
  local now = now_ms(ARGV[1])
  local oburst = math.max(tonumber(old[2] or '1'), 1)
  local tokens = math.min(oburst, tonumber(old[3]) + math.max(now - tonumber(old[4]), 0) * tonumber(old[1]) / 1000)
  tokens = math.min(tokens, math.max(tonumber(ARGV[4]), 1))
  set[#set + 1] = 'tk'
  set[#set + 1] = string.format('%.17g', tokens)
  set[#set + 1] = 'tt'
  set[#set + 1] = istr(now)
end
if #del > 0 then redis.call('HDEL', KEYS[1], unpack(del)) end
if #set > 0 then redis.call('HSET', KEYS[1], unpack(set)) end
local P = KEYS[2]
if ARGV[7] == '0' then
  for _, k in ipairs(redis.call('ZRANGE', P .. ':wait', 0, -1)) do
    redis.call('ZREM', P .. ':wait', k)
    redis.call('DEL', P .. ':b:' .. k)
    ring_join(P, k)
  end
end
local cap = tonumber(ARGV[6])
local held = redis.call('HGETALL', P .. ':held')
local back = {}
for i = 1, #held, 2 do
  local k = held[i]
  if (cap == 0 or tonumber(held[i + 1]) < cap) and redis.call('LLEN', P .. ':k:' .. k) > 0
    and not redis.call('ZSCORE', P .. ':ring', k) and not redis.call('ZSCORE', P .. ':wait', k) then
    back[#back + 1] = k
  end
end
table.sort(back)
for _, k in ipairs(back) do ring_join(P, k) end
return 1
