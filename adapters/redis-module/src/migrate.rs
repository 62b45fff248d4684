//! Migrating one entity inside the server, before the command that names it
//! runs: the move from a former kind name, the pending steps (tern-core's own
//! `KindChain::migrate`), the version tag, TTLs kept. Everything goes through
//! [`Server`] calls that the module runs with `RM_Call` (writes replicated to
//! replicas and the AOF, inside the command's atomic unit).

use tern_core::lazy::KindChain;
use tern_core::model::{Entity, Key};
use tern_redis::KindLayout;
use tern_redis::wire::Wire;

use crate::loaded::Loaded;
use crate::reply::Reply;

/// The calls the migration makes.
pub trait Server {
    /// Runs a command that reads.
    fn read(&mut self, cmd: &str, args: &[&[u8]]) -> Reply;
    /// Runs a command that writes (replicated), or refuses it (a replica).
    ///
    /// # Errors
    /// The error reply to give the client.
    fn write(&mut self, cmd: &str, args: &[&[u8]]) -> Result<Reply, String>;
    /// Did `key` leave in the current command (expired, evicted, deleted by a
    /// client the filter does not see)? Its copies under former names are
    /// then dropped, never moved in (the module's `gone`).
    fn left_just_now(&self, key: &str) -> bool;
}

/// An entity key the module must bring up to date before a command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The kind (its name now).
    pub kind: String,
    /// The key under the kind's name now.
    pub key: String,
    /// The id part of the key (after `ns:kind:`).
    pub id_part: String,
    /// The key as the command names it is under a former name.
    pub via_former: bool,
}

/// The target of `redis_key`, when it names an entity of a kind with a
/// pending lazy migration (or a former name of one).
pub fn target(wire: &Wire, loaded: &Loaded, redis_key: &str) -> Option<Target> {
    let kind = wire.kind_of(redis_key)?;
    let id_part = redis_key.get(wire.kind_prefix(kind).len()..)?.to_owned();
    let (now, via_former) = match loaded.spec.renamed_to(kind) {
        Some(new) => (new.to_owned(), true),
        None => (kind.to_owned(), false),
    };
    let chain = loaded.spec.chain(&now);
    if !chain.pending {
        return None;
    }
    Some(Target {
        key: format!("{}{id_part}", wire.kind_prefix(&now)),
        kind: now,
        id_part,
        via_former,
    })
}

/// The keys a copy of `t`'s entity would have under each former name of its
/// kind (`chain`), newest first: the entity's key and its version tag's key.
pub fn former_copies<'a>(
    wire: &'a Wire,
    chain: &'a KindChain,
    t: &'a Target,
) -> impl Iterator<Item = (String, String)> + 'a {
    chain.formers.iter().map(move |former| {
        let old = format!("{}{}", wire.kind_prefix(former), t.id_part);
        let tag = wire.version_key(&old);
        (old, tag)
    })
}

fn int(r: &Reply) -> i64 {
    match r {
        Reply::Int(i) => *i,
        Reply::Bytes(b) => String::from_utf8_lossy(b).parse().unwrap_or(0),
        _ => 0,
    }
}

fn check(r: Reply) -> Result<Reply, String> {
    match r {
        Reply::Error(e) => Err(e),
        other => Ok(other),
    }
}

fn text(r: &Reply) -> Option<&[u8]> {
    match r {
        Reply::Bytes(b) => Some(b),
        _ => None,
    }
}

