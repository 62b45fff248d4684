local cur = redis.call('HGET', KEYS[1], 'rev')
if (cur or '') ~= ARGV[1] then
  if cur then return {'conflict', cur, redis.call('HGET', KEYS[1], 'doc') or ''} end
  return {'conflict'}
end
if ARGV[2] == 'del' then
  redis.call('DEL', KEYS[1])
  return {'applied', '0'}
end
local rev = tostring((tonumber(cur or '0') or 0) + 1)
redis.call('HSET', KEYS[1], 'rev', rev, 'doc', ARGV[3])
return {'applied', rev}
