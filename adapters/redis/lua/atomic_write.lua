local ops = {}
for i = 1, #KEYS / 2 do
  local op = { k = KEYS[2 * i - 1], vk = KEYS[2 * i], code = ARGV[a], lay = ARGV[a + 1],
    from = tonumber(ARGV[a + 2]) }
  a = a + 3
  if op.code == 'U' or op.code == 'P' or op.code == 'I' then op.t = payload()
  elseif op.code == 'R' then op.e = payload(); op.t = payload() end
  ops[i] = op
end
for _, op in ipairs(ops) do
  if op.code == 'A' or op.code == 'I' then
    if redis.call('EXISTS', op.k) == 1 then return 0 end
  elseif op.code == 'U' then
    if not same(op.k, op.vk, op.lay, op.t) then return 0 end
  elseif op.code == 'R' then
    if not same(op.k, op.vk, op.lay, op.e) then return 0 end
  end
end
local ttls = {}
for i, op in ipairs(ops) do ttls[i] = redis.call('PTTL', op.k) end
for i, op in ipairs(ops) do
  if op.code == 'D' then redis.call('DEL', op.k, op.vk)
  elseif op.code == 'P' or op.code == 'I' or op.code == 'R' then
    store(op.k, op.vk, op.lay, op.t)
    local ttl = op.from > 0 and ttls[op.from] or -1
    if ttls[i] == -2 and ttl > 0 then
      redis.call('PEXPIRE', op.k, ttl)
      if redis.call('EXISTS', op.vk) == 1 then redis.call('PEXPIRE', op.vk, ttl) end
    end
  end
end
return 1
