if redis.call('TYPE', KEYS[1]).ok ~= ARGV[1] then return false end
return { redis.call('DUMP', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '' }
