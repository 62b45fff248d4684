//! tern's lazy migration inside Redis 7.2+ / Valkey 8, for clients in any language.
//!
//! Loaded with `--loadmodule libtern_redis_module.so [tern store URL]`, the module
//! reads tern's lazy spec from the state document (`[ns:]__tern:meta:state`) at
//! load, after the data loads, whenever the document changes (a keyspace
//! notification) and on `TERN.RELOAD`. A command filter sends every command
//! naming a key of a kind with a pending lazy migration (or a former name of
//! one) through `TERN.R`/`TERN.W`, which migrate each named entity (moved from
//! a former name, the pending steps applied by tern-core's own evaluation of the
//! language, the version tag set, TTLs kept) and then run the command, in one
//! atomic unit whose writes reach replicas and the AOF. See docs/module.md.
//!
//! Every entry point the server calls is wrapped in `catch_unwind`: no panic
//! crosses into the server.

mod fast;
pub mod fence;
mod ffi;
pub mod filter;
mod gone;
pub mod loaded;
pub mod migrate;
mod plain;
pub mod reply;

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use ffi::{Ctx, OK, RString};
use loaded::Loaded;
use reply::Reply;

/// The module's name in `MODULE LIST`.
pub const MODULE_NAME: &str = "tern";
/// The module's version in `MODULE LIST`.
pub const MODULE_VERSION: c_int = 1;

struct CtxServer {
    ctx: Ctx,
    replica: bool,
}

impl migrate::Server for CtxServer {
    fn left_just_now(&self, key: &str) -> bool {
        gone::left_just_now(key)
    }

    fn read(&mut self, cmd: &str, args: &[&[u8]]) -> Reply {
        // The checks every command on a migrating kind makes go through the key
        // API (no command call); the rest through RM_Call.
        match (cmd, args) {
            ("TYPE", [key]) => ffi::key_read(self.ctx, key, ffi::KeyRead::Type),
            ("EXISTS", [key]) => ffi::key_read(self.ctx, key, ffi::KeyRead::Exists),
            ("HGET", [key, field]) => ffi::key_read(self.ctx, key, ffi::KeyRead::HashField(field)),
            ("GET", [key]) => ffi::key_read(self.ctx, key, ffi::KeyRead::String),
            ("PTTL", [key]) => ffi::key_read(self.ctx, key, ffi::KeyRead::Pttl),
            _ => ffi::call(self.ctx, "E", cmd, args),
        }
    }

    fn write(&mut self, cmd: &str, args: &[&[u8]]) -> Result<Reply, String> {
        if self.replica {
            return Err(format!(
                "TERNSTALE {} names an entity not yet migrated, and a replica does not write: \
                 send the command to the primary",
                String::from_utf8_lossy(args.first().copied().unwrap_or_default())
            ));
        }
        Ok(ffi::call(self.ctx, "!E", cmd, args))
    }
}

