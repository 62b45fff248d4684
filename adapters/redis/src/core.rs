//! Driver calls shared by the store: error mapping and the Lua scripts.

use tern_core::store::{Error, ErrorKind};

/// Maps a driver error to a store error naming `operation`; connection
/// failures are `Unavailable` and temporary. The driver's text is the cause
/// (its own chain repeats that text, so it is not chained).
pub(crate) fn map_redis_error(operation: &str, e: redis::RedisError) -> Error {
    let temporary =
        e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout();
    if temporary {
        return Error::new(
            ErrorKind::Unavailable,
            format!("{operation}: the Redis connection failed"),
        )
        .with_driver_error(e)
        .set_temporary();
    }
    let kind = match e.code() {
        Some("WRONGTYPE") => ErrorKind::InvalidData,
        Some("BUSY" | "LOADING" | "TRYAGAIN") => {
            return Error::new(
                ErrorKind::Unavailable,
                format!("{operation}: the Redis server is busy"),
            )
            .with_driver_error(e)
            .set_temporary();
        }
        Some(_) => ErrorKind::Rejected,
        None => ErrorKind::Unexpected,
    };
    Error::new(kind, operation.to_owned()).with_driver_error(e)
}

/// One batch of writes, each atomic (the whole call is, in fact).
///
/// `ARGV[1]` is the version field; then per key: op (`P`ut, `I`nsert,
/// `R`eplace, `D`elete), layout (`h` hash, `j` JSON string), and payloads, each
/// a count followed by that many strings (field/value pairs for a hash, the
/// JSON text for a string). `R` has two payloads: the expected entity, then the
/// new one. Returns one integer per key: 1 applied, 0 conflict.
pub(crate) const WRITE_SCRIPT: &str = r#"
local vf = ARGV[1]
local a = 2
local function payload()
  local n = tonumber(ARGV[a]); a = a + 1
  local t = {}
  for j = 1, n do t[j] = ARGV[a + j - 1] end
  a = a + n
  return t
end
local function store(k, lay, t)
  redis.call('DEL', k)
  if lay == 'h' then
    local i = 1
    while i <= #t do
      local last = math.min(i + 999, #t)
      redis.call('HSET', k, unpack(t, i, last))
      i = last + 1
    end
  else
    redis.call('SET', k, t[1])
  end
end
local function same(k, lay, t)
  local ty = redis.call('TYPE', k).ok
  if lay == 'h' then
    if ty ~= 'hash' then return false end
    local cur = redis.call('HGETALL', k)
    local m = {}
    local n = 0
    for j = 1, #cur, 2 do m[cur[j]] = cur[j + 1]; n = n + 1 end
    if m[vf] == nil then m[vf] = '0'; n = n + 1 end
    if n * 2 ~= #t then return false end
    for j = 1, #t, 2 do
      if m[t[j]] ~= t[j + 1] then return false end
    end
    return true
  end
  if ty ~= 'string' then return false end
  return redis.call('GET', k) == t[1]
end
local out = {}
for i = 1, #KEYS do
  local k = KEYS[i]
  local op = ARGV[a]; local lay = ARGV[a + 1]; a = a + 2
  if op == 'D' then
    redis.call('DEL', k); out[i] = 1
  elseif op == 'P' then
    store(k, lay, payload()); out[i] = 1
  elseif op == 'I' then
    local t = payload()
    if redis.call('EXISTS', k) == 1 then out[i] = 0 else store(k, lay, t); out[i] = 1 end
  elseif op == 'R' then
    local e = payload()
    local t = payload()
    if same(k, lay, e) then store(k, lay, t); out[i] = 1 else out[i] = 0 end
  else
    return redis.error_reply('tern: unknown write op ' .. tostring(op))
  end
end
return out
"#;

/// Compare-and-set of one metadata document (a hash with fields `rev` and `doc`).
///
/// `ARGV`: expected revision (empty: must not exist), `set` or `del`, the JSON.
/// Returns `{"applied", rev}` or `{"conflict"[, rev, doc]}`.
pub(crate) const META_CAS_SCRIPT: &str = r#"
local cur = redis.call('HGET', KEYS[1], 'rev')
if (cur or '') ~= ARGV[1] then
  if cur then return {'conflict', cur, redis.call('HGET', KEYS[1], 'doc') or ''} end
  return {'conflict'}
end
if ARGV[2] == 'del' then
  redis.call('DEL', KEYS[1])
  return {'applied', '0'}
end
local rev = tostring((tonumber(cur or '0') or 0) + 1)
redis.call('HSET', KEYS[1], 'rev', rev, 'doc', ARGV[3])
return {'applied', rev}
"#;

/// One batch of a kind rename: KEYS are the batch's old keys, then (in the same
/// order) their new keys; `ARGV[1]` is the Redis type of the kind's entities.
/// Each key moves with `RENAMENX`, so an existing new key (an entity or any
/// other key) is never overwritten. Returns one integer per key: 1 renamed,
/// 0 left in place (the new key exists), -1 gone or not an entity meanwhile.
pub(crate) const RENAME_KIND_SCRIPT: &str = r"
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local src = KEYS[i]
  if redis.call('TYPE', src).ok ~= ARGV[1] then
    out[i] = -1
  elseif redis.call('RENAMENX', src, KEYS[n + i]) == 1 then
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
";
