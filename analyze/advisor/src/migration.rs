//! Emission of the tern migration that builds the recommended column families.
