-- lib.lua: helpers prepended to every script of this directory when it is
-- loaded (scripts.go). Task hash fields: m message (binary, Go codec),
-- s state (1 active .. 7 aggregating, as base.TaskState), n retried,
-- e last error, f last failure (ms), k lease token and w server ID (active
-- only), u unique key, R retention (ms), g group key, r result,
-- c completion time (ms).

-- now_ms returns the time in ms: arg when the caller passed one (tests with
-- a fake clock), else the Redis server's TIME.
local function now_ms(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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

-- is_earliest tells whether member id has the lowest score of zset key.
local function is_earliest(key, id)
  local head = redis.call('ZRANGE', key, 0, 0)
  return head[1] == id
end
