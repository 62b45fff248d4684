//! What the module knows: the store's layout (from the module's arguments)
//! and the lazy spec read from tern's state document in the server.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use tern_core::lazy::Spec;
use tern_core::migrate::state::StateDoc;
use tern_core::model::Version;
use tern_redis::KindLayout;
use tern_redis::wire::Wire;

/// The module's configuration: `--loadmodule <so> [URL]` where URL is the tern
/// store URL of the data (`redis://127.0.0.1/?prefix=app&set=tags...`: only
/// the database and tern's options are used).
#[derive(Debug)]
pub struct Config {
    /// The layout of keys and values.
    pub wire: Wire,
    /// The database holding the store (`/N` in the URL, default 0).
    pub db: i32,
    /// The URL as given (password masked).
    pub url: String,
}

impl Config {
    /// Parses the module's arguments (none: `redis://127.0.0.1/`).
    ///
    /// # Errors
    /// A message naming the argument and the fix.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let url = match args {
            [] => "redis://127.0.0.1/".to_owned(),
            [url] => url.clone(),
            _ => {
                return Err(format!(
                    "tern: expected one module argument, the tern store URL (e.g. \
                     redis://127.0.0.1/0?prefix=app&set=tags); got {} arguments",
                    args.len()
                ));
            }
        };
        let wire = Wire::from_url(&url).map_err(|e| format!("tern: module argument: {e}"))?;
        let db = db_of(&url)?;
        Ok(Config {
            url: wire.config().redacted.clone(),
            wire,
            db,
        })
    }
}

/// The database number of a redis URL's path (`/3`), 0 when absent.
fn db_of(url: &str) -> Result<i32, String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let path = rest
        .split_once('/')
        .map_or("", |(_, p)| p)
        .trim_matches('/');
    if path.is_empty() {
        return Ok(0);
    }
    path.parse().map_err(|_| {
        format!("tern: module argument: the URL's path {path:?} is not a database number (e.g. /0)")
    })
}

/// The lazy view in force: the spec and the key prefixes the filter watches.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The spec (every kind's chain), empty when the store has no state document.
    pub spec: Spec,
    /// `ns:kind:` of every kind with a pending lazy migration and of every
    /// former name of a pending kind rename: a command naming a key that starts
    /// with one goes through the module.
    pub prefixes: Vec<Vec<u8>>,
    /// The state document's `rev` field when read.
    pub revision: Option<String>,
    /// A cluster node that does not hold the state document and has not been
    /// sent it (`TERN.LOADSPEC`) since it started: every key of the namespace
    /// is refused (`TERNNOSPEC`) rather than served possibly stale.
    pub awaiting_push: bool,
    /// The spec came from `TERN.LOADSPEC` (a cluster node without the state key).
    pub pushed: bool,
    /// What the filter's fast path needs of each pending kind it may pass reads of
    /// (not JSON strings, not former names), computed once per spec so that the
    /// filter builds no string per command.
    pub fast: Vec<FastKind>,
}

/// A kind with a pending lazy migration, as the filter's fast path sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastKind {
    /// The kind (its name now).
    pub kind: String,
    /// How its entities are stored.
    pub layout: KindLayout,
    /// Its logical version: what an up-to-date entity carries.
    pub version: Version,
    /// The length of `ns:kind:`.
    pub prefix_len: usize,
    /// `ns:former:` of each former name of the kind (newest first).
    pub former_prefixes: Vec<Vec<u8>>,
}

impl FastKind {
    fn of(wire: &Wire, spec: &Spec) -> Vec<FastKind> {
        spec.pending_kinds()
            .into_iter()
            .filter(|c| {
                spec.renamed_to(&c.kind).is_none() && wire.layout(&c.kind) != KindLayout::Json
            })
            .map(|c| FastKind {
                kind: c.kind.clone(),
                layout: wire.layout(&c.kind),
                version: c.version,
                prefix_len: wire.kind_prefix(&c.kind).len(),
                former_prefixes: c
                    .formers
                    .iter()
                    .map(|f| wire.kind_prefix(f).into_bytes())
                    .collect(),
            })
            .collect()
    }
}

