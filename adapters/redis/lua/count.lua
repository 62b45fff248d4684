local vf, mode, x = ARGV[1], ARGV[2], tonumber(ARGV[3])
local pattern, cur = ARGV[4], ARGV[5]
local budget, max_steps = tonumber(ARGV[6]), tonumber(ARGV[7])
local out = { '' }
local examined, steps = 0, 0
repeat
  local r = redis.call('SCAN', cur, 'MATCH', pattern, 'COUNT', math.min(1000, budget), 'TYPE', 'hash')
  cur = r[1]
  steps = steps + 1
  for _, key in ipairs(r[2]) do
    examined = examined + 1
    local v = tonumber(redis.call('HGET', key, vf) or '0') or -1
    if mode == 'any' or (mode == 'eq' and v == x) or (mode == 'below' and v >= 0 and v < x) then
      out[#out + 1] = key
    end
  end
until cur == '0' or examined >= budget or steps >= max_steps
out[1] = cur
return out
