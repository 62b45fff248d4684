local out = {}
for i = 1, #KEYS / 2 do
  local k, vk = KEYS[2 * i - 1], KEYS[2 * i]
  local op = ARGV[a]; local lay = ARGV[a + 1]; a = a + 2
  if op == 'D' then
    redis.call('DEL', k, vk); out[i] = 1
  elseif op == 'P' then
    store(k, vk, lay, payload()); out[i] = 1
  elseif op == 'I' then
    local t = payload()
    if redis.call('EXISTS', k) == 1 then out[i] = 0 else store(k, vk, lay, t); out[i] = 1 end
  elseif op == 'R' then
    local e = payload()
    local t = payload()
    local ok, fields = same(k, vk, lay, e)
    if ok then store(k, vk, lay, t, fields); out[i] = 1 else out[i] = 0 end
  else
    return redis.error_reply('tern: unknown write op ' .. tostring(op))
  end
end
return out
