//! Every call into the server's module API, in one place: the only module of
//! this crate with `unsafe` code. Each function checks that the server exports
//! the API it uses (a missing one is an error value, never a panic) and turns
//! raw pointers into owned Rust values before returning.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use valkey_module::raw;

pub(crate) use crate::reply::Reply;

/// The server's context of one call into the module.
pub(crate) type Ctx = *mut raw::RedisModuleCtx;
/// One argument of a command (owned by the server).
pub(crate) type RString = *mut raw::RedisModuleString;
/// A command handler as the server calls it.
pub(crate) type Handler = extern "C" fn(Ctx, *mut RString, c_int) -> c_int;
/// A command filter as the server calls it.
pub(crate) type FilterFn = extern "C" fn(*mut raw::RedisModuleCommandFilterCtx);

/// `REDISMODULE_OK`.
pub(crate) const OK: c_int = 0;
/// `REDISMODULE_ERR`.
pub(crate) const ERR: c_int = 1;

/// Runs `f`, turning a panic into `on_panic()`: no unwind ever crosses into
/// the server (since Rust 1.81 it would abort it). The panic message goes to
/// the server's log through the panic hook ([`install_panic_hook`]).
pub(crate) fn guard<R>(on_panic: impl FnOnce() -> R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => on_panic(),
    }
}

/// Routes panic messages to the server's log (warning level) instead of stderr.
pub(crate) fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        log_warning(&format!(
            "tern: internal error (caught, the command was refused): {info}"
        ));
    }));
}

