-- The Lua function `replace_hash(k, items, from, stop)`: the hash `k` made to
-- hold exactly the field/value pairs `items[from..=stop]`, in place. `HSET`
-- over the existing hash (its TTL stays, nothing freed and allocated again,
-- 1,000 items to a call) and `HLEN`; only when `HLEN` shows fields the pairs
-- lack, `HKEYS` and `HDEL` of those. A key of another type is deleted and
-- written anew, its TTL kept. The put script, the write script and the atomic
-- script share it.
local function hset(k, items, from, stop)
  while from <= stop do
    local last = math.min(from + 999, stop)
    redis.call('HSET', k, unpack(items, from, last))
    from = last + 1
  end
end
local function replace_hash(k, items, from, stop)
  local first = math.min(from + 999, stop)
  local set = redis.pcall('HSET', k, unpack(items, from, first))
  if type(set) == 'table' and set.err then
    local ttl = redis.call('PTTL', k)
    redis.call('DEL', k)
    hset(k, items, from, stop)
    if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
    return
  end
  hset(k, items, first + 1, stop)
  if redis.call('HLEN', k) * 2 ~= stop - from + 1 then
    local keep = {}
    for i = from, stop, 2 do keep[items[i]] = true end
    local drop = {}
    for _, f in ipairs(redis.call('HKEYS', k)) do
      if not keep[f] then drop[#drop + 1] = f end
    end
    for i = 1, #drop, 1000 do
      redis.call('HDEL', k, unpack(drop, i, math.min(i + 999, #drop)))
    end
  end
end
