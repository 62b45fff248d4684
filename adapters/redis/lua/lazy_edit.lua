for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return {0} end
end
local hash = ARGV[1] == 'h'
local existed = redis.call('EXISTS', KEYS[1]) == 1
if existed then
  local v
  if hash then v = redis.call('HGET', KEYS[1], ARGV[2]) else v = redis.call('GET', KEYS[2]) end
  if (v or '0') ~= ARGV[3] then return {0} end
end
local reply = redis.call(ARGV[4], KEYS[1], unpack(ARGV, 5))
local exists = redis.call('EXISTS', KEYS[1]) == 1
if not existed and exists and ARGV[3] ~= '0' then
  if hash then redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) else redis.call('SET', KEYS[2], ARGV[3]) end
end
if not hash then
  if not exists then
    redis.call('DEL', KEYS[2])
  elseif redis.call('EXISTS', KEYS[2]) == 1 then
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) else redis.call('PERSIST', KEYS[2]) end
  end
end
return {1, reply}
