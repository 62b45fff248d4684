//! Resolving settings: command line over environment (`TERN_*`) over `tern.toml` over defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::opt::Opt;

/// The keys `tern.toml` may hold (a typo is an error, not silently ignored).
const KNOWN_KEYS: [&str; 6] = [
    "store_url",
    "password_file",
    "migrations",
    "run",
    "lease",
    "tls",
];
const KNOWN_RUN_KEYS: [&str; 4] = [
    "batch_size",
    "pushdown_batch_size",
    "max_rate",
    "census_passes",
];
const KNOWN_LEASE_KEYS: [&str; 1] = ["ttl_ms"];
const KNOWN_TLS_KEYS: [&str; 3] = ["ca_file", "cert_file", "key_file"];

#[derive(Debug, Default, Deserialize)]
struct FileConfig {
    store_url: Option<String>,
    password_file: Option<PathBuf>,
    migrations: Option<PathBuf>,
    #[serde(default)]
    run: RunSection,
    #[serde(default)]
    tls: crate::credentials::TlsFiles,
    #[serde(default)]
    lease: LeaseSection,
}

#[derive(Debug, Default, Deserialize)]
struct RunSection {
    batch_size: Option<usize>,
    pushdown_batch_size: Option<usize>,
    max_rate: Option<f64>,
    census_passes: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
struct LeaseSection {
    ttl_ms: Option<u64>,
}

/// The resolved settings of one invocation.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The store URL, if any source gave one.
    pub store_url: Option<String>,
    /// The store's password given apart from the URL (`--store-password-file`,
    /// `TERN_STORE_PASSWORD`, `password_file`), if any.
    pub store_password: Option<crate::credentials::StorePassword>,
    /// The TLS files of `[tls]` (paths resolved), added to the store URL's options.
    pub tls: crate::credentials::TlsFiles,
    /// The migrations folder.
    pub migrations_dir: PathBuf,
    /// Entities per batch.
    pub batch_size: usize,
    /// Entities per batch of a stage the store runs inside itself.
    pub pushdown_batch_size: usize,
    /// Entities per second, if limited.
    pub max_rate: Option<f64>,
    /// Census sweeps before giving up.
    pub census_passes: u32,
    /// The lease's time to live.
    pub lease_ttl: Duration,
    /// The folder of the project file (relative paths in it are relative to this).
    pub project_dir: PathBuf,
}

