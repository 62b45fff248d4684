//! Where migrations come from: `migrations/NNNN_name.tern` files, and Rust code.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::error::{MigrateError, Result};
use crate::lang::{self, Script};
use crate::model::{Key, Map};

/// A migration written in Rust: a per-entity transform of one kind, for
/// changes the language cannot express. It is one version step of its kind.
///
/// The transform must be a pure function of the entity (it may not read other
/// entities): it runs eagerly in batches, and on read for lazy migration.
pub trait EntityMigration: Send + Sync {
    /// The kind it rewrites.
    fn kind(&self) -> &str;
    /// Changes `value` in place; `Ok(true)` when it changed the data.
    ///
    /// # Errors
    /// A message saying why this entity cannot be migrated; the run stops with it.
    fn transform(&self, key: &Key, value: &mut Map) -> std::result::Result<bool, String>;
}

/// What a migration does.
#[derive(Clone)]
pub enum Body {
    /// Statements of the evolution language.
    Script(Script),
    /// A transform written in Rust.
    Code(Arc<dyn EntityMigration>),
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Script(s) => f.debug_tuple("Script").field(&s.statements.len()).finish(),
            Body::Code(c) => f.debug_tuple("Code").field(&c.kind()).finish(),
        }
    }
}

/// One migration.
#[derive(Debug, Clone)]
pub struct Migration {
    /// Its number; migrations run in this order.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// What it does.
    pub body: Body,
    /// `sha256:<hex>` of its normalized text (for code: of its name and revision tag).
    pub checksum: String,
    /// The file it came from, if any.
    pub path: Option<PathBuf>,
    /// Installed lazily (the `lazy` directive; see `tern_core::lazy`): no entity
    /// is touched by `tern up`, each migrates on access.
    pub lazy: bool,
}

impl Migration {
    /// Builds a migration from the text of a script. `file` names it in errors.
    ///
    /// The checksum covers the canonical printed form of the statements, so
    /// changing comments, blank lines or spacing does not change it.
    ///
    /// # Errors
    /// The parse error, with file, line and column.
    pub fn from_script(id: u32, name: &str, file: &str, text: &str) -> Result<Migration> {
        let (lazy, text) = super::directive::strip(text);
        let script = lang::parse_file(file, &text)?;
        if script.statements.is_empty() {
            return Err(MigrateError::Invalid {
                id,
                name: name.to_owned(),
                message: format!("{file} has no statements; add at least one or delete the file"),
            });
        }
        if let Some((span, message)) = lang::limits::too_deep(&script) {
            return Err(MigrateError::Invalid {
                id,
                name: name.to_owned(),
                message: format!("{file}:{}:{}: {message}", span.line, span.col),
            });
        }
        if lazy {
            super::directive::check_script(file, &script).map_err(|message| {
                MigrateError::Invalid {
                    id,
                    name: name.to_owned(),
                    message,
                }
            })?;
        }
        let canonical = super::directive::canonical(lazy, &lang::print(&script));
        Ok(Migration {
            id,
            name: name.to_owned(),
            checksum: checksum(canonical.as_bytes()),
            body: Body::Script(script),
            path: None,
            lazy,
        })
    }

    /// Builds a migration written in Rust. Change `revision` whenever the
    /// transform's behaviour changes, so an applied one is not silently replaced.
    pub fn from_code(
        id: u32,
        name: &str,
        revision: &str,
        code: Arc<dyn EntityMigration>,
    ) -> Migration {
        let text = format!("code\n{name}\n{}\n{revision}", code.kind());
        Migration {
            id,
            name: name.to_owned(),
            checksum: checksum(text.as_bytes()),
            body: Body::Code(code),
            path: None,
            lazy: false,
        }
    }

    /// This code migration, installed lazily (see `tern_core::lazy`): its
    /// checksum changes, and lazy clients must register it
    /// (`LazyClientBuilder::code`) to migrate entities through it.
    #[must_use]
    pub fn into_lazy(mut self) -> Migration {
        if !self.lazy {
            self.lazy = true;
            self.checksum = checksum(format!("lazy\n{}", self.checksum).as_bytes());
        }
        self
    }

