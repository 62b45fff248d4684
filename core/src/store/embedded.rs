//! The embedded store (redb). Filled in by the embedded-store work.
