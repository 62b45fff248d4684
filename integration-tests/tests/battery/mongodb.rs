//! The battery on mongodb.

tern_core::battery_tests!("mongodb", tern_integration_tests::mongodb::backend());
