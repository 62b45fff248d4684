//! What the two Amico benchmarks share: KVolve's five scopes, the members of
//! each sorted set, and the five `rename kind` migrations.

use tern_core::migrate::{Migration, MigrationSet};

/// Amico's scopes: `amico:<scope>:<id>` becomes `amico:<scope>:default:<id>`.
pub(crate) const SCOPES: [&str; 5] = [
    "followers",
    "following",
    "blocked",
    "reciprocated",
    "pending",
];

/// The members and scores of sorted set `i`.
pub(crate) fn members(i: usize) -> [(f64, String); 3] {
    [
        (i as f64, format!("a{}", i * 7 % 1_000_003)),
        (1.5, format!("b{}", i + 1)),
        (1e9 + i as f64, format!("c{}", i * 13 % 999_983)),
    ]
}

/// The five renames, eager or `lazy`.
pub(crate) fn migrations(lazy: bool) -> MigrationSet {
    let mode = if lazy { "lazy\n" } else { "" };
    let mut set = MigrationSet::new();
    for (i, scope) in SCOPES.iter().enumerate() {
        let id = u32::try_from(i).expect("id") + 1;
        set.add(
            Migration::from_script(
                id,
                &format!("scope_{scope}"),
                &format!("{id:04}_scope_{scope}.tern"),
                &format!("{mode}rename kind `amico:{scope}` to `amico:{scope}:default`"),
            )
            .expect("script"),
        )
        .expect("add");
    }
    set
}

/// The scoped name of the Amico key `amico:<scope>:<id>`
/// (`amico:<scope>:default:<id>`), or `None` for a key already scoped or
/// not of that form.
pub(crate) fn scoped(key: &str) -> Option<String> {
    let mut parts = key.splitn(3, ':');
    let (Some("amico"), Some(scope), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    (!id.starts_with("default:")).then(|| format!("amico:{scope}:default:{id}"))
}

/// `tern sweep` of every pending kind, `batch` entities a page, `call_size`
/// a server-side call (the default when `None`): how many sorted sets it
/// renamed, and how long it took.
pub(crate) async fn sweep(
    store: std::sync::Arc<dyn tern_core::store::Store>,
    batch: usize,
    call_size: Option<usize>,
) -> (u64, std::time::Duration) {
    let defaults = tern_core::lazy::SweepOptions::default();
    let t = std::time::Instant::now();
    let report = tern_core::lazy::sweep::sweep(
        store,
        &tern_core::migrate::LeaseOptions::default(),
        &std::collections::BTreeMap::new(),
        &tern_core::lazy::SweepOptions {
            batch_size: batch,
            call_size: call_size.unwrap_or(defaults.call_size),
            ..defaults
        },
    )
    .await
    .expect("sweep");
    (report.migrated.values().sum(), t.elapsed())
}
