local want, lay = ARGV[1], ARGV[2]
local moved = 0
local here = redis.call('TYPE', KEYS[1]).ok
if here ~= want then
  for i = 3, #KEYS, 2 do
    if redis.call('TYPE', KEYS[i]).ok == want then
      if here ~= 'none' then return -1 end
      redis.call('RENAME', KEYS[i], KEYS[1])
      if redis.call('EXISTS', KEYS[i + 1]) == 1 then
        redis.call('RENAME', KEYS[i + 1], KEYS[2])
      else
        redis.call('DEL', KEYS[2])
      end
      here = want
      moved = 1
      break
    end
  end
  if here ~= want then return { 0, false } end
end
local function read()
  if lay == 'h' then return redis.call('HGETALL', KEYS[1]) end
  if lay == 'j' then return redis.call('GET', KEYS[1]) end
