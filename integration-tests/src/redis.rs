//! The redis fixture (filled in by the redis adapter work).

use tern_core::testing::battery::MemoryBackend;

/// The redis backend, or why it is not available here.
///
/// # Errors
/// The reason the backend is skipped.
pub async fn backend() -> Result<MemoryBackend, String> {
    Err("the redis adapter is not written yet".to_owned())
}
