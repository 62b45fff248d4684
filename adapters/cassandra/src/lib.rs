//! tern adapter for Cassandra/ScyllaDB (`scylla` driver). Filled in by the Cassandra adapter work.
