//! `tern init`, `tern new`, `tern check`.

use anyhow::{Context, bail};
use tern_core::lang::Statement;
use tern_core::lang::safety::static_warnings;
use tern_core::migrate::{Body, MigrateError, source::parse_file_name};

use crate::opt::{CheckArgs, InitArgs, NewArgs, RunArgs};
use crate::{Ctx, EXIT_OK};

const EXAMPLE: &str = "-- Each line is one statement of tern's evolution language, e.g.:\n\
-- add blogpost.likes = 0\n\
-- rename blogpost.text to content where blogpost.format = \"md\"\n\
-- copy user.email to blogpost where user.name = blogpost.author\n";

/// `tern init`: writes tern.toml and creates migrations/.
///
/// # Errors
/// When files cannot be written.
pub fn init(ctx: &Ctx, args: &InitArgs) -> anyhow::Result<u8> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir.join("migrations"))
        .with_context(|| format!("cannot create {}", dir.join("migrations").display()))?;
    let file = dir.join("tern.toml");
    let existed = file.exists();
    let mut password_file = None;
    if existed {
        if !ctx.opt.json {
            crate::outln!("{} exists; left as it is", file.display());
        }
    } else {
        // A password never goes into tern.toml (a file people commit and share): it goes
        // into a file of its own, readable by its owner only, that tern.toml names.
        let (store_url, password) = match crate::credentials::split_password(&args.with_store) {
            Some((url, password)) => {
                let path = dir.join(PASSWORD_FILE);
                write_password_file(&path, &password)?;
                password_file = Some(path);
                (url, format!("password_file = {PASSWORD_FILE:?}\n"))
            }
            None => (args.with_store.clone(), String::new()),
        };
        let text = format!(
            "# tern project settings. Environment variables TERN_* override them\n\
             # (TERN_STORE_URL, TERN_RUN__BATCH_SIZE, ...); --store overrides both.\n\
             # The store's password: password_file, TERN_STORE_PASSWORD or\n\
             # --store-password-file, never in store_url (README, \"Connecting securely\").\n\
             store_url = {store_url:?}\n\
             {password}\
             migrations = \"migrations\"\n\n\
             [run]\nbatch_size = 1000\n# max_rate = 5000  # entities per second\n\n\
             [lease]\nttl_ms = 30000\n"
        );
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
        if !ctx.opt.json {
            crate::outln!("created {}", file.display());
        }
        if let Some(path) = &password_file {
            tracing::warn!(
                file = %path.display(),
                "the store URL held a password: it is in {} (readable by you only), which \
                 tern.toml names as password_file; keep that file out of version control. \
                 The URL given on the command line was visible in the process list: next time \
                 give the password with TERN_STORE_PASSWORD or --store-password-file",
                path.display()
            );
        }
    }
    if ctx.opt.json {
        crate::outln!(
            "{}",
            serde_json::json!({"config": file.display().to_string(), "created": !existed,
                "migrations": dir.join("migrations").display().to_string(),
                "password_file": password_file.map(|p| p.display().to_string())})
        );
        return Ok(EXIT_OK);
    }
    crate::outln!(
        "migrations go in {}; create one with `tern new NAME`",
        dir.join("migrations").display()
    );
    Ok(EXIT_OK)
}

/// The file `tern init` writes a password of `--with-store` into (named by tern.toml).
const PASSWORD_FILE: &str = "tern.password";

/// Writes `password` to a new file `path` that only its owner can read.
///
/// # Errors
/// An existing file (never overwritten), or one that cannot be written.
fn write_password_file(path: &std::path::Path, password: &str) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(path).with_context(|| {
        format!(
            "cannot create the password file {} for the password of --with-store (remove an \
             existing one first)",
            path.display()
        )
    })?;
    std::io::Write::write_all(&mut out, format!("{password}\n").as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `tern new NAME`: creates the next numbered migration file.
///
/// # Errors
/// A bad name, a missing folder, or a file that cannot be written.
pub fn new(ctx: &Ctx, args: &NewArgs) -> anyhow::Result<u8> {
    let dir = &ctx.settings.migrations_dir;
    if args.name.is_empty()
        || !args
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        bail!(
            "migration name {:?}: use letters, digits, `_` and `-` only",
            args.name
        );
    }
    let entries = std::fs::read_dir(dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::Error::new(MigrateError::MissingFolder(dir.clone()))
        } else {
            anyhow::Error::new(e).context(format!("cannot read {}", dir.display()))
        }
    })?;
    let mut last = 0u32;
    for entry in entries.flatten() {
        if let Some((id, _)) = parse_file_name(&entry.file_name().to_string_lossy()) {
            last = last.max(id);
        }
    }
    let next = last
        .checked_add(1)
        .context("migration numbers are exhausted")?;
    let path = dir.join(format!("{next:04}_{}.tern", args.name));
    std::fs::write(&path, EXAMPLE).with_context(|| format!("cannot write {}", path.display()))?;
    if ctx.opt.json {
        crate::outln!(
            "{}",
            serde_json::json!({"created": path.display().to_string(), "id": next})
        );
    } else {
        crate::outln!("created {}", path.display());
    }
    Ok(EXIT_OK)
}