impl Loaded {
    /// The view of a state document (`None`: the store has none).
    ///
    /// # Errors
    /// A document that is not tern's state, or a ledger entry that does not parse.
    pub fn from_doc(
        wire: &Wire,
        doc: Option<&str>,
        revision: Option<String>,
    ) -> Result<Loaded, String> {
        let Some(doc) = doc else {
            return Ok(Loaded::default());
        };
        let doc: StateDoc = serde_json::from_str(doc).map_err(|e| {
            format!(
                "tern: the state document {} is not tern's: {e}",
                wire.state_key()
            )
        })?;
        let spec = Spec::from_state(&doc, &BTreeMap::new())
            .map_err(|e| format!("tern: the state document's ledger: {e}"))?;
        let mut watched = BTreeSet::new();
        for chain in spec.pending_kinds() {
            watched.insert(chain.kind.clone());
            for f in &chain.formers {
                watched.insert(f.clone());
            }
        }
        let prefixes = watched
            .iter()
            .map(|k| wire.kind_prefix(k).into_bytes())
            .collect();
        Ok(Loaded {
            fast: FastKind::of(wire, &spec),
            spec,
            prefixes,
            revision,
            awaiting_push: false,
            pushed: false,
        })
    }

    /// The view of a cluster node that has no spec yet: it watches the whole
    /// namespace and refuses it until `TERN.LOADSPEC`.
    pub fn awaiting(wire: &Wire) -> Loaded {
        Loaded {
            prefixes: vec![wire.namespace().as_bytes().to_vec()],
            awaiting_push: true,
            ..Loaded::default()
        }
    }

    /// Whether `arg` may name a key of a watched kind.
    pub fn watches(&self, arg: &[u8]) -> bool {
        self.prefixes.iter().any(|p| arg.starts_with(p))
    }
}

/// The view in force, replaced whole on every reload (readers keep theirs).
static LOADED: RwLock<Option<Arc<Loaded>>> = RwLock::new(None);
/// The configuration, set once at load.
static CONFIG: std::sync::OnceLock<Config> = std::sync::OnceLock::new();

/// The configuration (after load).
pub fn config() -> Option<&'static Config> {
    CONFIG.get()
}

/// Sets the configuration at load.
pub fn set_config(c: Config) -> bool {
    CONFIG.set(c).is_ok()
}

/// The view in force.
pub fn current() -> Option<Arc<Loaded>> {
    match LOADED.read() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    }
}

/// Installs a new view.
pub fn install(l: Loaded) {
    crate::plain::forget_all();
    let l = Some(Arc::new(l));
    match LOADED.write() {
        Ok(mut g) => *g = l,
        Err(p) => *p.into_inner() = l,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_the_database() {
        assert_eq!(db_of("redis://127.0.0.1/"), Ok(0));
        assert_eq!(db_of("redis://127.0.0.1:6390/3?prefix=a"), Ok(3));
        assert_eq!(db_of("redis://127.0.0.1?prefix=a/b"), Ok(0));
        assert!(db_of("redis://127.0.0.1/x").is_err());
    }

    #[test]
    fn bad_arguments_are_refused_with_the_fix() {
        let e = Config::from_args(&["a".into(), "b".into()]).unwrap_err();
        assert!(e.contains("one module argument"), "{e}");
        let e = Config::from_args(&["redis://h/?nope=1".into()]).unwrap_err();
        assert!(e.contains("module argument"), "{e}");
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A state document that is not tern's is an error, never a panic.
        #[test]
        fn any_document_is_read_or_refused(doc in ".{0,200}") {
            let wire = Wire::from_url("redis://127.0.0.1/?prefix=app").unwrap();
            let _ = Loaded::from_doc(&wire, Some(&doc), None);
        }
    }
}