/// Reads the state document and installs its spec.
fn reload(ctx: Ctx) -> Result<(), String> {
    let Some(cfg) = loaded::config() else {
        return Err("tern: the module is not configured".to_owned());
    };
    let key = cfg.wire.state_key();
    // The state lives in the configured database; the call runs in the context's.
    let db = ffi::selected_db(ctx);
    if db != cfg.db {
        ffi::select_db(ctx, cfg.db);
    }
    let doc = ffi::call(ctx, "E", "HMGET", &[key.as_bytes(), b"doc", b"rev"]);
    if db != cfg.db {
        ffi::select_db(ctx, db);
    }
    let (doc, rev) = match doc {
        Reply::Array(v) => {
            let mut it = v.into_iter();
            let d = match it.next() {
                Some(Reply::Bytes(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                _ => None,
            };
            let r = match it.next() {
                Some(Reply::Bytes(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                _ => None,
            };
            (d, r)
        }
        Reply::Error(e) if e.contains("non local key") => {
            // A cluster node that does not own the state key: its spec is pushed
            // (TERN.LOADSPEC); until then it refuses the namespace.
            if !loaded::current().is_some_and(|l| l.pushed) {
                loaded::install(Loaded::awaiting(&cfg.wire));
                ffi::log_notice(&format!(
                    "tern: {key} lives on another cluster node: waiting for TERN.LOADSPEC; \
                     keys of the namespace are refused (TERNNOSPEC) until then"
                ));
            }
            return Ok(());
        }
        Reply::Error(e) => return Err(format!("tern: reading {key}: {e}")),
        _ => (None, None),
    };
    if let (Some(cur), Some(r)) = (loaded::current(), rev.as_ref())
        && cur.revision.as_ref() == Some(r)
    {
        return Ok(());
    }
    let l = Loaded::from_doc(&cfg.wire, doc.as_deref(), rev)?;
    ffi::log_notice(&format!(
        "tern: spec loaded from {key}: {} kind(s) with a pending lazy migration",
        l.spec.pending_kinds().len()
    ));
    loaded::install(l);
    Ok(())
}

fn reload_logged(ctx: Ctx) {
    if let Err(e) = reload(ctx) {
        ffi::log_warning(&e);
    }
}

// --- the command filter ---------------------------------------------------------------------

extern "C" fn tern_filter(fctx: *mut valkey_module::raw::RedisModuleCommandFilterCtx) {
    ffi::guard(|| (), || filter_inner(&ffi::FilterCtx::new(fctx)));
}

fn filter_inner(f: &ffi::FilterCtx) {
    plain::forget_if_changing(f.arg(0), || f.client_id());
    let Some(l) = loaded::current() else { return };
    let n = f.len();
    let outdated = if l.prefixes.is_empty() && !fence_active() {
        return;
    } else if fence_active() {
        let Some(cfg) = loaded::config() else { return };
        fence::outdated(&l.spec, f.client_id())
            .iter()
            .map(|k| cfg.wire.kind_prefix(k).into_bytes())
            .collect()
    } else {
        Vec::new()
    };
    let watched = |a: &[u8]| l.watches(a) || outdated.iter().any(|p| a.starts_with(p));
    if !(1..n).any(|i| watched(f.arg(i))) {
        return;
    }
    if outdated.is_empty() && fast_path(f, &l) {
        return;
    }
    let route = filter::route((0..n).map(|i| f.arg(i)), watched);
    let name: &[u8] = match route {
        filter::Route::Pass => return,
        filter::Route::Read => b"TERN.R",
        filter::Route::Write => b"TERN.W",
        filter::Route::Blocked => b"TERN.B",
    };
    if !f.insert(0, name) {
        ffi::log_warning("tern: the command filter could not insert its command");
    }
}

/// Whether the command may run unwrapped ([`fast::may_pass`]): a client the server
/// lists (not a script's or a module's), not queueing a transaction, in the store's
/// database, whose declarations (if any) match the store.
fn fast_path(f: &ffi::FilterCtx, l: &Loaded) -> bool {
    let n = f.len();
    if n < 2 || !fast::reads_one_key(f.arg(0)) {
        return false;
    }
    let Some(cfg) = loaded::config() else {
        return false;
    };
    let client = f.client_id();
    if !plain::known_plain(client) {
        // Asked of the server once per client (a syscall for its address), then kept
        // until it sends a command that may change its state (`plain::forget_if_changing`).
        let Some(state) = ffi::client_state(client) else {
            return false;
        };
        if state.multi {
            // Queued: it runs at EXEC, after whatever other clients do meanwhile.
            return false;
        }
        if state.db != cfg.db {
            // Another database: the module command would run it untouched.
            return true;
        }
        plain::remember_plain(client);
    }
    if fence::any()
        && let Some(kind) = std::str::from_utf8(f.arg(1))
            .ok()
            .and_then(|k| cfg.wire.kind_of(k))
        && fence::declared(client, kind).is_some_and(|d| fence::refusal(&l.spec, kind, d).is_some())
    {
        return false;
    }
    let ctx = ffi::filter_ctx();
    if ctx.is_null() {
        return false;
    }
    let mut peek = |key: &[u8], want: ffi::Want<'_>| ffi::peek(ctx, key, want);
    fast::may_pass(&cfg.wire, l, f.arg(0), f.arg(1), n, &mut peek)
}

fn fence_active() -> bool {
    fence::any()
}

// --- TERN.R / TERN.W --------------------------------------------------------------------------

/// `TERN.B cmd args...`: a blocking command (`BLPOP`...) on a key of a kind being migrated,
/// refused with the reason and what to do. Waiting on a stale entity would hand the client
/// unmigrated data when it wakes, and `RM_Call` cannot run the command blocking.
extern "C" fn tern_blocked(ctx: Ctx, argv: *mut RString, argc: c_int) -> c_int {
    entry(ctx, || {
        let argv = ffi::args(argv, argc);
        if ffi::is_keys_request(ctx) {
            for (pos, flags) in ffi::command_keys(ctx, argv.get(1..).unwrap_or_default()) {
                ffi::key_at_pos(ctx, c_int::try_from(pos + 1).unwrap_or(0), flags);
            }
            return OK;
        }
        let inner = argv.get(1..).unwrap_or_default();
        let text = |a: &RString| String::from_utf8_lossy(ffi::bytes(*a)).into_owned();
        let name = inner.first().map(text).unwrap_or_default().to_uppercase();
        let cfg = loaded::config();
        let pending = ffi::command_keys(ctx, inner)
            .into_iter()
            .filter_map(|(pos, _)| inner.get(pos).map(text))
            .find_map(|key| {
                let kind = cfg?.wire.kind_of(&key)?.to_owned();
                Some((key, kind))
            });
        let at = pending
            .map(|(key, kind)| format!(" on {key}, of kind {kind},"))
            .unwrap_or_default();
        ffi::reply_error(
            ctx,
            &format!(
                "TERNBLOCKING {name} would wait{at} while a lazy migration of its kind is \
                 pending, and tern's module cannot migrate an entity during a blocking wait: \
                 use the non-blocking command, or complete the migration with `tern sweep` \
                 (blocking commands then pass)"
            ),
        )
    })
}

extern "C" fn tern_read(ctx: Ctx, argv: *mut RString, argc: c_int) -> c_int {
    entry(ctx, || exec(ctx, ffi::args(argv, argc), false))
}

extern "C" fn tern_write(ctx: Ctx, argv: *mut RString, argc: c_int) -> c_int {
    entry(ctx, || exec(ctx, ffi::args(argv, argc), true))
}

fn entry(ctx: Ctx, f: impl FnOnce() -> c_int) -> c_int {
    ffi::guard(
        || {
            ffi::reply_error(
                ctx,
                "ERR tern: internal error (see the server log); nothing was written by the module for this command",
            )
        },
        f,
    )
}

fn exec(ctx: Ctx, argv: &[RString], write: bool) -> c_int {
    if ffi::is_keys_request(ctx) {
        for (pos, flags) in ffi::command_keys(ctx, argv.get(1..).unwrap_or_default()) {
            ffi::key_at_pos(ctx, c_int::try_from(pos + 1).unwrap_or(0), flags);
        }
        return OK;
    }
    let Some(inner) = argv.get(1..).filter(|a| !a.is_empty()) else {
        return ffi::reply_error(
            ctx,
            "ERR wrong number of arguments for 'tern.r|tern.w': give the command to run",
        );
    };
    let flags = ffi::context_flags(ctx);
    let from_primary = flags & (ffi::CTX_REPLICATED | ffi::CTX_LOADING) != 0;
    let (Some(cfg), Some(l)) = (loaded::config(), loaded::current()) else {
        return ffi::call_and_reply(ctx, inner, !from_primary);
    };
    if from_primary || ffi::selected_db(ctx) != cfg.db {
        return ffi::call_and_reply(ctx, inner, !from_primary);
    }
    let client = ffi::client_id(ctx);
    if l.awaiting_push {
        return refuse_without_spec(ctx, cfg, inner);
    }
    let mut targets: Vec<migrate::Target> = Vec::new();
    for (pos, _) in ffi::command_keys(ctx, inner) {
        let Ok(key) = std::str::from_utf8(ffi::bytes(inner[pos])) else {
            continue;
        };
        if let Some(kind) = cfg.wire.kind_of(key) {
            let now = l.spec.renamed_to(kind).unwrap_or(kind);
            if let Some(why) =
                fence::declared(client, now).and_then(|d| fence::refusal(&l.spec, now, d))
            {
                return ffi::reply_error(ctx, &why);
            }
        }
        if let Some(t) = migrate::target(&cfg.wire, &l, key)
            && !targets.contains(&t)
        {
            targets.push(t);
        }
    }
    let mut srv = CtxServer {
        ctx,
        replica: flags & ffi::CTX_REPLICA != 0,
    };
    for t in &targets {
        if write && t.via_former && !former_write_allowed(ffi::bytes(inner[0])) {
            return ffi::reply_error(
                ctx,
                &format!(
                    "TERNRENAMED kind {} was renamed to {} by a lazy migration: write {} instead \
                     (a write under the former name would split the entity in two)",
                    cfg.wire
                        .kind_of(&former_key(&cfg.wire, t, inner))
                        .unwrap_or("?"),
                    t.kind,
                    t.key
                ),
            );
        }
        if let Err(e) = migrate::migrate(&mut srv, &cfg.wire, &l, t) {
            return ffi::reply_error(ctx, &e);
        }
    }
    let rc = ffi::call_and_reply(ctx, inner, true);
    if write && !srv.replica {
        for t in targets.iter().filter(|t| !t.via_former) {
            if let Err(e) = migrate::stamp(&mut srv, &cfg.wire, &l, t) {
                ffi::log_warning(&format!("tern: stamping {}: {e}", t.key));
            }
        }
    }
    rc
}

fn refuse_without_spec(ctx: Ctx, cfg: &loaded::Config, inner: &[RString]) -> c_int {
    for (pos, _) in ffi::command_keys(ctx, inner) {
        if let Ok(key) = std::str::from_utf8(ffi::bytes(inner[pos]))
            && cfg.wire.kind_of(key).is_some()
        {
            return ffi::reply_error(
                ctx,
                &format!(
                    "TERNNOSPEC this cluster node has not received tern's lazy spec since it \
                         started ({} lives on another node): send it with TERN.LOADSPEC \
                         (tern_redis::module::push_spec), then retry",
                    cfg.wire.state_key()
                ),
            );
        }
    }
    ffi::call_and_reply(ctx, inner, true)
}

/// The key a command named for target `t` (under the former name).
fn former_key(wire: &tern_redis::wire::Wire, t: &migrate::Target, inner: &[RString]) -> String {
    for a in inner.iter().skip(1) {
        if let Ok(s) = std::str::from_utf8(ffi::bytes(*a))
            && let Some(k) = wire.kind_of(s)
            && s.ends_with(&t.id_part)
            && wire.kind_prefix(k).len() + t.id_part.len() == s.len()
            && s != t.key
        {
            return s.to_owned();
        }
    }
    t.key.clone()
}

/// Writes a client may send under a former name: they cannot create an entity there
/// (tern's own sweep renames and deletes former keys).
fn former_write_allowed(name: &[u8]) -> bool {
    [
        "del", "unlink", "rename", "renamenx", "expire", "pexpire", "persist",
    ]
    .iter()
    .any(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

// --- tern's own commands ------------------------------------------------------------------

extern "C" fn tern_reload(ctx: Ctx, _argv: *mut RString, _argc: c_int) -> c_int {
    entry(ctx, || {
        // Read whatever revision is stored, even the one in force.
        loaded::install(Loaded::default());
        match reload(ctx) {
            Ok(()) => ffi::reply_simple(ctx, "OK"),
            Err(e) => ffi::reply_error(ctx, &format!("ERR {e}")),
        }
    })
}

extern "C" fn tern_loadspec(ctx: Ctx, argv: *mut RString, argc: c_int) -> c_int {
    entry(ctx, || {
        let [_, rev, doc] = ffi::args(argv, argc) else {
            return ffi::reply_error(
                ctx,
                "ERR wrong number of arguments: TERN.LOADSPEC <rev> <state document JSON>",
            );
        };
        let Some(cfg) = loaded::config() else {
            return ffi::reply_error(ctx, "ERR tern: the module is not configured");
        };
        let rev = String::from_utf8_lossy(ffi::bytes(*rev)).into_owned();
        let doc = String::from_utf8_lossy(ffi::bytes(*doc)).into_owned();
        // An empty document: the store has no state yet (nothing is pending).
        let doc = (!doc.is_empty()).then_some(doc);
        match Loaded::from_doc(&cfg.wire, doc.as_deref(), Some(rev)) {
            Ok(mut l) => {
                l.pushed = true;
                loaded::install(l);
                ffi::reply_simple(ctx, "OK")
            }
            Err(e) => ffi::reply_error(ctx, &format!("ERR {e}")),
        }
    })
}

extern "C" fn tern_declare(ctx: Ctx, argv: *mut RString, argc: c_int) -> c_int {
    entry(ctx, || {
        let args = ffi::args(argv, argc);
        let [_, kind, version] = args else {
            return ffi::reply_error(
                ctx,
                "ERR wrong number of arguments: TERN.DECLARE <kind> <version>",
            );
        };
        let kind = String::from_utf8_lossy(ffi::bytes(*kind)).into_owned();
        let Ok(version) = String::from_utf8_lossy(ffi::bytes(*version)).parse::<u64>() else {
            return ffi::reply_error(
                ctx,
                "ERR TERN.DECLARE: the version must be a non-negative integer",
            );
        };
        let l = loaded::current().unwrap_or_default();
        match fence::declare(&l.spec, ffi::client_id(ctx), &kind, version) {
            Ok(()) => ffi::reply_simple(ctx, "OK"),
            Err(e) => ffi::reply_error(ctx, &e),
        }
    })
}

extern "C" fn tern_info(ctx: Ctx, _argv: *mut RString, _argc: c_int) -> c_int {
    entry(ctx, || {
        let l = loaded::current().unwrap_or_default();
        let mut out = vec![
            "module".to_owned(),
            MODULE_NAME.to_owned(),
            "version".to_owned(),
            MODULE_VERSION.to_string(),
            "url".to_owned(),
            loaded::config().map(|c| c.url.clone()).unwrap_or_default(),
            "state_revision".to_owned(),
            l.revision.clone().unwrap_or_default(),
        ];
        for chain in l.spec.pending_kinds() {
            out.push("pending".to_owned());
            out.push(format!(
                "{}@{} formers={}",
                chain.kind,
                chain.version,
                chain.formers.join(",")
            ));
        }
        ffi::reply_strings(ctx, &out)
    })
}

// --- notifications and server events ------------------------------------------------------

extern "C" fn on_keyspace(ctx: Ctx, _type: c_int, event: *const c_char, key: RString) -> c_int {
    ffi::guard(
        || OK,
        || {
            gone::on_keyspace(ctx, ffi::c_str(event), ffi::bytes(key));
            if let Some(cfg) = loaded::config()
                && ffi::bytes(key) == cfg.wire.state_key().as_bytes()
                && ffi::selected_db(ctx) == cfg.db
            {
                reload_logged(ctx);
            }
            OK
        },
    )
}

extern "C" fn on_event(
    ctx: Ctx,
    event: valkey_module::raw::RedisModuleEvent,
    sub: u64,
    data: *mut c_void,
) {
    ffi::guard(
        || (),
        || match event.id {
            ffi::EVENT_LOADING if sub == ffi::SUB_LOADING_ENDED => reload_logged(ctx),
            ffi::EVENT_FLUSHDB if sub == ffi::SUB_FLUSHDB_END => reload_logged(ctx),
            ffi::EVENT_ROLE_CHANGED => reload_logged(ctx),
            ffi::EVENT_CLIENT_CHANGE if sub == ffi::SUB_CLIENT_DISCONNECTED => {
                if let Some(id) = ffi::client_info_id(data) {
                    fence::forget(id);
                    plain::forget(id);
                }
            }
            _ => {}
        },
    );
}

// --- load ---------------------------------------------------------------------------------

/// The server's entry point (`--loadmodule`, `MODULE LOAD`).
///
/// # Safety
/// Called by the server with a valid context and `argc` arguments.
#[unsafe(no_mangle)]
#[allow(unsafe_code)]
pub unsafe extern "C" fn RedisModule_OnLoad(ctx: Ctx, argv: *mut RString, argc: c_int) -> c_int {
    ffi::guard(|| ffi::ERR, || on_load(ctx, argv, argc))
}

fn on_load(ctx: Ctx, argv: *mut RString, argc: c_int) -> c_int {
    if ffi::init(ctx, c"tern", MODULE_VERSION) != OK {
        return ffi::ERR;
    }
    ffi::install_panic_hook();
    let missing = ffi::missing_apis();
    if !missing.is_empty() {
        ffi::log_warning(&format!(
            "tern: this server lacks {} (module API of Redis 7.2+ or Valkey 8): the module \
             is not loaded; use Valkey 8 or Redis >= 7.2",
            missing.join(", ")
        ));
        return ffi::ERR;
    }
    let args: Vec<String> = ffi::args(argv, argc)
        .iter()
        .map(|a| String::from_utf8_lossy(ffi::bytes(*a)).into_owned())
        .collect();
    let cfg = match loaded::Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            ffi::log_warning(&e);
            return ffi::ERR;
        }
    };
    ffi::log_notice(&format!("tern: module loading for {}", cfg.url));
    if !loaded::set_config(cfg) {
        ffi::log_warning("tern: the module is already loaded in this process");
        return ffi::ERR;
    }
    let commands: [(&CStr, ffi::Handler, &CStr); 7] = [
        (c"tern.loadspec", tern_loadspec, c"readonly"),
        (c"tern.w", tern_write, c"write deny-oom getkeys-api"),
        (c"tern.b", tern_blocked, c"readonly fast getkeys-api"),
        (c"tern.r", tern_read, c"readonly may-replicate getkeys-api"),
        (c"tern.reload", tern_reload, c"readonly fast"),
        (c"tern.declare", tern_declare, c"readonly fast"),
        (c"tern.info", tern_info, c"readonly fast"),
    ];
    for (name, handler, flags) in commands {
        if !ffi::create_command(ctx, name, handler, flags) {
            ffi::log_warning(&format!(
                "tern: could not register {}",
                name.to_string_lossy()
            ));
            return ffi::ERR;
        }
    }
    let ok = ffi::register_filter(ctx, tern_filter)
        && ffi::subscribe_keyspace(ctx, on_keyspace)
        && ffi::subscribe_event(ctx, ffi::EVENT_LOADING, on_event)
        && ffi::subscribe_event(ctx, ffi::EVENT_FLUSHDB, on_event)
        && ffi::subscribe_event(ctx, ffi::EVENT_ROLE_CHANGED, on_event)
        && ffi::subscribe_event(ctx, ffi::EVENT_CLIENT_CHANGE, on_event);
    if !ok {
        ffi::log_warning("tern: could not register the command filter or the event handlers");
        return ffi::ERR;
    }
    // The filter's own context for its key reads (the fast path); without it every
    // command on a pending kind goes through the module command.
    if let Some(cfg) = loaded::config()
        && !ffi::make_filter_ctx(ctx, cfg.db)
    {
        ffi::log_warning("tern: no context for the filter's reads: the fast path is off");
    }
    // At startup the data is not loaded yet (the state is read when loading ends);
    // with MODULE LOAD it is.
    if ffi::context_flags(ctx) & ffi::CTX_LOADING == 0 {
        reload_logged(ctx);
    }
    OK
}
