//! Server-side steps (`update_in_place`) for hash kinds: one Lua call per batch
//! of keys, so values never travel.
//!
//! Runs unconditional steps on top-level fields (`add k.p = v`, `delete k.p`,
//! `rename k.p to q` without `where`): exactly the reference semantics of
//! [`tern_core::store::pushdown`] on the hash fields, with the value of a set
//! encoded by the adapter's field codec. Steps with conditions or nested
//! paths, and JSON-string kinds, are declined (`Unsupported`) and the engine
//! runs them on the client.

use tern_core::store::{Error, ErrorKind, PushOp, PushdownRequest, Result};

use crate::codec;

/// One batch of server-side steps, SCAN included, so that neither keys nor
/// values travel.
///
/// KEYS: keys a previous SCAN step returned beyond the previous batch (the
/// cursor carries them), processed first. ARGV: version field, from, step
/// count, per step `op, a, b` (`S field text`, `U field -`, `R from to`), then
/// the SCAN pattern, the Redis type (`hash`; keys of other types are skipped),
/// the SCAN cursor, `1` to keep scanning or
/// `0` (the iteration has ended), the batch size and the most SCAN steps.
///
/// Collects up to the batch size of keys (SCAN steps with COUNT as in
/// `backend::scan_count`), runs the steps on them, and returns
/// `{cursor, mode, count, after, advanced, changed_entities, changed_1, ...,
/// changed_n, pending keys...}`: `mode` is `scan` (continue at `cursor`),
/// `done` (the iteration ended) or `repeat` (the last step returned far more
/// keys than the batch could take: repeat the step at `cursor` with COUNT
/// `count`, skipping its keys up to `after` in sorted order); the pending keys
/// are the few that the last step returned beyond the batch.
pub(crate) const PUSHDOWN_SCRIPT: &str = r"
local vf = ARGV[1]
local from = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local names = { vf }
local slot = { [vf] = 1 }
local function slot_of(f)
  local s = slot[f]
  if not s then
    names[#names + 1] = f
    s = #names
    slot[f] = s
  end
  return s
end
local ops, sa, sb = {}, {}, {}
local i = 4
for s = 1, n do
  local op = ARGV[i]
  ops[s] = op
  sa[s] = slot_of(ARGV[i + 1])
  if op == 'R' then sb[s] = slot_of(ARGV[i + 2]) else sb[s] = ARGV[i + 2] end
  i = i + 3
end
local pattern, cur = ARGV[i], ARGV[i + 2]
local scanning = ARGV[i + 3] == '1'
local limit, max_steps = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])

-- The keys of the batch: those carried over, then SCAN steps.
local keys = {}
local nk = 0
for _, k in ipairs(KEYS) do
  nk = nk + 1
  keys[nk] = k
end
local mode, count, after = 'scan', 0, ''
local floor, steps = 1, 0
while nk < limit and scanning and steps < max_steps do
  local room = limit - nk
  local ask = 1000
  if room >= 128 then ask = math.min(math.max(room, floor), 1000) end
  local step = cur
  local r = redis.call('SCAN', step, 'MATCH', pattern, 'COUNT', ask)
  steps = steps + 1
  local got = r[2]
  if #got < ask / 2 then floor = math.min(ask * 2, 1000) end
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

local target = from + n
local target_text = string.format('%d', target)
local nslots = #names
local advanced, changed_entities = 0, 0
local changed = {}
for s = 1, n do changed[s] = 0 end
local now, sets, dels = {}, {}, {}
for ki = 1, math.min(nk, limit) do
  local key = keys[ki]
  -- One read of every field the steps touch, the version first. A key of
  -- another type is not an entity of the kind: skipped (cheaper than SCAN ... TYPE).
  local vals = redis.pcall('HMGET', key, unpack(names))
  local v = nil
  if vals.err then
    v = nil
  elseif vals[1] then
    v = tonumber(vals[1])
  elseif redis.call('EXISTS', key) == 1 then
    v = 0
  end
  if v and v >= from and v < target then
    for j = 2, nslots do now[j] = vals[j] end
    local any = false
    for s = v - from + 1, n do
      local op, a = ops[s], sa[s]
      if op == 'S' then
        local b = sb[s]
        if now[a] ~= b then
          now[a] = b
          changed[s] = changed[s] + 1
          any = true
        end
      elseif now[a] then
        if op == 'R' then now[sb[s]] = now[a] end
        now[a] = false
        changed[s] = changed[s] + 1
        any = true
      end
    end
    -- One write of what changed, one delete of what went.
    sets[1], sets[2] = vf, target_text
    local ns, nd = 2, 0
    for j = 2, nslots do
      local x = now[j]
      if x ~= vals[j] then
        if x then
          sets[ns + 1], sets[ns + 2] = names[j], x
          ns = ns + 2
        else
          nd = nd + 1
          dels[nd] = names[j]
        end
      end
    end
    if nd > 0 then redis.call('HDEL', key, unpack(dels, 1, nd)) end
    redis.call('HSET', key, unpack(sets, 1, ns))
    advanced = advanced + 1
    if any then changed_entities = changed_entities + 1 end
  end
end
local out = { cur, mode, count, after, advanced, changed_entities }
for s = 1, n do out[#out + 1] = changed[s] end
for j = limit + 1, nk do out[#out + 1] = keys[j] end
return out
";

fn declined(why: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!("the Redis store runs this step on the client: {why}"),
    )
}

/// The script arguments after the version field and `from`, or why the
/// request must run on the client.
pub(crate) fn compile(request: &PushdownRequest, version_field: &str) -> Result<Vec<String>> {
    let mut args = vec![request.steps.len().to_string()];
    let top = |path: &[String]| -> Result<String> {
        match path {
            [name] if name != version_field => Ok(name.clone()),
            [name] => Err(declined(&format!(
                "the property {name:?} is the version field"
            ))),
            _ => Err(declined("a nested property path")),
        }
    };
    for step in &request.steps {
        if !step.conditions.is_empty() {
            return Err(declined("a where-condition"));
        }
        match &step.op {
            PushOp::Set { path, value } => {
                args.extend(["S".to_owned(), top(path)?, codec::encode_field(value)]);
            }
            PushOp::Unset { path } => args.extend(["U".to_owned(), top(path)?, "-".to_owned()]),
            PushOp::Rename { from, to } => {
                let from = top(std::slice::from_ref(from))?;
                let to = top(std::slice::from_ref(to))?;
                args.extend(["R".to_owned(), from, to]);
            }
        }
    }
    Ok(args)
}

/// Counts the keys of a hash kind whose version passes, SCAN included, so
/// that keys do not travel to be counted.
///
/// ARGV: version field, mode (`any`, `eq`, `below`), version, SCAN pattern,
/// SCAN cursor, the most keys to examine and the most SCAN steps in this call.
/// Runs SCAN steps (COUNT 1000, TYPE hash) until the iteration ends or either
/// bound is reached,
/// and returns `{next cursor, keys that pass...}` (a missing version field is
/// 0): the caller counts distinct keys, since SCAN may return a key twice.
pub(crate) const COUNT_SCRIPT: &str = r"
local vf, mode, x = ARGV[1], ARGV[2], tonumber(ARGV[3])
local pattern, cur = ARGV[4], ARGV[5]
local budget, max_steps = tonumber(ARGV[6]), tonumber(ARGV[7])
local out = { '' }
local examined, steps = 0, 0
repeat
  local r = redis.call('SCAN', cur, 'MATCH', pattern, 'COUNT', 1000, 'TYPE', 'hash')
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
";
