//! tern adapter for MongoDB (official `mongodb` driver). Filled in by the MongoDB adapter work.
