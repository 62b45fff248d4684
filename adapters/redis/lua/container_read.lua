local lay = ARGV[1]
local want = ({ t = 'string', s = 'set', l = 'list', z = 'zset' })[lay]
if redis.call('TYPE', KEYS[1]).ok ~= want then return false end
