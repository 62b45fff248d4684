if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('DUMP', KEYS[1]) == ARGV[1] and (redis.call('GET', KEYS[2]) or '') == ARGV[3] then
    return 1
  end
  return 0
end
local ttl = tonumber(ARGV[2])
if ttl < 0 then ttl = 0 end
redis.call('RESTORE', KEYS[1], ttl, ARGV[1])
if ARGV[3] == '' then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[2], ARGV[3])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
return 1