/// The bytes of a server string.
pub(crate) fn bytes<'a>(s: RString) -> &'a [u8] {
    let Some(f) = (unsafe { raw::RedisModule_StringPtrLen }) else {
        return &[];
    };
    if s.is_null() {
        return &[];
    }
    let mut len: usize = 0;
    let p = unsafe { f(s, &mut len) };
    if p.is_null() {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
}

/// A new server string (owned by the caller until handed over).
pub(crate) fn create_string(ctx: Ctx, b: &[u8]) -> RString {
    match unsafe { raw::RedisModule_CreateString } {
        Some(f) => unsafe { f(ctx, b.as_ptr().cast::<c_char>(), b.len()) },
        None => ptr::null_mut(),
    }
}

fn free_string(ctx: Ctx, s: RString) {
    if let (Some(f), false) = (unsafe { raw::RedisModule_FreeString }, s.is_null()) {
        unsafe { f(ctx, s) };
    }
}

/// The arguments of a command call.
pub(crate) fn args<'a>(argv: *mut RString, argc: c_int) -> &'a [RString] {
    if argv.is_null() || argc <= 0 {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(argv, usize::try_from(argc).unwrap_or(0)) }
}

/// Logs at warning level with no context (load, events).
pub(crate) fn log_warning(msg: &str) {
    log(ptr::null_mut(), "warning", msg);
}

/// Logs at notice level with no context.
pub(crate) fn log_notice(msg: &str) {
    log(ptr::null_mut(), "notice", msg);
}

fn log(ctx: Ctx, level: &str, msg: &str) {
    let Some(f) = (unsafe { raw::RedisModule_Log }) else {
        return;
    };
    let (Ok(level), Ok(msg)) = (CString::new(level), CString::new(msg.replace('\0', " "))) else {
        return;
    };
    unsafe { f(ctx, level.as_ptr(), c"%s".as_ptr(), msg.as_ptr()) };
}

// --- replies ------------------------------------------------------------------------------

/// Replies an error (`msg` starts with its code, e.g. `TERNSTALE ...`).
pub(crate) fn reply_error(ctx: Ctx, msg: &str) -> c_int {
    if let (Some(f), Ok(m)) = (
        unsafe { raw::RedisModule_ReplyWithError },
        CString::new(msg.replace(['\0', '\r', '\n'], " ")),
    ) {
        unsafe { f(ctx, m.as_ptr()) };
    }
    OK
}

/// Replies a simple string.
pub(crate) fn reply_simple(ctx: Ctx, msg: &str) -> c_int {
    if let (Some(f), Ok(m)) = (
        unsafe { raw::RedisModule_ReplyWithSimpleString },
        CString::new(msg.replace(['\0', '\r', '\n'], " ")),
    ) {
        unsafe { f(ctx, m.as_ptr()) };
    }
    OK
}

/// Replies an array of bulk strings.
pub(crate) fn reply_strings(ctx: Ctx, items: &[String]) -> c_int {
    let (Some(arr), Some(s)) = (unsafe { raw::RedisModule_ReplyWithArray }, unsafe {
        raw::RedisModule_ReplyWithStringBuffer
    }) else {
        return reply_error(ctx, "ERR tern: the server lacks RedisModule_ReplyWithArray");
    };
    unsafe { arr(ctx, items.len() as std::os::raw::c_long) };
    for item in items {
        unsafe { s(ctx, item.as_ptr().cast::<c_char>(), item.len()) };
    }
    OK
}

// --- context --------------------------------------------------------------------------------

/// `RedisModule_GetContextFlags` (0 when missing).
pub(crate) fn context_flags(ctx: Ctx) -> c_int {
    match unsafe { raw::RedisModule_GetContextFlags } {
        Some(f) => unsafe { f(ctx) },
        None => 0,
    }
}

/// The database the calling client has selected.
pub(crate) fn selected_db(ctx: Ctx) -> i32 {
    match unsafe { raw::RedisModule_GetSelectedDb } {
        Some(f) => unsafe { f(ctx) },
        None => 0,
    }
}

/// Selects database `db` for the context's client.
pub(crate) fn select_db(ctx: Ctx, db: i32) {
    if let Some(f) = unsafe { raw::RedisModule_SelectDb } {
        unsafe { f(ctx, db) };
    }
}

/// The calling client's id (0 for none, e.g. AOF loading).
pub(crate) fn client_id(ctx: Ctx) -> u64 {
    match unsafe { raw::RedisModule_GetClientId } {
        Some(f) => unsafe { f(ctx) },
        None => 0,
    }
}

/// Context flag: the command came from the primary (replication stream).
pub(crate) const CTX_REPLICATED: c_int = raw::REDISMODULE_CTX_FLAGS_REPLICATED as c_int;
/// Context flag: the server is loading (AOF or RDB).
pub(crate) const CTX_LOADING: c_int = raw::REDISMODULE_CTX_FLAGS_LOADING as c_int;
/// Context flag: this server is a replica.
pub(crate) const CTX_REPLICA: c_int = raw::REDISMODULE_CTX_FLAGS_SLAVE as c_int;

// --- keys of a command ------------------------------------------------------------------

/// Whether the server asks for the keys of a `getkeys-api` command.
pub(crate) fn is_keys_request(ctx: Ctx) -> bool {
    match unsafe { raw::RedisModule_IsKeysPositionRequest } {
        Some(f) => unsafe { f(ctx) != 0 },
        None => false,
    }
}

/// Reports the key at `pos` with its flags (`KeyAtPos` where flags are unsupported).
pub(crate) fn key_at_pos(ctx: Ctx, pos: c_int, flags: c_int) {
    if let Some(f) = unsafe { raw::RedisModule_KeyAtPosWithFlags } {
        unsafe { f(ctx, pos, flags) };
    } else if let Some(f) = unsafe { raw::RedisModule_KeyAtPos } {
        unsafe { f(ctx, pos) };
    }
}

/// The key positions (in `argv`, 0 = the command name) and flags of a command,
/// as the server computes them for ACLs and cluster routing; empty for a
/// command without keys or unknown to the server.
pub(crate) fn command_keys(ctx: Ctx, argv: &[RString]) -> Vec<(usize, c_int)> {
    let (Some(get), Some(free)) = (
        unsafe { raw::RedisModule_GetCommandKeysWithFlags },
        unsafe { raw::RedisModule_Free },
    ) else {
        return Vec::new();
    };
    if argv.is_empty() {
        return Vec::new();
    }
    let mut num: c_int = 0;
    let mut flags: *mut c_int = ptr::null_mut();
    let argc = c_int::try_from(argv.len()).unwrap_or(c_int::MAX);
    let keys = unsafe { get(ctx, argv.as_ptr().cast_mut(), argc, &mut num, &mut flags) };
    let mut out = Vec::new();
    if !keys.is_null() {
        for i in 0..usize::try_from(num).unwrap_or(0) {
            let pos = unsafe { *keys.add(i) };
            let fl = if flags.is_null() {
                0
            } else {
                unsafe { *flags.add(i) }
            };
            if let Ok(p) = usize::try_from(pos)
                && p < argv.len()
            {
                out.push((p, fl));
            }
        }
        unsafe { free(keys.cast::<c_void>()) };
    }
    if !flags.is_null() {
        unsafe { free(flags.cast::<c_void>()) };
    }
    out
}

// --- calling commands ---------------------------------------------------------------------

/// Runs `cmd args...` inside the server (`RM_Call` with `flags`, e.g. `"!E"`:
/// replicate, errors as replies) and copies the reply.
pub(crate) fn call(ctx: Ctx, flags: &str, cmd: &str, args: &[&[u8]]) -> Reply {
    let strings: Vec<RString> = args.iter().map(|a| create_string(ctx, a)).collect();
    let reply = call_raw(ctx, flags, cmd.as_bytes(), &strings);
    let out = match reply {
        Ok(r) => {
            let v = convert(r);
            free_reply(r);
            v
        }
        Err(e) => Reply::Error(e),
    };
    for s in strings {
        free_string(ctx, s);
    }
    out
}

fn call_raw(
    ctx: Ctx,
    flags: &str,
    cmd: &[u8],
    args: &[RString],
) -> Result<*mut raw::RedisModuleCallReply, String> {
    let Some(f) = (unsafe { raw::RedisModule_Call }) else {
        return Err("ERR tern: the server lacks RedisModule_Call".to_owned());
    };
    let cmd =
        CString::new(cmd).map_err(|_| "ERR tern: a command name holds a NUL byte".to_owned())?;
    let fmt =
        CString::new(format!("v{flags}")).map_err(|_| "ERR tern: bad call flags".to_owned())?;
    let r = unsafe { f(ctx, cmd.as_ptr(), fmt.as_ptr(), args.as_ptr(), args.len()) };
    if r.is_null() {
        let errno = std::io::Error::last_os_error();
        return Err(format!(
            "ERR tern: the server refused to run {} inside the module ({errno})",
            String::from_utf8_lossy(cmd.as_bytes())
        ));
    }
    Ok(r)
}

fn free_reply(r: *mut raw::RedisModuleCallReply) {
    if let Some(f) = unsafe { raw::RedisModule_FreeCallReply } {
        unsafe { f(r) };
    }
}

fn convert(r: *mut raw::RedisModuleCallReply) -> Reply {
    let (Some(ty), Some(ptr_len), Some(int), Some(len), Some(elem)) = (
        unsafe { raw::RedisModule_CallReplyType },
        unsafe { raw::RedisModule_CallReplyStringPtr },
        unsafe { raw::RedisModule_CallReplyInteger },
        unsafe { raw::RedisModule_CallReplyLength },
        unsafe { raw::RedisModule_CallReplyArrayElement },
    ) else {
        return Reply::Error("ERR tern: the server lacks the call-reply API".to_owned());
    };
    let t = unsafe { ty(r) } as isize;
    let text = || {
        let mut n: usize = 0;
        let p = unsafe { ptr_len(r, &mut n) };
        if p.is_null() {
            Vec::new()
        } else {
            unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }.to_vec()
        }
    };
    match t {
        raw::REDISMODULE_REPLY_STRING => Reply::Bytes(text()),
        raw::REDISMODULE_REPLY_ERROR => Reply::Error(String::from_utf8_lossy(&text()).into_owned()),
        raw::REDISMODULE_REPLY_INTEGER => Reply::Int(unsafe { int(r) }),
        raw::REDISMODULE_REPLY_ARRAY => {
            let n = unsafe { len(r) };
            Reply::Array((0..n).map(|i| convert(unsafe { elem(r, i) })).collect())
        }
        raw::REDISMODULE_REPLY_NULL | raw::REDISMODULE_REPLY_UNKNOWN => Reply::Nil,
        _ => Reply::Bytes(text()),
    }
}