/// `tern check`: parses, validates and classifies; with a store, runs the safety check.
///
/// What `check`, `plan` and `up` say of a lazy migration.
pub(crate) const LAZY_NOTE: &str = "lazy: `tern up` installs it without touching any entity; clients migrate entities on access, `tern sweep` completes it";

/// # Errors
/// Parse errors (file:line:col), validation errors; exit 5 for an unsafe move/copy.
pub async fn check(ctx: &Ctx, args: &CheckArgs) -> anyhow::Result<u8> {
    let set = ctx.migrations()?;
    let mut report = Vec::new();
    for m in set.iter() {
        let statements: Vec<serde_json::Value> = match &m.body {
            Body::Script(script) => script
                .statements()
                .map(|s| {
                    let warnings: Vec<String> = match s {
                        Statement::Move(t) | Statement::Copy(t) => {
                            static_warnings(t).iter().map(ToString::to_string).collect()
                        }
                        _ => Vec::new(),
                    };
                    serde_json::json!({
                        "statement": s.to_string(),
                        "safety": classify(s),
                        "warnings": warnings,
                    })
                })
                .collect(),
            Body::Code(c) => vec![
                serde_json::json!({"statement": format!("code on {}", c.kind()), "safety": "per-entity"}),
            ],
        };
        report.push(
            serde_json::json!({"id": m.id, "name": m.name, "checksum": m.checksum, "lazy": m.lazy,
            "statements": statements}),
        );
    }
    let online = !args.offline && ctx.settings.store_url.is_some();
    let mut conflicts = Vec::new();
    let mut pending = Vec::new();
    if online {
        let store = ctx.store().await?;
        let migrator = ctx.migrator(store, set.clone(), &RunArgs::default());
        pending = migrator.validate().await?;
        if !pending.is_empty() {
            let dry = migrator.dry_run(None, 0).await?;
            conflicts = dry.conflicts;
        }
    }
    if ctx.opt.json {
        crate::outln!(
            "{}",
            serde_json::json!({"migrations": report, "checked_against_store": online, "pending": pending,
                "unsafe_conflicts": conflicts})
        );
    } else {
        for m in &report {
            crate::outln!(
                "{:04}_{}  {}",
                m["id"].as_u64().unwrap_or(0),
                m["name"].as_str().unwrap_or(""),
                m["checksum"].as_str().unwrap_or("")
            );
            if m["lazy"] == true {
                crate::outln!("  {LAZY_NOTE}");
            }
            for s in m["statements"].as_array().into_iter().flatten() {
                crate::outln!(
                    "  {:<28} {}",
                    s["safety"].as_str().unwrap_or(""),
                    s["statement"].as_str().unwrap_or("")
                );
                for w in s["warnings"].as_array().into_iter().flatten() {
                    crate::outln!("  {:<28}   warning: {}", "", w.as_str().unwrap_or(""));
                }
            }
        }
        if online {
            crate::outln!(
                "pending: {}",
                if pending.is_empty() {
                    "none".to_owned()
                } else {
                    format!("{pending:?}")
                }
            );
            if conflicts.is_empty() && !pending.is_empty() {
                crate::outln!(
                    "safety check (dry run against the store): no target is written with conflicting values"
                );
            }
        } else {
            crate::outln!(
                "not checked against a store (move/copy safety depends on the data): pass --store or drop --offline"
            );
        }
    }
    if let Some(refused) = tern_core::migrate::conflict::refusal(&conflicts) {
        return Err(refused.into());
    }
    Ok(EXIT_OK)
}

fn classify(s: &Statement) -> &'static str {
    if s.is_safe_by_construction() {
        "safe (Proposition 1)"
    } else {
        "needs data check (Prop. 2)"
    }
}
