-- The Lua function `replace_hash(k, items, from, stop, fields)`: the hash `k`
-- made to hold exactly the field/value pairs `items[from..=stop]`, in place.
-- `HSET` over the existing hash (its TTL stays, nothing freed and allocated
-- again, 1,000 items to a call), then `HDEL` of the fields the pairs lack:
-- with `fields` (the names the hash holds, as the caller just read them in the
-- same script) those of them; else found by `HLEN` and, only when it shows
-- fields the pairs lack, `HKEYS`. A key of another type (never with `fields`)
-- is deleted and written anew, its TTL kept. The put script, the write script
-- and the atomic script share it.
local function hset(k, items, from, stop)
  while from <= stop do
    local last = math.min(from + 999, stop)
    redis.call('HSET', k, unpack(items, from, last))
    from = last + 1
  end
end
local function drop_absent(k, items, from, stop, names)
  local keep = {}
  for i = from, stop, 2 do keep[items[i]] = true end
  local drop = {}
  for _, f in ipairs(names) do
    if not keep[f] then drop[#drop + 1] = f end
  end
  for i = 1, #drop, 1000 do
    redis.call('HDEL', k, unpack(drop, i, math.min(i + 999, #drop)))
  end
end
local function replace_hash(k, items, from, stop, fields)
  if fields then
    hset(k, items, from, stop)
    drop_absent(k, items, from, stop, fields)
    return
  end
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
    drop_absent(k, items, from, stop, redis.call('HKEYS', k))
  end
end