/// Runs the command `argv` (name first) as the calling client would (its ACL
/// user, its RESP version; replicated if it changed data) and passes the reply
/// to the client unchanged.
/// `as_client`: check the calling client's ACL user (`C`); not for commands from
/// the primary, which has no user.
pub(crate) fn call_and_reply(ctx: Ctx, argv: &[RString], as_client: bool) -> c_int {
    let Some((name, rest)) = argv.split_first() else {
        return reply_error(ctx, "ERR wrong number of arguments for a tern command");
    };
    let flags = if as_client { "!EC0" } else { "!E0" };
    match call_raw(ctx, flags, bytes(*name), rest) {
        Ok(r) => {
            if let Some(f) = unsafe { raw::RedisModule_ReplyWithCallReply } {
                unsafe { f(ctx, r) };
            } else {
                reply_error(
                    ctx,
                    "ERR tern: the server lacks RedisModule_ReplyWithCallReply",
                );
            }
            free_reply(r);
            OK
        }
        Err(e) => reply_error(ctx, &e),
    }
}

// --- the key API (reads without a command call) ---------------------------------------------

/// What the key API reads of one key: its type and, on request, one hash
/// field or the string value. Opened read-only with `NOTOUCH` (no LRU/LFU
/// update: the command that follows touches the key itself).
pub(crate) fn key_read(ctx: Ctx, key: &[u8], want: KeyRead<'_>) -> Reply {
    let (Some(open), Some(close), Some(ty)) = (
        unsafe { raw::RedisModule_OpenKey },
        unsafe { raw::RedisModule_CloseKey },
        unsafe { raw::RedisModule_KeyType },
    ) else {
        return Reply::Error("ERR tern: the server lacks the key API".to_owned());
    };
    let name = create_string(ctx, key);
    if name.is_null() {
        return Reply::Error("ERR tern: could not create a string".to_owned());
    }
    let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOTOUCH) as c_int;
    let k = unsafe { open(ctx, name, mode) };
    let t = if k.is_null() {
        0
    } else {
        unsafe { ty(k.cast()) }
    };
    let out = match want {
        KeyRead::Type => Reply::Bytes(type_name(t).as_bytes().to_vec()),
        KeyRead::Exists => Reply::Int(i64::from(t != 0)),
        KeyRead::HashField(field) if t == 3 => hash_field(ctx, k, field),
        KeyRead::HashField(_) => Reply::Nil,
        KeyRead::String if t == 1 => string_value(k),
        KeyRead::String => Reply::Nil,
        KeyRead::Pttl if t == 0 => Reply::Int(-2),
        KeyRead::Pttl => match unsafe { raw::RedisModule_GetExpire } {
            Some(expire) => match unsafe { expire(k.cast()) } {
                ms if ms == i64::from(raw::REDISMODULE_NO_EXPIRE) => Reply::Int(-1),
                ms => Reply::Int(ms),
            },
            None => Reply::Error("ERR tern: the server lacks RedisModule_GetExpire".to_owned()),
        },
    };
    if !k.is_null() {
        unsafe { close(k.cast()) };
    }
    free_string(ctx, name);
    out
}

