//! [`Store::write_atomic`](tern_core::store::Store::write_atomic) on Redis: one Lua
//! script checks every guard and every write's condition first, then applies
//! all the writes (a script runs atomically on the server, so nothing can
//! interleave). Used by lazy kind renames: the entity under the new prefix
//! and the removal of the stale copy under the old one in one step.

use tern_core::store::{Error, ErrorKind, Guard, Result, Write, WriteOutcome};

use super::RedisStore;

/// `KEYS`: one per op. `ARGV`: the version field, then per op its code
/// (`A` absent, `U` unchanged + payload, `P`/`I`/`R`/`D` as the write script),
/// the layout (`h`/`j`) and its payloads (a count, then the items).
/// Returns 1 when everything was applied, 0 when a condition failed (nothing written).
pub(super) const ATOMIC_SCRIPT: &str = r#"
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
local ops = {}
for i = 1, #KEYS do
  local op = { k = KEYS[i], code = ARGV[a], lay = ARGV[a + 1] }
  a = a + 2
  if op.code == 'U' or op.code == 'P' or op.code == 'I' then op.t = payload()
  elseif op.code == 'R' then op.e = payload(); op.t = payload() end
  ops[i] = op
end
for _, op in ipairs(ops) do
  if op.code == 'A' or op.code == 'I' then
    if redis.call('EXISTS', op.k) == 1 then return 0 end
  elseif op.code == 'U' then
    if not same(op.k, op.lay, op.t) then return 0 end
  elseif op.code == 'R' then
    if not same(op.k, op.lay, op.e) then return 0 end
  end
end
for _, op in ipairs(ops) do
  if op.code == 'D' then redis.call('DEL', op.k)
  elseif op.code == 'P' or op.code == 'I' or op.code == 'R' then store(op.k, op.lay, op.t) end
end
return 1
"#;

impl RedisStore {
    /// Guards and writes in one script run: all applied, or none.
    pub(super) async fn write_atomic_script(
        &self,
        guards: Vec<Guard>,
        writes: Vec<Write>,
    ) -> Result<WriteOutcome> {
        let mut keys = Vec::new();
        let mut args = vec![self.config.version_field.clone()];
        for g in &guards {
            keys.push(self.keys.entity_key(g.key())?);
            match g {
                Guard::Absent(k) => {
                    args.push("A".to_owned());
                    args.push(self.layout_code(&k.kind).to_owned());
                }
                Guard::Unchanged(e) => {
                    args.push("U".to_owned());
                    args.push(self.layout_code(&e.key.kind).to_owned());
                    self.payload(e, &mut args)?;
                }
            }
        }
        for w in &writes {
            let (op, key) = match w {
                Write::Put(e) => ("P", &e.key),
                Write::Insert(e) => ("I", &e.key),
                Write::Replace { expected, .. } => ("R", &expected.key),
                Write::Delete(k) => ("D", k),
            };
            keys.push(self.keys.entity_key(key)?);
            args.push(op.to_owned());
            args.push(self.layout_code(&key.kind).to_owned());
            match w {
                Write::Put(e) | Write::Insert(e) => self.payload(e, &mut args)?,
                Write::Replace { expected, new } => {
                    self.payload(expected, &mut args)?;
                    self.payload(new, &mut args)?;
                }
                Write::Delete(_) => {}
            }
        }
        let script = redis::Script::new(ATOMIC_SCRIPT);
        let mut invocation = script.prepare_invoke();
        for k in &keys {
            invocation.key(k);
        }
        for a in &args {
            invocation.arg(a);
        }
        let code: i64 = invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.err("writing entities atomically", e))?;
        match code {
            1 => Ok(WriteOutcome::Applied),
            0 => Ok(WriteOutcome::Conflict),
            other => Err(Error::new(
                ErrorKind::Unexpected,
                format!("the atomic write script answered {other}"),
            )),
        }
    }
}
