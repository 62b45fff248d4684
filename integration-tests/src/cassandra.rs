//! The cassandra fixture (filled in by the cassandra adapter work).

use tern_core::testing::battery::MemoryBackend;

/// The cassandra backend, or why it is not available here.
///
/// # Errors
/// The reason the backend is skipped.
pub async fn backend() -> Result<MemoryBackend, String> {
    Err("the cassandra adapter is not written yet".to_owned())
}
