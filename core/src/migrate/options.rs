//! How the engine runs batches: [`RunOptions`].

/// The memory the index of one move or copy may take before it spills to disk.
pub(crate) const DEFAULT_JOIN_MEMORY: usize = 64 << 20;

/// How to run batches.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Entities per batch (and per checkpoint).
    pub batch_size: usize,
    /// Entities per batch (and per checkpoint) of a stage the store runs inside
    /// itself (`Pushdown::update_in_place`): nothing travels to the client, so a
    /// bigger batch costs no memory and pays the per-batch round trips and the
    /// checkpoint less often (a MongoDB pushdown took 10-15% longer in batches
    /// of 1,000; docs/benchmarks.md).
    pub pushdown_batch_size: usize,
    /// At most this many entities per second, if set.
    pub max_rate: Option<f64>,
    /// Apply an unsafe move/copy anyway (the greatest source key wins a conflict).
    pub force_unsafe: bool,
    /// How often a conflicting write is retried before the entity is left to the census.
    pub max_retries: u32,
    /// How many census sweeps may run before a migration gives up.
    pub census_passes: u32,
    /// Use the store's server-side update when it has one.
    pub pushdown: bool,
    /// Ask the store for a cheap estimate of each stage's entities, for the
    /// progress bar's total ([`CountEstimate::estimate_count`](crate::store::CountEstimate::estimate_count): never a scan).
    pub estimate_totals: bool,
    /// Bytes of memory the index of a move or copy may take before it spills
    /// to a scratch file (docs/design.md, "Move and copy by index").
    pub join_memory: usize,
    /// Partitions run at once by this process in a partitioned stage
    /// (`tern up --workers N`). With 1 (the default) and no `partitions`,
    /// stages run unpartitioned, as one scan.
    pub workers: usize,
    /// How many partitions a partitioned stage is split into (the store may
    /// make fewer); `None`: 4 per worker. Setting it partitions stages even
    /// with one worker here, so that workers elsewhere (`tern worker`) can help.
    pub partitions: Option<usize>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            batch_size: 1000,
            pushdown_batch_size: 10_000,
            max_rate: None,
            force_unsafe: false,
            max_retries: 8,
            census_passes: 3,
            pushdown: true,
            estimate_totals: true,
            join_memory: DEFAULT_JOIN_MEMORY,
            workers: 1,
            partitions: None,
        }
    }
}
