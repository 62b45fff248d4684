//! Property values: the [`Value`] enum and its total order.

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A map from property names to values: the value of an entity, or a nested map.
///
/// Sorted by name, so that two equal maps print, encode and compare the same way.
pub type Map = BTreeMap<String, Value>;

/// A property value.
///
/// The data model of every store tern supports. Equality and ordering are
/// *structural* and total: `Int(1)` and `Float(1.0)` are different values, and
/// floats compare by [`f64::total_cmp`] (so `NaN == NaN`). The evolution
/// language's *atom* semantics (numeric equality across int and float, array
/// membership) live in [`Value::atom_matches`], not here.
#[derive(Debug, Clone)]
pub enum Value {
    /// The null value. Distinct from an absent property.
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// A UTF-8 string.
    String(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A point in time, in milliseconds since the Unix epoch (UTC).
    ///
    /// Milliseconds are what BSON dates and CQL timestamps hold, so this maps
    /// losslessly onto both.
    Timestamp(i64),
    /// An ordered list of values (a multi-valued property in \[SE\]).
    Array(Vec<Value>),
    /// A nested entity.
    Map(Map),
}

impl Value {
    /// Rank of the variant, used to order values of different types.
    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Int(_) => 2,
            Value::Float(_) => 3,
            Value::String(_) => 4,
            Value::Bytes(_) => 5,
            Value::Timestamp(_) => 6,
            Value::Array(_) => 7,
            Value::Map(_) => 8,
        }
    }

    /// The name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::Timestamp(_) => "timestamp",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
        }
    }

    /// Is `self` equal to `literal` in the sense of an \[SE\] equality atom?
    ///
    /// Numbers compare by numeric value (`1 = 1.0`), as MongoDB does; every
    /// other type compares structurally. Array membership is *not* handled
    /// here; see [`Value::atom_matches`].
    pub fn loosely_equals(&self, literal: &Value) -> bool {
        match (self, literal) {
            (Value::Int(a), Value::Float(b)) | (Value::Float(b), Value::Int(a)) => {
                // Exact comparison: the float must be integral and in range.
                b.fract() == 0.0
                    && *b >= -(2f64.powi(63))
                    && *b < 2f64.powi(63)
                    && (*b as i64) == *a
            }
            (Value::Float(a), Value::Float(b)) => a == b,
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.loosely_equals(y))
            }
            (Value::Map(a), Value::Map(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|((ka, va), (kb, vb))| ka == kb && va.loosely_equals(vb))
            }
            _ => self == literal,
        }
    }

    /// The \[SE\] atom `n = v` for a property whose value is `self`.
    ///
    /// True when the value equals `literal`, or when the value is multi-valued
    /// (an array) and one of its elements equals `literal`. An absent property
    /// is not a `Value` at all, so callers treat it as `false` before getting
    /// here. `null` literals match `null` values (tern keeps null as a value;
    /// only absence never matches).
    pub fn atom_matches(&self, literal: &Value) -> bool {
        if self.loosely_equals(literal) {
            return true;
        }
        match self {
            Value::Array(items) => items.iter().any(|item| item.loosely_equals(literal)),
            _ => false,
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
            (Value::String(a), Value::String(b)) => a.cmp(b),
            (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
            (Value::Timestamp(a), Value::Timestamp(b)) => a.cmp(b),
            (Value::Array(a), Value::Array(b)) => a.cmp(b),
            (Value::Map(a), Value::Map(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Value::Null => {}
            Value::Bool(b) => b.hash(state),
            Value::Int(i) => i.hash(state),
            Value::Float(f) => f.to_bits().hash(state),
            Value::String(s) => s.hash(state),
            Value::Bytes(b) => b.hash(state),
            Value::Timestamp(t) => t.hash(state),
            Value::Array(a) => a.hash(state),
            Value::Map(m) => m.hash(state),
        }
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::String(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::String(v)
    }
}
impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Self {
        Value::Array(v)
    }
}
impl From<Map> for Value {
    fn from(v: Map) -> Self {
        Value::Map(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_and_float_are_structurally_different_but_loosely_equal() {
        assert_ne!(Value::Int(1), Value::Float(1.0));
        assert!(Value::Int(1).loosely_equals(&Value::Float(1.0)));
        assert!(!Value::Int(1).loosely_equals(&Value::Float(1.5)));
        assert!(!Value::Int(i64::MAX).loosely_equals(&Value::Float(9.3e18)));
    }

    #[test]
    fn atom_matches_array_membership() {
        let tags = Value::Array(vec!["a".into(), "b".into()]);
        assert!(tags.atom_matches(&"a".into()));
        assert!(!tags.atom_matches(&"c".into()));
        assert!(tags.atom_matches(&Value::Array(vec!["a".into(), "b".into()])));
        assert!(!Value::String("a".into()).atom_matches(&Value::Array(vec!["a".into()])));
    }

    #[test]
    fn nan_equals_itself_structurally() {
        assert_eq!(Value::Float(f64::NAN), Value::Float(f64::NAN));
    }

    #[test]
    fn order_is_by_type_then_value() {
        let mut v = vec![
            Value::String("b".into()),
            Value::Int(3),
            Value::Null,
            Value::Int(-1),
        ];
        v.sort();
        assert_eq!(
            v,
            vec![
                Value::Null,
                Value::Int(-1),
                Value::Int(3),
                Value::String("b".into())
            ]
        );
    }
}