/// What [`key_read`] reads.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyRead<'a> {
    /// The Redis type, as TYPE names it.
    Type,
    /// 1 when the key exists, else 0.
    Exists,
    /// One field of a hash (nil when absent).
    HashField(&'a [u8]),
    /// The value of a string (nil when absent or another type).
    String,
    /// The time to live in milliseconds, as PTTL answers (-2 absent, -1 none).
    Pttl,
}

fn string_value(k: *mut raw::RedisModuleKey) -> Reply {
    let Some(dma) = (unsafe { raw::RedisModule_StringDMA }) else {
        return Reply::Error("ERR tern: the server lacks RedisModule_StringDMA".to_owned());
    };
    let mut len: usize = 0;
    let p = unsafe { dma(k, &mut len, raw::REDISMODULE_READ as c_int) };
    if p.is_null() {
        return Reply::Nil;
    }
    Reply::Bytes(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec())
}

fn hash_field(ctx: Ctx, k: *mut raw::RedisModuleKey, field: &[u8]) -> Reply {
    let Some(get) = (unsafe { raw::RedisModule_HashGet }) else {
        return Reply::Error("ERR tern: the server lacks RedisModule_HashGet".to_owned());
    };
    let f = create_string(ctx, field);
    let mut value: RString = ptr::null_mut();
    let flags = raw::REDISMODULE_HASH_NONE as c_int;
    unsafe {
        get(
            k,
            flags,
            f,
            &mut value as *mut RString,
            ptr::null_mut::<c_void>(),
        );
    }
    let out = if value.is_null() {
        Reply::Nil
    } else {
        Reply::Bytes(bytes(value).to_vec())
    };
    free_string(ctx, value);
    free_string(ctx, f);
    out
}

