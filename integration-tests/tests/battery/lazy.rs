//! The lazy battery (`tern_core::testing::lazy`) on every server store.
//!
//! Lazy kind renames need `Store::write_atomic` (the entity under the new
//! kind and the removal of the stale copy under the old one in one step):
//! Redis runs it as one Lua script; MongoDB and Cassandra do not implement it
//! yet, so there a lazy kind rename is refused at install (which the battery
//! checks) and the rename tests report a skip with that reason.

mod redis {
    tern_core::lazy_battery_tests!("redis", tern_integration_tests::redis::backend());
}

mod mongodb {
    tern_core::lazy_battery_tests!("mongodb", tern_integration_tests::mongodb::backend());
}

mod cassandra {
    tern_core::lazy_battery_tests!("cassandra", tern_integration_tests::cassandra::backend());
}