    /// The canonical text of a script migration (empty for code).
    pub fn canonical_text(&self) -> String {
        match &self.body {
            Body::Script(s) => super::directive::canonical(self.lazy, &lang::print(s)),
            Body::Code(_) => String::new(),
        }
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn checksum(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The migrations of a project, ordered by number.
#[derive(Debug, Clone, Default)]
pub struct MigrationSet {
    by_id: BTreeMap<u32, Migration>,
}

/// Splits `NNNN_name.tern` into the number and the name.
pub fn parse_file_name(file_name: &str) -> Option<(u32, String)> {
    let stem = file_name.strip_suffix(".tern")?;
    let (digits, name) = stem.split_once('_')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return None;
    }
    Some((digits.parse().ok()?, name.to_owned()))
}

impl MigrationSet {
    /// An empty set.
    pub fn new() -> MigrationSet {
        MigrationSet::default()
    }

    /// Loads every `NNNN_name.tern` file of `dir`. Other files ending in `.tern`
    /// are an error; files with other extensions and hidden files are ignored.
    ///
    /// # Errors
    /// A missing folder, a bad file name, a duplicate number, an unreadable or unparsable file.
    pub fn load_dir(dir: &Path) -> Result<MigrationSet> {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                MigrateError::MissingFolder(dir.to_owned())
            } else {
                MigrateError::Io {
                    path: dir.to_owned(),
                    source: e,
                }
            }
        })?;
        let mut set = MigrationSet::new();
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| MigrateError::Io {
                path: dir.to_owned(),
                source: e,
            })?;
            let path = entry.path();
            let file_name = entry.file_name().to_string_lossy().into_owned();
            if file_name.starts_with('.') || !file_name.ends_with(".tern") {
                continue;
            }
            files.push((file_name, path));
        }
        files.sort();
        for (file_name, path) in files {
            let (id, name) = parse_file_name(&file_name)
                .ok_or_else(|| MigrateError::BadFileName(path.clone()))?;
            let bytes = std::fs::read(&path).map_err(|e| MigrateError::Io {
                path: path.clone(),
                source: e,
            })?;
            let text = String::from_utf8(bytes).map_err(|e| {
                let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
                let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
                let line_start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                let col = String::from_utf8_lossy(&valid[line_start..])
                    .chars()
                    .count()
                    + 1;
                MigrateError::Invalid {
                    id,
                    name: name.clone(),
                    message: format!(
                        "{}:{line}:{col}: not valid UTF-8; save the file as UTF-8",
                        path.display()
                    ),
                }
            })?;
            // A byte-order mark (some editors write one) is not part of the script.
            let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
            let mut m = Migration::from_script(id, &name, &path.display().to_string(), text)?;
            m.path = Some(path);
            set.add(m)?;
        }
        Ok(set)
    }

    /// Adds a migration (from a file or from code).
    ///
    /// # Errors
    /// [`MigrateError::DuplicateId`] when the number is taken.
    pub fn add(&mut self, migration: Migration) -> Result<()> {
        if let Some(existing) = self.by_id.get(&migration.id) {
            return Err(MigrateError::DuplicateId {
                id: migration.id,
                first: describe(existing),
                second: describe(&migration),
            });
        }
        self.by_id.insert(migration.id, migration);
        Ok(())
    }

    /// The migrations in order.
    pub fn iter(&self) -> impl Iterator<Item = &Migration> {
        self.by_id.values()
    }

    /// The migration with this number.
    pub fn get(&self, id: u32) -> Option<&Migration> {
        self.by_id.get(&id)
    }

    /// How many migrations.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// No migrations?
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

fn describe(m: &Migration) -> String {
    match &m.path {
        Some(p) => p.display().to_string(),
        None => format!("{} (registered from code)", m.name),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        assert_eq!(parse_file_name("0001_init.tern"), Some((1, "init".into())));
        assert_eq!(
            parse_file_name("12_add-likes.tern"),
            Some((12, "add-likes".into()))
        );
        assert_eq!(parse_file_name("x_init.tern"), None);
        assert_eq!(parse_file_name("0001.tern"), None);
        assert_eq!(parse_file_name("0001_.tern"), None);
        assert_eq!(parse_file_name("0001_a b.tern"), None);
    }

    #[test]
    fn checksum_ignores_comments_and_spacing() {
        let a = Migration::from_script(1, "a", "a.tern", "add blogpost.likes = 0\n").unwrap();
        let b = Migration::from_script(1, "a", "a.tern", "-- likes\nadd   blogpost.likes=0 ;\n\n")
            .unwrap();
        let c = Migration::from_script(1, "a", "a.tern", "add blogpost.likes = 1\n").unwrap();
        assert_eq!(a.checksum, b.checksum);
        assert_ne!(a.checksum, c.checksum);
    }

    #[test]
    fn load_dir_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            MigrationSet::load_dir(&dir.path().join("nope")),
            Err(MigrateError::MissingFolder(_))
        ));
        std::fs::write(dir.path().join("0001_a.tern"), "add user.x = 1").unwrap();
        std::fs::write(dir.path().join("001_b.tern"), "add user.y = 1").unwrap();
        assert!(matches!(
            MigrationSet::load_dir(dir.path()),
            Err(MigrateError::DuplicateId { id: 1, .. })
        ));
        std::fs::remove_file(dir.path().join("001_b.tern")).unwrap();
        std::fs::write(dir.path().join("two.tern"), "add user.y = 1").unwrap();
        assert!(matches!(
            MigrationSet::load_dir(dir.path()),
            Err(MigrateError::BadFileName(_))
        ));
        std::fs::remove_file(dir.path().join("two.tern")).unwrap();
        std::fs::write(dir.path().join("README.md"), "ignored").unwrap();
        std::fs::write(dir.path().join("0002_b.tern"), "add user.y = \n").unwrap();
        let err = MigrationSet::load_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("0002_b.tern:1:"), "{err}");
        std::fs::write(dir.path().join("0002_b.tern"), "add user.y = 2\n").unwrap();
        let set = MigrationSet::load_dir(dir.path()).unwrap();
        assert_eq!(set.iter().map(|m| m.id).collect::<Vec<_>>(), vec![1, 2]);
    }
}