// --- command filter -----------------------------------------------------------------------

/// The command a filter sees.
pub(crate) struct FilterCtx(*mut raw::RedisModuleCommandFilterCtx);

impl FilterCtx {
    /// Wraps the server's pointer.
    pub(crate) fn new(p: *mut raw::RedisModuleCommandFilterCtx) -> FilterCtx {
        FilterCtx(p)
    }

    /// The number of arguments, the command name included.
    pub(crate) fn len(&self) -> usize {
        match unsafe { raw::RedisModule_CommandFilterArgsCount } {
            Some(f) => usize::try_from(unsafe { f(self.0) }).unwrap_or(0),
            None => 0,
        }
    }

    /// Argument `i` (0 = the command name).
    pub(crate) fn arg(&self, i: usize) -> &[u8] {
        let Some(f) = (unsafe { raw::RedisModule_CommandFilterArgGet }) else {
            return &[];
        };
        let Ok(i) = c_int::try_from(i) else {
            return &[];
        };
        bytes(unsafe { f(self.0, i) })
    }

    /// Inserts `arg` before argument `i`.
    pub(crate) fn insert(&self, i: usize, arg: &[u8]) -> bool {
        let Some(f) = (unsafe { raw::RedisModule_CommandFilterArgInsert }) else {
            return false;
        };
        let Ok(i) = c_int::try_from(i) else {
            return false;
        };
        let s = create_string(ptr::null_mut(), arg);
        if s.is_null() {
            return false;
        }
        // The server owns the inserted string from here on.
        unsafe { f(self.0, i, s) == OK }
    }

    /// The id of the client whose command this is (Redis 7.2+, Valkey).
    pub(crate) fn client_id(&self) -> u64 {
        match unsafe { raw::RedisModule_CommandFilterGetClientId } {
            Some(f) => unsafe { f(self.0) },
            None => 0,
        }
    }
}

// --- registration ---------------------------------------------------------------------------

/// `RedisModule_Init` (through valkey-module's exported shim).
pub(crate) fn init(ctx: Ctx, name: &std::ffi::CStr, version: c_int) -> c_int {
    unsafe {
        raw::Export_RedisModule_Init(
            ctx,
            name.as_ptr(),
            version,
            raw::REDISMODULE_APIVER_1 as c_int,
        )
    }
}

/// Every API the module needs that Redis 7.0 lacks, by name, when missing here.
pub(crate) fn missing_apis() -> Vec<&'static str> {
    let mut missing = Vec::new();
    macro_rules! need {
        ($($name:ident),*) => {$(
            if unsafe { raw::$name }.is_none() {
                missing.push(stringify!($name));
            }
        )*};
    }
    need!(
        RedisModule_CommandFilterGetClientId,
        RedisModule_RegisterCommandFilter,
        RedisModule_GetCommandKeysWithFlags,
        RedisModule_KeyAtPosWithFlags,
        RedisModule_ReplyWithCallReply,
        RedisModule_Call,
        RedisModule_SubscribeToKeyspaceEvents,
        RedisModule_AddPostNotificationJob,
        RedisModule_SubscribeToServerEvent,
        RedisModule_GetClientId,
        RedisModule_GetSelectedDb
    );
    missing
}

/// Registers a command.
pub(crate) fn create_command(
    ctx: Ctx,
    name: &std::ffi::CStr,
    handler: Handler,
    flags: &std::ffi::CStr,
) -> bool {
    let Some(f) = (unsafe { raw::RedisModule_CreateCommand }) else {
        return false;
    };
    unsafe { f(ctx, name.as_ptr(), Some(handler), flags.as_ptr(), 0, 0, 0) == OK }
}

