-- unindex_workflows.lua: removes workflow IDs from the workflow index
-- where it still names the queue their deleted record was kept in.
-- KEYS[1] workflow index hash
-- ARGV[1] queue name, then workflow IDs
-- Returns 0.
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 0
