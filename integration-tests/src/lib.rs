//! Harness for tern's integration tests against real servers.
