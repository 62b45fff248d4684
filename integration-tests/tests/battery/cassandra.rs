//! The battery on cassandra.

tern_core::battery_tests!("cassandra", tern_integration_tests::cassandra::backend());
