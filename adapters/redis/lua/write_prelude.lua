-- The Lua functions the write script and the atomic script share: `payload()`
-- reads the next payload of `ARGV`, `store(k, vk, lay, t, fields)` writes an
-- entity (a replaced key keeps its TTL), `same(k, vk, lay, t)` compares what
-- is stored (for a hash, also returning the names of the fields it read, which
-- `store` takes as `fields` to drop the ones the new entity lacks without
-- reading the hash again).
local vf = ARGV[1]
local a = 2
local types = { h = 'hash', j = 'string', t = 'string', s = 'set', l = 'list', z = 'zset' }
local function payload()
  local n = tonumber(ARGV[a]); a = a + 1
  local t = {}
  for j = 1, n do t[j] = ARGV[a + j - 1] end
  a = a + n
  return t
end
local function add(cmd, k, t, from)
  local i = from
  while i <= #t do
    local last = math.min(i + 999, #t)
    redis.call(cmd, k, unpack(t, i, last))
    i = last + 1
  end
end
local function store(k, vk, lay, t, fields)
  if lay == 'h' then
    replace_hash(k, t, 1, #t, fields)
    return
  end
  local ttl = redis.call('PTTL', k)
  redis.call('DEL', k)
  if lay == 'j' then
    redis.call('SET', k, t[1])
  else
    if lay == 't' then redis.call('SET', k, t[2])
    elseif lay == 's' then add('SADD', k, t, 2)
    elseif lay == 'l' then add('RPUSH', k, t, 2)
    else add('ZADD', k, t, 2) end
    if t[1] == '0' then
      redis.call('DEL', vk)
    else
      redis.call('SET', vk, tag_of(lay, t[1], t[2]))
      if ttl > 0 then redis.call('PEXPIRE', vk, ttl) end
    end
  end
  if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
end
-- JSON values alike: strings, booleans and nulls equal (numbers come as
-- strings of their exact value, see `strict`), tables alike key by key.
local function alike(x, y)
  if type(x) ~= type(y) then return false end
  if type(x) ~= 'table' then return x == y end
  for key, v in pairs(x) do
    if not alike(v, y[key]) then return false end
  end
  for key in pairs(y) do
    if x[key] == nil then return false end
  end
  return true
end
-- `text` ready for cjson, or nil when a number or word outside its strings
-- is not strict JSON (cjson also takes `007`, `5.`, hex, `inf` and `nan`,
-- which tern's reader refuses: it reads such a field as text). Else the text
-- with every number replaced by its exact decimal value, as a string, wrapped
-- by kind: `{"i":"<sign><digits>e<exponent>"}` where tern reads an int,
-- `{"f":...}` where it reads a float. So values compare as tern's do, with
-- no double in between: `1` and `1.0` differ, `1.5`, `1.50` and `15e-1` do
-- not, and `3.14159265358979323846` and `...847` differ (tern reads a number
-- a double cannot hold as text). Every number is wrapped, those inside the
-- application's own objects too, so no wrapped value equals an unwrapped one.
local function strict(text)
  local out, from = {}, 1
  local i, n = 1, #text
  while i <= n do
    local c = string.sub(text, i, i)
    if c == '"' then
      i = i + 1
      while i <= n do
        local d = string.sub(text, i, i)
        if d == '\\' then i = i + 2 elseif d == '"' then break else i = i + 1 end
      end
      i = i + 1
    elseif string.find(c, '[%d%-]') then
      local num = string.match(text, '^[%w%.%+%-]+', i)
      local int, frac, exp = string.match(num, '^%-?(%d+)(%.?%d*)([eE]?[%+%-]?%d*)$')
      if not int or (#int > 1 and string.sub(int, 1, 1) == '0') or frac == '.'
        or (exp ~= '' and not string.find(exp, '%d$')) then
        return nil
      end
      -- The exact value: significant digits and the exponent of `0.<digits>`.
      local digits = int .. string.sub(frac, 2)
      local sig = string.gsub(string.gsub(digits, '^0+', ''), '0+$', '')
      local e = string.sub(exp, 2)
      if #e > 7 then return nil end
      local point = 0
      if #sig > 0 then point = #int - #string.match(digits, '^0*') + (tonumber(e) or 0) end
      local sign = string.sub(num, 1, 1) == '-' and '-' or ''
      -- serde_json, tern's reader, reads `-0` as the float -0.0.
      local float = frac ~= '' or exp ~= '' or num == '-0'
      out[#out + 1] = string.sub(text, from, i - 1)
      out[#out + 1] = (float and '{"f":"' or '{"i":"') .. sign .. sig .. 'e' .. point .. '"}'
      i = i + #num
      from = i
    elseif string.find(c, '%a') then
      local word = string.match(text, '^%a+', i)
      if word ~= 'true' and word ~= 'false' and word ~= 'null' then return nil end
      i = i + #word
    else
      i = i + 1
    end
  end
  out[#out + 1] = string.sub(text, from)
  return table.concat(out)
end
-- The JSON value of `text` as tern reads it, numbers wrapped (`strict`);
-- `ok` false: not JSON to tern.
local function json(text)
  local wrapped = strict(text)
  if not wrapped then return false end
  return pcall(cjson.decode, wrapped)
end
-- A hash field as tern reads it: its JSON value where the text is JSON,
-- else the text.
local function field(text)
  local ok, v = json(text)
  if ok then return v end
  return text
end
-- The stored text `s` holds the entity tern wrote as the text `e`: the same
-- text, or (the application wrote it in its own format: its key order, its
-- spacing, no version member) the same JSON object, a missing version member
-- counting as version 0.
local function same_json(s, e)
  if s == e then return true end
  if not s then return false end
  local ok_s, a = json(s)
  local ok_e, b = json(e)
  if not (ok_s and ok_e) or type(a) ~= 'table' or type(b) ~= 'table' then return false end
  if a[vf] == nil then a[vf] = { i = 'e0' } end
  if b[vf] == nil then b[vf] = { i = 'e0' } end
  return alike(a, b)
end
local function same(k, vk, lay, t)
  if lay == 'h' then
    -- An expected hash ends with its fields' compare modes (`expected_payload`):
    -- `t`, a field tern reads as text, compares byte for byte. One read: an
    -- error is a key of another type, an empty reply a missing key.
    local modes, pairs_end = '', #t
    if #t % 2 == 1 then modes = t[#t]; pairs_end = #t - 1 end
    local cur = redis.pcall('HGETALL', k)
    if cur.err or #cur == 0 then return false end
    local m, names = {}, {}
    local n = 0
    for j = 1, #cur, 2 do m[cur[j]] = cur[j + 1]; n = n + 1; names[n] = cur[j] end
    if m[vf] == nil then m[vf] = '0'; n = n + 1 end
    if n * 2 ~= pairs_end then return false end
    for j = 1, pairs_end, 2 do
      local stored = m[t[j]]
      if stored ~= t[j + 1] then
        local as_text = string.sub(modes, (j + 1) / 2, (j + 1) / 2) == 't'
        if as_text or not (stored and alike(field(stored), field(t[j + 1]))) then
          return false
        end
      end
    end
    return true, names
  end
  if redis.call('TYPE', k).ok ~= types[lay] then return false end
  if lay == 'j' then return same_json(redis.call('GET', k), t[1]) end
  if lay == 't' then
    local value = redis.call('GET', k)
    return value == t[2] and version_of(lay, redis.call('GET', vk), value) == t[1]
  end
  if (redis.call('GET', vk) or '0') ~= t[1] then return false end
  if lay == 's' then
    if redis.call('SCARD', k) ~= #t - 1 then return false end
    for j = 2, #t do
      if redis.call('SISMEMBER', k, t[j]) == 0 then return false end
    end
    return true
  end
  if lay == 'l' then
    local cur = redis.call('LRANGE', k, 0, -1)
    if #cur ~= #t - 1 then return false end
    for j = 2, #t do
      if cur[j - 1] ~= t[j] then return false end
    end
    return true
  end
  if redis.call('ZCARD', k) * 2 ~= #t - 1 then return false end
  for j = 2, #t, 2 do
    local s = redis.call('ZSCORE', k, t[j + 1])
    if not s or tonumber(s) ~= tonumber(t[j]) then return false end
  end
  return true
end
