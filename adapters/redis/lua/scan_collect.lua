local keys = {}
local nk = 0
for _, k in ipairs(KEYS) do
  nk = nk + 1
  keys[nk] = k
end
local mode, count, after = 'scan', 0, ''
local asked, found, steps = 0, 0, 0
while nk < limit and scanning and steps < max_steps do
  local room = limit - nk
  local ask = 1000
  if asked == 0 then
    ask = math.min(math.max(room, 128), 1000)
  elseif found > 0 then
    ask = math.max(1, math.min(math.ceil(room * asked / found), 1000))
  end
  local step = cur
  local r = call('SCAN', step, 'MATCH', pattern, 'COUNT', ask)
  steps = steps + 1
  local got = r[2]
  asked, found = asked + ask, found + #got
  if #got > room + 64 then
    table.sort(got)
    local last = nil
    for j = 1, #got do
      if nk >= limit then break end
      if got[j] ~= last then
        nk = nk + 1
        keys[nk] = got[j]
        last = got[j]
      end
    end
    mode, count, after, cur = 'repeat', ask, last or '', step
    break
  end
  for _, k in ipairs(got) do
    nk = nk + 1
    keys[nk] = k
  end
  cur = r[1]
  if cur == '0' then scanning = false end
end
if mode == 'scan' and not scanning then mode = 'done' end
