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

/// KEYS: the batch's entity keys. ARGV: version field, from, step count, then
/// per step `op, a, b` (`S field text`, `U field -`, `R from to`).
/// Returns `{advanced, changed_entities, changed_1, ..., changed_n}`.
pub(crate) const PUSHDOWN_SCRIPT: &str = r"
local vf = ARGV[1]
local from = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local steps = {}
local names = { vf }
local slot = { [vf] = 1 }
local i = 4
for s = 1, n do
  steps[s] = { ARGV[i], ARGV[i + 1], ARGV[i + 2] }
  local touched = { ARGV[i + 1] }
  if ARGV[i] == 'R' then touched[2] = ARGV[i + 2] end
  for _, f in ipairs(touched) do
    if not slot[f] then
      names[#names + 1] = f
      slot[f] = #names
    end
  end
  i = i + 3
end
local target = from + n
local target_text = string.format('%d', target)
local advanced = 0
local changed_entities = 0
local changed = {}
for s = 1, n do changed[s] = 0 end
for _, key in ipairs(KEYS) do
  -- One read of every field the steps touch, the version included.
  local vals = redis.call('HMGET', key, unpack(names))
  local cur = {}
  for j, f in ipairs(names) do cur[f] = vals[j] end
  local v = 0
  if cur[vf] then
    v = tonumber(cur[vf])
  elseif redis.call('EXISTS', key) == 0 then
    v = nil
  end
  if v ~= nil and v >= from and v < target then
    local before = {}
    for f, x in pairs(cur) do before[f] = x end
    local any = false
    for s = v - from + 1, n do
      local op, a, b = steps[s][1], steps[s][2], steps[s][3]
      local did = false
      if op == 'S' then
        if cur[a] ~= b then
          cur[a] = b
          did = true
        end
      elseif op == 'U' then
        if cur[a] then
          cur[a] = false
          did = true
        end
      elseif op == 'R' then
        if cur[a] then
          cur[b] = cur[a]
          cur[a] = false
          did = true
        end
      end
      if did then
        changed[s] = changed[s] + 1
        any = true
      end
    end
    -- One write of what changed, one delete of what went.
    local sets = { vf, target_text }
    local dels = {}
    for _, f in ipairs(names) do
      if f ~= vf and cur[f] ~= before[f] then
        if cur[f] then
          sets[#sets + 1] = f
          sets[#sets + 1] = cur[f]
        else
          dels[#dels + 1] = f
        end
      end
    end
    if #dels > 0 then redis.call('HDEL', key, unpack(dels)) end
    redis.call('HSET', key, unpack(sets))
    advanced = advanced + 1
    if any then changed_entities = changed_entities + 1 end
  end
end
local out = { advanced, changed_entities }
for s = 1, n do out[#out + 1] = changed[s] end
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

/// KEYS: entity keys of a hash kind. ARGV: version field, mode (`any`, `eq`,
/// `below`), version. Returns how many of the keys are hashes whose version
/// passes (a missing version field is 0).
pub(crate) const COUNT_SCRIPT: &str = r"
local vf, mode, x = ARGV[1], ARGV[2], tonumber(ARGV[3])
local n = 0
for _, key in ipairs(KEYS) do
  local v = redis.call('HGET', key, vf)
  if v or redis.call('EXISTS', key) == 1 then
    v = tonumber(v or '0') or -1
    if mode == 'any' or (mode == 'eq' and v == x) or (mode == 'below' and v >= 0 and v < x) then
      n = n + 1
    end
  end
end
return n
";
