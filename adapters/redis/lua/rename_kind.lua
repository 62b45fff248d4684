local out = {}
for i = 1, #KEYS / 4 do
  local src, dst, vsrc, vdst = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  if redis.call('TYPE', src).ok ~= ARGV[1] then
    out[i] = -1
  elseif redis.call('RENAMENX', src, dst) == 1 then
    if redis.call('EXISTS', vsrc) == 1 then
      redis.call('RENAME', vsrc, vdst)
    else
      redis.call('DEL', vdst)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
