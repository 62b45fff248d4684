//! The mongodb fixture (filled in by the mongodb adapter work).

use tern_core::testing::battery::MemoryBackend;

/// The mongodb backend, or why it is not available here.
///
/// # Errors
/// The reason the backend is skipped.
pub async fn backend() -> Result<MemoryBackend, String> {
    Err("the mongodb adapter is not written yet".to_owned())
}