/// Registers the command filter (`NOSELF`: not for this module's own calls).
pub(crate) fn register_filter(ctx: Ctx, filter: FilterFn) -> bool {
    let Some(f) = (unsafe { raw::RedisModule_RegisterCommandFilter }) else {
        return false;
    };
    let flags = raw::REDISMODULE_CMDFILTER_NOSELF as c_int;
    !unsafe { f(ctx, Some(filter), flags) }.is_null()
}

/// A keyspace-notification callback.
pub(crate) type NotifyFn = extern "C" fn(Ctx, c_int, *const c_char, RString) -> c_int;

/// Subscribes to hash and generic keyspace events, and to keys expiring and
/// evicted.
pub(crate) fn subscribe_keyspace(ctx: Ctx, cb: NotifyFn) -> bool {
    let Some(f) = (unsafe { raw::RedisModule_SubscribeToKeyspaceEvents }) else {
        return false;
    };
    let types = (raw::REDISMODULE_NOTIFY_HASH
        | raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED) as c_int;
    unsafe { f(ctx, types, Some(cb)) == OK }
}

/// A job run after the command that fired a notification (`RM_AddPostNotificationJob`).
pub(crate) type JobFn = extern "C" fn(Ctx, *mut c_void);

/// Schedules `job` to run once the current execution unit ends, where it may
/// write (a notification callback must not). `false` when the server refuses.
pub(crate) fn add_post_notification_job(ctx: Ctx, job: JobFn) -> bool {
    let Some(f) = (unsafe { raw::RedisModule_AddPostNotificationJob }) else {
        return false;
    };
    unsafe { f(ctx, Some(job), std::ptr::null_mut(), None) == OK }
}

/// The bytes of a NUL-terminated string the server passed (a keyspace event's
/// name); empty for a null pointer.
pub(crate) fn c_str<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        return &[];
    }
    unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes()
}

/// A server-event callback.
pub(crate) type EventFn = extern "C" fn(Ctx, raw::RedisModuleEvent, u64, *mut c_void);

/// Server event ids this module follows.
pub(crate) const EVENT_LOADING: u64 = raw::REDISMODULE_EVENT_LOADING;
/// See [`EVENT_LOADING`].
pub(crate) const EVENT_FLUSHDB: u64 = raw::REDISMODULE_EVENT_FLUSHDB;
/// See [`EVENT_LOADING`].
pub(crate) const EVENT_CLIENT_CHANGE: u64 = raw::REDISMODULE_EVENT_CLIENT_CHANGE;
/// See [`EVENT_LOADING`].
pub(crate) const EVENT_ROLE_CHANGED: u64 = raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED;
/// Loading subevent: ended.
pub(crate) const SUB_LOADING_ENDED: u64 = raw::REDISMODULE_SUBEVENT_LOADING_ENDED;
/// Flush subevent: end.
pub(crate) const SUB_FLUSHDB_END: u64 = raw::REDISMODULE_SUBEVENT_FLUSHDB_END;
/// Client-change subevent: disconnected.
pub(crate) const SUB_CLIENT_DISCONNECTED: u64 =
    raw::REDISMODULE_SUBEVENT_CLIENT_CHANGE_DISCONNECTED;

/// Subscribes `cb` to server event `id`.
pub(crate) fn subscribe_event(ctx: Ctx, id: u64, cb: EventFn) -> bool {
    let Some(f) = (unsafe { raw::RedisModule_SubscribeToServerEvent }) else {
        return false;
    };
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    unsafe { f(ctx, event, Some(cb)) == OK }
}

/// The client id of a client-change event's data.
pub(crate) fn client_info_id(data: *mut c_void) -> Option<u64> {
    if data.is_null() {
        return None;
    }
    let info = data.cast::<raw::RedisModuleClientInfo>();
    Some(unsafe { (*info).id })
}

// --- the filter's own reads (the fast path) -------------------------------------------------

/// The context the command filter reads keys with (a detached thread-safe context,
/// created at load, its database the store's): the filter's own context cannot open
/// keys. Only used on the main thread, inside the filter.
static FILTER_CTX: std::sync::atomic::AtomicPtr<raw::RedisModuleCtx> =
    std::sync::atomic::AtomicPtr::new(ptr::null_mut());