fn array(r: Reply) -> Vec<Vec<u8>> {
    match r {
        Reply::Array(items) => items
            .into_iter()
            .filter_map(|i| match i {
                Reply::Bytes(b) => Some(b),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn redis_type(srv: &mut dyn Server, key: &str) -> Result<String, String> {
    let r = check(srv.read("TYPE", &[key.as_bytes()]))?;
    Ok(text(&r)
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .unwrap_or_default())
}

/// Brings the entity of `t` up to date: moves it from the newest former name
/// holding it (its version tag and TTL with it) when the name now holds none,
/// drops stale copies under former names otherwise, then runs the pending
/// steps on it. Returns whether anything changed.
///
/// # Errors
/// The error reply for the client (`TERNNEWER`, `TERNMIGRATE`, a replica's
/// refusal to write, a failed call).
pub fn migrate(
    srv: &mut dyn Server,
    wire: &Wire,
    loaded: &Loaded,
    t: &Target,
) -> Result<bool, String> {
    let chain = loaded.spec.chain(&t.kind);
    let layout = wire.layout(&t.kind);
    let mut changed = false;
    let job = Job {
        wire,
        chain: &chain,
        layout,
        t,
    };
    if !chain.formers.is_empty() {
        changed |= move_from_formers(srv, job)?;
    }
    changed |= run_steps(srv, job)?;
    Ok(changed)
}

/// What migrating one entity works with besides the server.
#[derive(Clone, Copy)]
struct Job<'a> {
    wire: &'a Wire,
    chain: &'a KindChain,
    layout: KindLayout,
    t: &'a Target,
}

impl<'a> Job<'a> {
    fn parts(self) -> (&'a Wire, &'a KindChain, KindLayout, &'a Target) {
        (self.wire, self.chain, self.layout, self.t)
    }
}

fn move_from_formers(srv: &mut dyn Server, job: Job<'_>) -> Result<bool, String> {
    let (wire, chain, layout, t) = job.parts();
    // A key that left in this very command (its first look here expired it)
    // counts as present: its copies are stale, not the entity to move in.
    let mut present =
        int(&check(srv.read("EXISTS", &[t.key.as_bytes()]))?) > 0 || srv.left_just_now(&t.key);
    let mut changed = false;
    for (old, old_tag) in former_copies(wire, chain, t) {
        if int(&check(srv.read("EXISTS", &[old.as_bytes()]))?) == 0 {
            continue;
        }
        if !present && redis_type(srv, &old)? == layout.type_name() {
            srv.write("RENAME", &[old.as_bytes(), t.key.as_bytes()])?;
            if layout.tag_in_companion() {
                let new_tag = wire.version_key(&t.key);
                if int(&check(srv.read("EXISTS", &[old_tag.as_bytes()]))?) > 0 {
                    srv.write("RENAME", &[old_tag.as_bytes(), new_tag.as_bytes()])?;
                } else {
                    srv.write("DEL", &[new_tag.as_bytes()])?;
                }
            }
            present = true;
        } else if present {
            // The entity under the name now supersedes every former copy.
            srv.write("DEL", &[old.as_bytes(), old_tag.as_bytes()])?;
        } else {
            return Err(format!(
                "TERNMIGRATE the key {old} (a former name of kind {}) is a Redis {} where tern \
                 keeps {} entities: nothing was moved; fix or delete the key",
                t.kind,
                redis_type(srv, &old)?,
                layout.type_name()
            ));
        }
        changed = true;
    }
    Ok(changed)
}

/// The version part of a container's tag (a plain string's tag is
/// `<version>:<digest>`).
fn tag_number(tag: &[u8]) -> &[u8] {
    tag.split(|b| *b == b':').next().unwrap_or(tag)
}

fn version_of(wire: &Wire, text: &[u8]) -> Result<u64, String> {
    let s = String::from_utf8_lossy(text);
    s.trim().parse().map_err(|_| {
        format!(
            "TERNMIGRATE the version {s:?} (field {}) is not a non-negative integer",
            wire.version_field()
        )
    })
}

fn newer(t: &Target, version: u64, chain: &KindChain) -> String {
    format!(
        "TERNNEWER the entity {} is at version {version}, above version {} of kind {} that this \
         server's tern state knows: reload the module's spec (TERN.RELOAD) or check the writer",
        t.key, chain.version, t.kind
    )
}

/// The version a hash's version field or a container's version tag holds
/// (`reply`, the field's or tag's value): 0 when there is none.
fn stored_version(wire: &Wire, reply: &Reply) -> Result<u64, String> {
    text(reply).map_or(Ok(0), |b| version_of(wire, b))
}

/// Is the entity `t` at `version` behind the kind's chain (steps to run)?
/// `false` when it is at the chain's version already.
///
/// # Errors
/// `TERNNEWER` when it is above it.
fn behind(t: &Target, version: u64, chain: &KindChain) -> Result<bool, String> {
    if version > chain.version {
        return Err(newer(t, version, chain));
    }
    Ok(version < chain.version)
}

fn key_of(wire: &Wire, t: &Target) -> Result<Key, String> {
    wire.parse_entity_key(&t.kind, &t.key)
        .map_err(|e| format!("TERNMIGRATE {e}"))
}

fn migrated(chain: &KindChain, e: &Entity, t: &Target) -> Result<Entity, String> {
    chain.migrate(e).map_err(|err| {
        format!(
            "TERNMIGRATE the entity {} cannot be migrated inside the server: {err} (Rust \
             transforms run only in tern's client library, LazyClient)",
            t.key
        )
    })
}

fn run_steps(srv: &mut dyn Server, job: Job<'_>) -> Result<bool, String> {
    let (wire, chain, layout, t) = job.parts();
    let key = t.key.as_bytes();
    let ty = redis_type(srv, &t.key)?;
    if ty != layout.type_name() {
        // Absent, or not an entity of the kind (another Redis type): nothing to migrate.
        return Ok(false);
    }
    match layout {
        KindLayout::Hash => {
            let vf = wire.version_field().as_bytes();
            let version = stored_version(wire, &check(srv.read("HGET", &[key, vf]))?)?;
            if !behind(t, version, chain)? {
                return Ok(false);
            }
            let flat = array(check(srv.read("HGETALL", &[key]))?);
            let mut fields = Vec::with_capacity(flat.len() / 2);
            let mut it = flat.into_iter();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                let (Ok(f), Ok(v)) = (String::from_utf8(f), String::from_utf8(v)) else {
                    return Err(format!(
                        "TERNMIGRATE the hash {} holds a field that is not UTF-8: tern cannot \
                         read it as an entity",
                        t.key
                    ));
                };
                fields.push((f, v));
            }
            let Some(entity) = wire
                .decode_hash(key_of(wire, t)?, fields)
                .map_err(|e| format!("TERNMIGRATE {e}"))?
            else {
                return Ok(false);
            };
            let new = migrated(chain, &entity, t)?;
            if new.value.contains_key(wire.version_field()) {
                return Err(format!(
                    "TERNMIGRATE the entity {} would hold a property named as the version field {}",
                    t.key,
                    wire.version_field()
                ));
            }
            // Only what changed is written: fields whose value the steps left alone
            // keep their text (an application's own number forms included).
            let gone: Vec<&[u8]> = entity
                .value
                .keys()
                .filter(|f| !new.value.contains_key(f.as_str()))
                .map(|f| f.as_bytes())
                .collect();
            let changed: Vec<(&str, String)> = new
                .value
                .iter()
                .filter(|(f, v)| entity.value.get(f.as_str()) != Some(*v))
                .map(|(f, v)| (f.as_str(), wire.encode_field(v)))
                .collect();
            let version = new.version.to_string();
            let mut set: Vec<&[u8]> = vec![key];
            for (f, v) in &changed {
                set.push(f.as_bytes());
                set.push(v.as_bytes());
            }
            set.push(vf);
            set.push(version.as_bytes());
            // Fields first, then the removals: the hash never becomes empty
            // (Redis would delete it and its TTL).
            check(srv.write("HSET", &set)?)?;
            if !gone.is_empty() {
                let mut del = vec![key];
                del.extend(gone);
                check(srv.write("HDEL", &del)?)?;
            }
            Ok(true)
        }
        KindLayout::Json => {
            let r = check(srv.read("GET", &[key]))?;
            let Some(body) = text(&r) else {
                return Ok(false);
            };
            let body = String::from_utf8_lossy(body).into_owned();
            let entity = wire
                .decode_json(key_of(wire, t)?, &body)
                .map_err(|e| format!("TERNMIGRATE {e}"))?;
            if !behind(t, entity.version, chain)? {
                return Ok(false);
            }
            let new = migrated(chain, &entity, t)?;
            let json = wire
                .encode_json(&new)
                .map_err(|e| format!("TERNMIGRATE {e}"))?;
            check(srv.write("SET", &[key, json.as_bytes(), b"KEEPTTL"])?)?;
            Ok(true)
        }
        _ => migrate_container(srv, job),
    }
}

fn migrate_container(srv: &mut dyn Server, job: Job<'_>) -> Result<bool, String> {
    let (wire, chain, layout, t) = job.parts();
    let key = t.key.as_bytes();
    let tag = wire.version_key(&t.key);
    let v = check(srv.read("GET", &[tag.as_bytes()]))?;
    // A plain string's tag names its value's digest: read the value first.
    let value: Option<Vec<u8>> = if layout == KindLayout::Text {
        text(&check(srv.read("GET", &[key]))?).map(<[u8]>::to_vec)
    } else {
        None
    };
    let version = wire
        .tag_version(layout, text(&v), value.as_deref())
        .map_err(|e| format!("TERNMIGRATE {e} (key {})", t.key))?;
    if !behind(t, version, chain)? {
        return Ok(false);
    }
    let items = match layout {
        KindLayout::Text => value.into_iter().collect(),
        KindLayout::Set => array(check(srv.read("SMEMBERS", &[key]))?),
        KindLayout::List => array(check(srv.read("LRANGE", &[key, b"0", b"-1"]))?),
        _ => array(check(
            srv.read("ZRANGE", &[key, b"0", b"-1", b"WITHSCORES"]),
        )?),
    };
    let Some(entity) = wire
        .decode_container(key_of(wire, t)?, layout, version, items)
        .map_err(|e| format!("TERNMIGRATE {e}"))?
    else {
        return Ok(false);
    };
    let new = migrated(chain, &entity, t)?;
    let pttl = int(&check(srv.read("PTTL", &[key]))?);
    // The value the tag names (a plain string's; other tags name none).
    let mut written = if layout == KindLayout::Text {
        wire.encode_container(&entity, layout)
            .map_err(|e| format!("TERNMIGRATE {e}"))?
    } else {
        Vec::new()
    };
    if new.value != entity.value {
        let items = wire
            .encode_container(&new, layout)
            .map_err(|e| format!("TERNMIGRATE {e}"))?;
        check(srv.write("DEL", &[key])?)?;
        let cmd = match layout {
            KindLayout::Text => "SET",
            KindLayout::Set => "SADD",
            KindLayout::List => "RPUSH",
            _ => "ZADD",
        };
        let per = if layout == KindLayout::SortedSet {
            1000
        } else {
            500
        } * 2;
        for chunk in items.chunks(per) {
            let mut args: Vec<&[u8]> = vec![key];
            args.extend(chunk.iter().map(Vec::as_slice));
            check(srv.write(cmd, &args)?)?;
        }
        if pttl > 0 {
            check(srv.write("PEXPIRE", &[key, pttl.to_string().as_bytes()])?)?;
        }
        written = items;
    }
    let value = written.first().map(Vec::as_slice).unwrap_or_default();
    write_tag(srv, wire, layout, &tag, (chain.version, value), pttl)?;
    Ok(true)
}

/// Writes the tag of a container at `version` holding `value` (a plain
/// string's value: its tag names the value's digest, `Wire::container_tag`).
fn write_tag(
    srv: &mut dyn Server,
    wire: &Wire,
    layout: KindLayout,
    tag: &str,
    (version, value): (u64, &[u8]),
    pttl: i64,
) -> Result<(), String> {
    if version == 0 {
        // Version 0 has no tag (untouched application data costs nothing).
        check(srv.write("DEL", &[tag.as_bytes()])?)?;
        return Ok(());
    }
    let v = wire.container_tag(layout, version, value);
    if pttl > 0 {
        check(srv.write(
            "SET",
            &[
                tag.as_bytes(),
                v.as_bytes(),
                b"PX",
                pttl.to_string().as_bytes(),
            ],
        )?)?;
    } else {
        check(srv.write("SET", &[tag.as_bytes(), v.as_bytes()])?)?;
    }
    Ok(())
}

/// After a write command on `t`: an entity the command created (no version)
/// gets the kind's version, as written by a current client; a container's
/// version tag follows its TTL, and goes with its last member.
///
/// # Errors
/// A failed call.
pub fn stamp(srv: &mut dyn Server, wire: &Wire, loaded: &Loaded, t: &Target) -> Result<(), String> {
    let chain = loaded.spec.chain(&t.kind);
    let layout = wire.layout(&t.kind);
    let key = t.key.as_bytes();
    let ty = redis_type(srv, &t.key)?;
    match layout {
        KindLayout::Hash if ty == "hash" => {
            let vf = wire.version_field().as_bytes();
            if text(&check(srv.read("HGET", &[key, vf]))?).is_none() {
                let v = chain.version.to_string();
                check(srv.write("HSETNX", &[key, vf, v.as_bytes()])?)?;
            }
        }
        KindLayout::Json if ty == "string" => {
            let r = check(srv.read("GET", &[key]))?;
            let Some(body) = text(&r) else { return Ok(()) };
            let body = String::from_utf8_lossy(body).into_owned();
            if let Some(stamped) = with_version(&body, wire.version_field(), chain.version) {
                check(srv.write("SET", &[key, stamped.as_bytes(), b"KEEPTTL"])?)?;
            }
        }
        KindLayout::Hash | KindLayout::Json => {}
        _ => {
            let tag = wire.version_key(&t.key);
            if ty != layout.type_name() {
                if int(&check(srv.read("EXISTS", &[tag.as_bytes()]))?) > 0 {
                    check(srv.write("DEL", &[tag.as_bytes()])?)?;
                }
                return Ok(());
            }
            let cur = check(srv.read("GET", &[tag.as_bytes()]))?;
            let has = text(&cur).is_some();
            if !has && chain.version == 0 {
                // Version 0 has no tag.
                return Ok(());
            }
            // A plain string's tag names its value: the command may have
            // changed the value of the entity it found migrated, so its tag
            // follows the value (the version it held before the command).
            let value: Vec<u8> = if layout == KindLayout::Text {
                text(&check(srv.read("GET", &[key]))?)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            let v = match text(&cur) {
                Some(b) => version_of(wire, tag_number(b))?,
                None => chain.version,
            };
            let stale_digest = layout == KindLayout::Text
                && text(&cur) != Some(wire.container_tag(layout, v, &value).as_bytes());
            let pttl = int(&check(srv.read("PTTL", &[key]))?);
            let tag_ttl = int(&check(srv.read("PTTL", &[tag.as_bytes()]))?);
            if !has
                || stale_digest
                || (pttl > 0) != (tag_ttl > 0)
                || (pttl > 0 && (pttl - tag_ttl).abs() > 1)
            {
                write_tag(srv, wire, layout, &tag, (v, &value), pttl)?;
            }
        }
    }
    Ok(())
}

/// The JSON object `text` with the version member added in front, its other
/// bytes unchanged (no number is re-printed); `None` when it has the member
/// already or is not an object tern could read.
pub fn with_version(text: &str, field: &str, version: u64) -> Option<String> {
    let json: serde_json::Value = serde_json::from_str(text).ok()?;
    let obj = json.as_object()?;
    if obj.contains_key(field) {
        return None;
    }
    let at = text.find('{')?;
    let name = serde_json::to_string(field).ok()?;
    let sep = if obj.is_empty() { "" } else { "," };
    Some(format!(
        "{}{{{name}:{version}{sep}{}",
        &text[..at],
        &text[at + 1..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_added_without_touching_the_rest() {
        assert_eq!(
            with_version(r#"{"a":1.50,"b":123456789012345678901234}"#, "_v", 2).as_deref(),
            Some(r#"{"_v":2,"a":1.50,"b":123456789012345678901234}"#)
        );
        assert_eq!(
            with_version(" {}", "_v", 1).as_deref(),
            Some(r#" {"_v":1}"#)
        );
        assert_eq!(with_version(r#"{"_v":1}"#, "_v", 2), None);
        assert_eq!(with_version("[1]", "_v", 2), None);
        assert_eq!(with_version("nope", "_v", 2), None);
    }
}
