//! A move or copy's conflict: a target that sources with different values would
//! write (\[SE\] Proposition 2). Found by the reference semantics ([`super::eval`]),
//! the dry-run check ([`super::safety`]) and the check by index ([`super::join`]).

use std::fmt;

use crate::model::{Key, Value};

/// A target that sources with different values would write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetConflict {
    /// The target.
    pub target: Key,
    /// Every source that writes it and the value it writes (`None`: the source
    /// lacks the property, which writes "absent" only with
    /// [`EvalOptions::literal_transfer`](crate::lang::eval::EvalOptions::literal_transfer)), in source key order.
    pub writes: Vec<(Key, Option<Value>)>,
}

impl fmt::Display for TargetConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} from ", self.target)?;
        for (i, (source, value)) in self.writes.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match value {
                Some(v) => write!(f, "{source} = {v}")?,
                None => write!(f, "{source} (absent)")?,
            }
        }
        Ok(())
    }
}
