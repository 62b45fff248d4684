//! The battery on redis.

tern_core::battery_tests!("redis", tern_integration_tests::redis::backend());
