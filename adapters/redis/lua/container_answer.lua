-- The end of a script that answers the container at `KEYS[1]` (of layout
-- code `lay`, its type already checked) and its version tag at `KEYS[2]`:
-- `{version, items...}` ([`READ_SCRIPT`], and `moving.rs` after a move).
local items
if lay == 't' then items = { redis.call('GET', KEYS[1]) }
elseif lay == 's' then items = redis.call('SMEMBERS', KEYS[1])
elseif lay == 'l' then items = redis.call('LRANGE', KEYS[1], 0, -1)
else items = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES') end
table.insert(items, 1, version_of(lay, redis.call('GET', KEYS[2]), items[1]))
return items
