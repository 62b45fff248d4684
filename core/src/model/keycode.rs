//! An order-preserving binary encoding of values and keys.
//!
//! `encode(a) < encode(b)` (bytewise) exactly when `a < b` (by [`Value`]'s
//! `Ord`), and no encoding is a prefix of another. Stores that keep entities in
//! a sorted byte-keyed table (the embedded store) use it so that a scan visits
//! ids in order and a cursor is simply the last encoded key.

use super::{Key, Value};

const T_NULL: u8 = 0x01;
const T_BOOL: u8 = 0x02;
const T_INT: u8 = 0x03;
const T_FLOAT: u8 = 0x04;
const T_STRING: u8 = 0x05;
const T_BYTES: u8 = 0x06;
const T_TIMESTAMP: u8 = 0x07;
const T_ARRAY: u8 = 0x08;
const T_MAP: u8 = 0x09;
const END: u8 = 0x00;
const MORE: u8 = 0x01;

/// Appends the order-preserving encoding of `value` to `out`.
pub fn encode_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.push(T_NULL),
        Value::Bool(b) => {
            out.push(T_BOOL);
            out.push(u8::from(*b));
        }
        Value::Int(i) => {
            out.push(T_INT);
            out.extend_from_slice(&((*i as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Float(f) => {
            out.push(T_FLOAT);
            let bits = f.to_bits();
            let ordered = if bits >> 63 == 1 {
                !bits
            } else {
                bits ^ (1 << 63)
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        Value::String(s) => {
            out.push(T_STRING);
            encode_bytes(s.as_bytes(), out);
        }
        Value::Bytes(b) => {
            out.push(T_BYTES);
            encode_bytes(b, out);
        }
        Value::Timestamp(t) => {
            out.push(T_TIMESTAMP);
            out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Array(items) => {
            out.push(T_ARRAY);
            for item in items {
                encode_value(item, out);
            }
            out.push(END);
        }
        Value::Map(map) => {
            out.push(T_MAP);
            for (k, v) in map {
                out.push(MORE);
                encode_bytes(k.as_bytes(), out);
                encode_value(v, out);
            }
            out.push(END);
        }
    }
}

/// Escapes `0x00` as `0x00 0xFF` and terminates with `0x00 0x00`: order-preserving and prefix-free.
fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.push(0);
    out.push(0);
}

/// The encoding of a whole key: the kind, then the id. Keys of one kind are contiguous.
pub fn encode_key(key: &Key) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.kind.len() + 16);
    encode_bytes(key.kind.as_bytes(), &mut out);
    encode_value(&key.id, &mut out);
    out
}

/// The encoding of a kind alone: a prefix of every key of that kind.
pub fn encode_kind_prefix(kind: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(kind.len() + 2);
    encode_bytes(kind.as_bytes(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::arb::arb_value;
    use proptest::prelude::*;

    fn enc(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        encode_value(v, &mut out);
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]
        #[test]
        fn encoding_preserves_order(a in arb_value(), b in arb_value()) {
            prop_assert_eq!(enc(&a).cmp(&enc(&b)), a.cmp(&b));
        }

        #[test]
        fn encoding_preserves_order_inside_arrays(a in arb_value(), b in arb_value(), c in arb_value()) {
            let x = Value::Array(vec![a.clone(), c.clone()]);
            let y = Value::Array(vec![b.clone()]);
            prop_assert_eq!(enc(&x).cmp(&enc(&y)), x.cmp(&y));
        }
    }

    #[test]
    fn empty_map_sorts_before_map_with_empty_key_inside_arrays() {
        let empty = Value::Map(Default::default());
        let mut m = crate::model::Map::new();
        m.insert(String::new(), Value::Null);
        let x = Value::Array(vec![empty, Value::Int(9)]);
        let y = Value::Array(vec![Value::Map(m)]);
        assert!(x < y);
        assert!(enc(&x) < enc(&y));
    }
}