/// Creates the filter's context on database `db`; `false` where the server lacks the API.
pub(crate) fn make_filter_ctx(ctx: Ctx, db: i32) -> bool {
    let Some(f) = (unsafe { raw::RedisModule_GetDetachedThreadSafeContext }) else {
        return false;
    };
    let d = unsafe { f(ctx) };
    if d.is_null() {
        return false;
    }
    select_db(d, db);
    FILTER_CTX.store(d, std::sync::atomic::Ordering::Release);
    true
}

/// The filter's context (null before load, or where it could not be made).
pub(crate) fn filter_ctx() -> Ctx {
    FILTER_CTX.load(std::sync::atomic::Ordering::Acquire)
}

/// What the filter needs to know of the client whose command it sees.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientState {
    /// The database it has selected.
    pub(crate) db: i32,
    /// It is queueing a transaction (`MULTI`): its commands run later, at `EXEC`.
    pub(crate) multi: bool,
}

/// The state of client `id`; `None` for clients the server does not list (a script's
/// or a module's own client) or where the API is missing.
pub(crate) fn client_state(id: u64) -> Option<ClientState> {
    let f = unsafe { raw::RedisModule_GetClientInfoById }?;
    let mut ci = raw::RedisModuleClientInfo {
        version: u64::from(raw::REDISMODULE_CLIENTINFO_VERSION),
        flags: 0,
        id: 0,
        addr: [0; 46],
        port: 0,
        db: 0,
    };
    if unsafe {
        f(
            (&mut ci as *mut raw::RedisModuleClientInfo).cast::<c_void>(),
            id,
        )
    } != OK
    {
        return None;
    }
    Some(ClientState {
        db: i32::from(ci.db),
        multi: ci.flags & u64::from(raw::REDISMODULE_CLIENTINFO_FLAG_MULTI) != 0,
    })
}

/// One key as the filter sees it, read without any effect on the server (no
/// expiry, no LRU/LFU touch, no keyspace stats or notifications).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Peeked {
    /// The Redis type as TYPE names it (`none` when absent or logically expired,
    /// `?` when the server could not be asked).
    pub(crate) ty: &'static str,
    /// The hash field asked for, or a string's value when asked for.
    pub(crate) value: Option<Vec<u8>>,
}

/// What [`peek`] reads of a key besides its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want<'a> {
    /// The type only.
    Type,
    /// One field of a hash.
    Field(&'a [u8]),
    /// The value of a string.
    Value,
}

/// Reads `key` through `ctx` (the filter's context): its type, and what `want` names.
pub(crate) fn peek(ctx: Ctx, key: &[u8], want: Want<'_>) -> Peeked {
    let unknown = Peeked {
        ty: "?",
        value: None,
    };
    let (Some(open), Some(close), Some(ty)) = (
        unsafe { raw::RedisModule_OpenKey },
        unsafe { raw::RedisModule_CloseKey },
        unsafe { raw::RedisModule_KeyType },
    ) else {
        return unknown;
    };
    if ctx.is_null() {
        return unknown;
    }
    let name = create_string(ptr::null_mut(), key);
    if name.is_null() {
        return unknown;
    }
    let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOEFFECTS) as c_int;
    let k = unsafe { open(ctx, name, mode) };
    let t = if k.is_null() {
        0
    } else {
        unsafe { ty(k.cast()) }
    };
    let value = match (t, want) {
        (3, Want::Field(f)) => match hash_field(ptr::null_mut(), k, f) {
            Reply::Bytes(b) => Some(b),
            _ => None,
        },
        (1, Want::Value) => match string_value(k) {
            Reply::Bytes(b) => Some(b),
            _ => None,
        },
        _ => None,
    };
    if !k.is_null() {
        unsafe { close(k.cast()) };
    }
    free_string(ptr::null_mut(), name);
    Peeked {
        ty: type_name(t),
        value,
    }
}

/// The name TYPE gives a key type of the module API.
fn type_name(t: c_int) -> &'static str {
    match t {
        1 => "string",
        2 => "list",
        3 => "hash",
        4 => "set",
        5 => "zset",
        6 => "module",
        7 => "stream",
        _ => "none",
    }
}
