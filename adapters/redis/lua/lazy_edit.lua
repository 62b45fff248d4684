for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return {0} end
end
local lay = ARGV[1]
local hash = lay == 'h'
local existed = redis.call('EXISTS', KEYS[1]) == 1
if existed then
  local v
  if hash then v = redis.call('HGET', KEYS[1], ARGV[2]) or '0'
  elseif lay == 't' and redis.call('TYPE', KEYS[1]).ok == 'string' then
    v = version_of(lay, redis.call('GET', KEYS[2]), redis.call('GET', KEYS[1]))
  else v = redis.call('GET', KEYS[2]) or '0' end
  if v ~= ARGV[3] then return {0} end
end
local reply = redis.call(ARGV[4], KEYS[1], unpack(ARGV, 5))
local exists = redis.call('EXISTS', KEYS[1]) == 1
if hash then
  if not existed and exists and ARGV[3] ~= '0' then redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) end
else
  if not exists then
    redis.call('DEL', KEYS[2])
  else
    if ARGV[3] ~= '0' and (not existed or lay == 't') then
      -- A new key gets the declared version's tag; a string's tag follows its value.
      local value = nil
      if lay == 't' and redis.call('TYPE', KEYS[1]).ok == 'string' then value = redis.call('GET', KEYS[1]) end
      if lay ~= 't' or value then redis.call('SET', KEYS[2], tag_of(lay, ARGV[3], value)) end
    end
    if redis.call('EXISTS', KEYS[2]) == 1 then
      local ttl = redis.call('PTTL', KEYS[1])
      if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) else redis.call('PERSIST', KEYS[2]) end
    end
  end
end
return {1, reply}
