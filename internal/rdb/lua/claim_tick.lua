-- claim_tick.lua: records that a scheduler enqueues one tick of an entry,
-- unless another did (ClaimTick). The claim's value is its expiry (ms, on
-- the storage clock), which decides; its PX ttl only cleans up.
-- KEYS[1] claim key
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] ttl ms  ARGV[3] PX ms
-- Returns 1 when claimed, 0 when a claim that has not expired exists.
local now = now_ms(ARGV[1])
local v = redis.call('GET', KEYS[1])
if v and (tonumber(v) or 0) > now then return 0 end
redis.call('SET', KEYS[1], istr(now + tonumber(ARGV[2])), 'PX', ARGV[3])
return 1
