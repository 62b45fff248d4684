local moved = 0
local here = call('TYPE', KEYS[1]).ok
if here ~= 'hash' then
  for i = 2, #KEYS do
    if call('TYPE', KEYS[i]).ok == 'hash' then
      if here ~= 'none' then return -1 end
      call('RENAME', KEYS[i], KEYS[1])
      moved = 1
      break
    end
  end
end
