local a, j = 1, 1
while j <= #KEYS do
  local k, lay, formers = KEYS[j], ARGV[a], tonumber(ARGV[a + 1])
  local stop = a + 2 + tonumber(ARGV[a + 2])
  a = a + 3
  -- A key the put creates takes the TTL of its first former copy.
  local ttl = 0
  if formers > 0 and redis.call('EXISTS', k) == 0 then
    ttl = redis.call('PTTL', KEYS[j + 1])
  end
  if lay == 'j' then
    redis.call('SET', k, ARGV[a], 'KEEPTTL')
  else
    replace_hash(k, ARGV, a, stop)
  end
  a = stop + 1
  if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
  for f = 1, formers do redis.call('DEL', KEYS[j + f]) end
  j = j + 1 + formers
end
return 1