fn check_keys(table: &toml::Table, file: &Path) -> anyhow::Result<()> {
    for (key, value) in table {
        let known: &[&str] = match key.as_str() {
            "run" => &KNOWN_RUN_KEYS,
            "lease" => &KNOWN_LEASE_KEYS,
            "tls" => &KNOWN_TLS_KEYS,
            k if KNOWN_KEYS.contains(&k) => continue,
            other => bail!(
                "{}: unknown key `{other}`; tern.toml knows {}",
                file.display(),
                KNOWN_KEYS.map(|k| format!("`{k}`")).join(", ")
            ),
        };
        let Some(section) = value.as_table() else {
            bail!("{}: `{key}` must be a table ([{key}])", file.display());
        };
        for sub in section.keys() {
            if !known.contains(&sub.as_str()) {
                bail!(
                    "{}: unknown key `{key}.{sub}`; [{key}] knows {}",
                    file.display(),
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
    }
    Ok(())
}

/// `TERN_RUN__*` and `TERN_LEASE__*` variables must name a key of their
/// section (a typo is an error, as an unknown key in tern.toml is).
fn check_env_keys() -> anyhow::Result<()> {
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let (section, known): (&str, &[&str]) = if name.starts_with("TERN_RUN__") {
            ("TERN_RUN__", &KNOWN_RUN_KEYS)
        } else if name.starts_with("TERN_LEASE__") {
            ("TERN_LEASE__", &KNOWN_LEASE_KEYS)
        } else if name.starts_with("TERN_TLS__") {
            ("TERN_TLS__", &KNOWN_TLS_KEYS)
        } else {
            continue;
        };
        let key = name[section.len()..].to_ascii_lowercase();
        if !known.contains(&key.as_str()) {
            bail!(
                "environment variable {name}: unknown setting; {section}* knows {}",
                known
                    .iter()
                    .map(|k| format!("{section}{}", k.to_ascii_uppercase()))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok(())
}

/// Resolves the settings for `opt`.
///
/// # Errors
/// An unreadable or invalid `tern.toml`, or an invalid `TERN_*` variable.
pub fn resolve(opt: &Opt) -> anyhow::Result<Settings> {
    let file = &opt.config;
    let project_dir = file
        .parent()
        .map(Path::to_path_buf)
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    check_env_keys()?;
    let mut builder = config::Config::builder();
    if !file.exists() && file != Path::new("tern.toml") {
        bail!(
            "{}: no such file (--config names the project file; `tern init` creates one)",
            file.display()
        );
    }
    if file.exists() {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            anyhow::anyhow!("{}: {}", file.display(), e.to_string().trim_end())
        })?;
        check_keys(&table, file)?;
        builder =
            builder.add_source(config::File::from(file.as_path()).format(config::FileFormat::Toml));
    }
    builder = builder.add_source(
        config::Environment::with_prefix("TERN")
            .prefix_separator("_")
            .separator("__")
            .try_parsing(true),
    );
    let merged = builder.build().with_context(|| {
        format!(
            "cannot load settings from {} and TERN_* variables",
            file.display()
        )
    })?;
    let fc: FileConfig = merged.try_deserialize().with_context(|| {
        format!(
            "invalid settings in {} or a TERN_* variable",
            file.display()
        )
    })?;

    if let Some(url) = &opt.store {
        crate::credentials::warn_if_password_in(url);
    }
    let store_url = opt
        .store
        .clone()
        .or(fc.store_url)
        .map(|url| resolve_embedded(&url, &project_dir, opt.store.is_some()));
    let store_password = crate::credentials::resolve_password(
        opt.store_password_file.as_deref(),
        fc.password_file.as_deref(),
        &project_dir,
    )?;
    let tls = fc.tls.resolved(&project_dir);
    let migrations_dir = match (&opt.migrations, fc.migrations) {
        (Some(dir), _) => dir.clone(),
        (None, Some(dir)) if dir.is_relative() => project_dir.join(dir),
        (None, Some(dir)) => dir,
        (None, None) => project_dir.join("migrations"),
    };
    // The defaults are the engine's own (RunOptions, LeaseOptions): defined once, there.
    let run = tern_core::migrate::RunOptions::default();
    let batch_size = fc.run.batch_size.unwrap_or(run.batch_size);
    if batch_size == 0 {
        bail!("run.batch_size must be at least 1");
    }
    let pushdown_batch_size = fc
        .run
        .pushdown_batch_size
        .unwrap_or(run.pushdown_batch_size);
    if pushdown_batch_size == 0 {
        bail!("run.pushdown_batch_size must be at least 1");
    }
    Ok(Settings {
        store_url,
        store_password,
        tls,
        migrations_dir,
        batch_size,
        pushdown_batch_size,
        max_rate: fc.run.max_rate.filter(|r| *r > 0.0),
        census_passes: fc.run.census_passes.unwrap_or(run.census_passes),
        lease_ttl: fc.lease.ttl_ms.map_or_else(
            || tern_core::migrate::LeaseOptions::default().ttl,
            |ms| Duration::from_millis(ms.max(100)),
        ),
        project_dir,
    })
}

/// A relative `embedded:` path in tern.toml is relative to the project folder;
/// on the command line, to the current folder.
fn resolve_embedded(url: &str, project_dir: &Path, from_command_line: bool) -> String {
    match crate::connect::embedded_path(url) {
        Ok(Some(path)) if !from_command_line && Path::new(path).is_relative() => {
            // The options (`?cache_mb=N`) stay.
            let query = url.find('?').map_or("", |i| &url[i..]);
            format!("embedded:{}{query}", project_dir.join(path).display())
        }
        _ => url.to_owned(),
    }
}
