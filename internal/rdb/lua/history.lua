-- history.lua: reads the processed and failed counters of the last
-- ARGV[2] days, today first (read only).
-- KEYS[1] processed counter  KEYS[2] failed counter (+ ":<day>" per day)
-- ARGV[1] now ms ('' = Redis TIME)  ARGV[2] days
-- Returns {today (day number = ms / 86400000), processed, failed of
-- today, processed, failed of the day before, ...}.
local today = math.floor(now_ms(ARGV[1]) / 86400000)
local out = {today}
for d = 0, tonumber(ARGV[2]) - 1 do
  local sfx = ':' .. istr(today - d)
  out[#out + 1] = tonumber(redis.call('GET', KEYS[1] .. sfx) or '0')
  out[#out + 1] = tonumber(redis.call('GET', KEYS[2] .. sfx) or '0')
end
return out
