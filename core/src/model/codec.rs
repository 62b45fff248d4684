//! The on-disk form of an entity: a compact, canonical binary encoding.
//!
//! ```text
//! entity := FORMAT(1 byte) version(varint) id(value) count(varint) (name(str) value){count}
//! value  := 0 null | 1 false | 2 true | 3 int(zigzag varint) | 4 float(8 bytes LE, raw bits)
//!         | 5 string(str) | 6 bytes(len varint, bytes) | 7 timestamp(zigzag varint)
//!         | 8 array(count varint, value*) | 9 map(count varint, (name value)*)
//! str    := len(varint) UTF-8 bytes
//! ```
//!
//! The encoding is canonical: equal entities (by [`Value`]'s structural
//! equality, which compares floats bit for bit) have equal encodings and
//! different entities different ones, so a compare-and-set can compare bytes.
//! Map names are written in sorted order and the decoder insists on it.
//! The version comes first so a version filter can skip decoding the value.
//!
//! The embedded store keeps entities in this form; public so that adapters storing whole entities as bytes (the Cassandra adapter's `doc`
//! column) share this exact, canonical encoding.

use crate::model::{Map, Value, Version};

/// The format byte; bump it when the layout changes.
const FORMAT: u8 = 1;

/// The deepest nesting of arrays and maps the store accepts, on write and read.
pub(crate) const MAX_DEPTH: usize = 256;

const T_NULL: u8 = 0;
const T_FALSE: u8 = 1;
const T_TRUE: u8 = 2;
const T_INT: u8 = 3;
const T_FLOAT: u8 = 4;
const T_STRING: u8 = 5;
const T_BYTES: u8 = 6;
const T_TIMESTAMP: u8 = 7;
const T_ARRAY: u8 = 8;
const T_MAP: u8 = 9;

/// Why stored bytes could not be decoded (or a value could not be encoded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CodecError(pub(crate) &'static str);

/// Encodes an entity's id, version and value into `out` (cleared first).
///
/// # Errors
/// A value nested deeper than the store accepts.
pub fn encode_entity(
    id: &Value,
    version: Version,
    value: &Map,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    out.clear();
    out.push(FORMAT);
    put_varint(version, out);
    encode_value(id, 0, out)?;
    encode_map(value, 0, out)
}

/// Reads only the version of an encoded entity.
///
/// # Errors
/// Bytes that are not an encoded entity.
pub fn decode_version(bytes: &[u8]) -> Result<Version, CodecError> {
    let mut r = Reader { bytes, pos: 0 };
    r.header()
}

/// Decodes an encoded entity into (id, version, value).
///
/// # Errors
/// Bytes that are not an encoded entity.
pub fn decode_entity(bytes: &[u8]) -> Result<(Value, Version, Map), CodecError> {
    let mut r = Reader { bytes, pos: 0 };
    let version = r.header()?;
    let id = r.value(0)?;
    let value = r.map(0)?;
    if r.pos != bytes.len() {
        return Err(CodecError("trailing bytes after the entity"));
    }
    Ok((id, version, value))
}

/// Decodes an encoded entity into (id, version, value) keeping, of the value,
/// only the top-level properties for which `keep` holds: the others are
/// checked (the same errors as [`decode_entity`] for bytes that are not an
/// encoded entity) but not materialized. For readers that need a few
/// properties of large entities (a move or copy's index and safety check).
///
/// # Errors
/// Bytes that are not an encoded entity.
pub fn decode_entity_projected(
    bytes: &[u8],
    keep: impl Fn(&str) -> bool,
) -> Result<(Value, Version, Map), CodecError> {
    let mut r = Reader { bytes, pos: 0 };
    let version = r.header()?;
    let id = r.value(0)?;
    let n = r.len()?;
    let mut value = Map::new();
    let mut last: Option<&str> = None;
    for _ in 0..n {
        let name = r.name()?;
        if last.is_some_and(|l| l >= name) {
            return Err(CodecError("map names out of order"));
        }
        last = Some(name);
        if keep(name) {
            value.insert(name.to_owned(), r.value(0)?);
        } else {
            r.skip(0)?;
        }
    }
    if r.pos != bytes.len() {
        return Err(CodecError("trailing bytes after the entity"));
    }
    Ok((id, version, value))
}

/// Appends the encoding of one value (the `value` of the grammar above) to
/// `out`: for other compact records built of values (a move or copy's join
/// index summaries), read back with [`ValueReader`].
///
/// # Errors
/// A value nested deeper than the store accepts.
pub(crate) fn put_value(value: &Value, out: &mut Vec<u8>) -> Result<(), CodecError> {
    encode_value(value, 0, out)
}

/// Appends `v` as a varint (the grammar's `varint`), for [`ValueReader::u64`].
pub(crate) fn put_u64(v: u64, out: &mut Vec<u8>) {
    put_varint(v, out);
}

/// Reads back, in order, what [`put_value`], [`put_u64`] and plain bytes wrote.
pub(crate) struct ValueReader<'a>(Reader<'a>);

impl<'a> ValueReader<'a> {
    /// A reader at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> ValueReader<'a> {
        ValueReader(Reader { bytes, pos: 0 })
    }

    /// The next byte.
    pub(crate) fn byte(&mut self) -> Result<u8, CodecError> {
        self.0.byte()
    }

    /// The next varint.
    pub(crate) fn u64(&mut self) -> Result<u64, CodecError> {
        self.0.varint()
    }

    /// The next value.
    pub(crate) fn value(&mut self) -> Result<Value, CodecError> {
        self.0.value(0)
    }

    /// How many bytes were read.
    pub(crate) fn position(&self) -> usize {
        self.0.pos
    }

    /// Fails unless every byte was read.
    pub(crate) fn end(&self) -> Result<(), CodecError> {
        if self.0.pos == self.0.bytes.len() {
            Ok(())
        } else {
            Err(CodecError("trailing bytes after the record"))
        }
    }
}

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(i: i64) -> u64 {
    ((i << 1) ^ (i >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

fn put_str(s: &[u8], out: &mut Vec<u8>) {
    put_varint(s.len() as u64, out);
    out.extend_from_slice(s);
}

fn encode_map(map: &Map, depth: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
    put_varint(map.len() as u64, out);
    for (name, v) in map {
        put_str(name.as_bytes(), out);
        encode_value(v, depth, out)?;
    }
    Ok(())
}

fn encode_value(value: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
    match value {
        Value::Null => out.push(T_NULL),
        Value::Bool(false) => out.push(T_FALSE),
        Value::Bool(true) => out.push(T_TRUE),
        Value::Int(i) => {
            out.push(T_INT);
            put_varint(zigzag(*i), out);
        }
        Value::Float(f) => {
            out.push(T_FLOAT);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Value::String(s) => {
            out.push(T_STRING);
            put_str(s.as_bytes(), out);
        }
        Value::Bytes(b) => {
            out.push(T_BYTES);
            put_str(b, out);
        }
        Value::Timestamp(t) => {
            out.push(T_TIMESTAMP);
            put_varint(zigzag(*t), out);
        }
        Value::Array(items) => {
            if depth >= MAX_DEPTH {
                return Err(CodecError("value nested deeper than 256 arrays and maps"));
            }
            out.push(T_ARRAY);
            put_varint(items.len() as u64, out);
            for item in items {
                encode_value(item, depth + 1, out)?;
            }
        }
        Value::Map(map) => {
            if depth >= MAX_DEPTH {
                return Err(CodecError("value nested deeper than 256 arrays and maps"));
            }
            out.push(T_MAP);
            encode_map(map, depth + 1, out)?;
        }
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn header(&mut self) -> Result<Version, CodecError> {
        match self.byte()? {
            FORMAT => self.varint(),
            _ => Err(CodecError("unknown entity format")),
        }
    }

    fn byte(&mut self) -> Result<u8, CodecError> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or(CodecError("truncated entity"))?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(CodecError("length out of range"))?;
        let slice = self
            .bytes
            .get(self.pos..end)
            .ok_or(CodecError("truncated entity"))?;
        self.pos = end;
        Ok(slice)
    }

    fn varint(&mut self) -> Result<u64, CodecError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(CodecError("varint overflows 64 bits"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError("varint overflows 64 bits"))
    }

    /// A length or count; never more than the bytes left, so a corrupt count
    /// cannot make us allocate without bound.
    fn len(&mut self) -> Result<usize, CodecError> {
        let n = self.varint()?;
        let left = self.bytes.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n <= left => Ok(n),
            _ => Err(CodecError("length exceeds the stored bytes")),
        }
    }

    fn string(&mut self) -> Result<String, CodecError> {
        let n = self.len()?;
        let raw = self.take(n)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| CodecError("string is not UTF-8"))
    }

    /// A string (a property name, or a skipped value), UTF-8 checked, without allocating.
    fn name(&mut self) -> Result<&'a str, CodecError> {
        let n = self.len()?;
        let raw = self.take(n)?;
        std::str::from_utf8(raw).map_err(|_| CodecError("string is not UTF-8"))
    }

    /// Passes over one value with the checks of [`Reader::value`], building nothing.
    fn skip(&mut self, depth: usize) -> Result<(), CodecError> {
        match self.byte()? {
            T_NULL | T_FALSE | T_TRUE => {}
            T_INT | T_TIMESTAMP => {
                self.varint()?;
            }
            T_FLOAT => {
                self.take(8)?;
            }
            T_STRING => {
                self.name()?;
            }
            T_BYTES => {
                let n = self.len()?;
                self.take(n)?;
            }
            T_ARRAY => {
                if depth >= MAX_DEPTH {
                    return Err(CodecError("value nested too deep"));
                }
                let n = self.len()?;
                for _ in 0..n {
                    self.skip(depth + 1)?;
                }
            }
            T_MAP => {
                if depth >= MAX_DEPTH {
                    return Err(CodecError("value nested too deep"));
                }
                let n = self.len()?;
                let mut last: Option<&str> = None;
                for _ in 0..n {
                    let name = self.name()?;
                    if last.is_some_and(|l| l >= name) {
                        return Err(CodecError("map names out of order"));
                    }
                    last = Some(name);
                    self.skip(depth + 1)?;
                }
            }
            _ => return Err(CodecError("unknown value tag")),
        }
        Ok(())
    }

    fn map(&mut self, depth: usize) -> Result<Map, CodecError> {
        let n = self.len()?;
        let mut map = Map::new();
        for _ in 0..n {
            let name = self.string()?;
            let value = self.value(depth)?;
            if map.last_key_value().is_some_and(|(last, _)| *last >= name) {
                return Err(CodecError("map names out of order"));
            }
            map.insert(name, value);
        }
        Ok(map)
    }

    fn value(&mut self, depth: usize) -> Result<Value, CodecError> {
        Ok(match self.byte()? {
            T_NULL => Value::Null,
            T_FALSE => Value::Bool(false),
            T_TRUE => Value::Bool(true),
            T_INT => Value::Int(unzigzag(self.varint()?)),
            T_FLOAT => {
                let raw = self.take(8)?;
                let mut bits = [0u8; 8];
                bits.copy_from_slice(raw);
                Value::Float(f64::from_bits(u64::from_le_bytes(bits)))
            }
            T_STRING => Value::String(self.string()?),
            T_BYTES => {
                let n = self.len()?;
                Value::Bytes(self.take(n)?.to_vec())
            }
            T_TIMESTAMP => Value::Timestamp(unzigzag(self.varint()?)),
            T_ARRAY => {
                if depth >= MAX_DEPTH {
                    return Err(CodecError("value nested too deep"));
                }
                let n = self.len()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Value::Array(items)
            }
            T_MAP => {
                if depth >= MAX_DEPTH {
                    return Err(CodecError("value nested too deep"));
                }
                Value::Map(self.map(depth + 1)?)
            }
            _ => return Err(CodecError("unknown value tag")),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::model::arb::{arb_id, arb_map};
    use proptest::prelude::*;

    fn enc(id: &Value, version: Version, value: &Map) -> Vec<u8> {
        let mut out = Vec::new();
        encode_entity(id, version, value, &mut out).unwrap();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn round_trips(id in arb_id(), version in any::<u64>(), value in arb_map()) {
            let bytes = enc(&id, version, &value);
            let (id2, version2, value2) = decode_entity(&bytes).unwrap();
            prop_assert_eq!(&id2, &id);
            prop_assert_eq!(version2, version);
            prop_assert_eq!(&value2, &value);
            prop_assert_eq!(decode_version(&bytes).unwrap(), version);
            // Canonical: re-encoding gives the same bytes.
            prop_assert_eq!(enc(&id2, version2, &value2), bytes);
        }

        #[test]
        fn equal_iff_bytes_equal(a in arb_map(), b in arb_map()) {
            let id = Value::Int(1);
            prop_assert_eq!(a == b, enc(&id, 0, &a) == enc(&id, 0, &b));
        }

        #[test]
        fn corrupt_bytes_never_panic(id in arb_id(), value in arb_map(), cut in any::<prop::sample::Index>(), flip in any::<u8>()) {
            let mut bytes = enc(&id, 3, &value);
            let i = cut.index(bytes.len());
            bytes[i] ^= flip;
            let _ = decode_entity(&bytes);
            let _ = decode_entity(&bytes[..i]);
        }
    }

    proptest! {
        #[test]
        fn projection_keeps_exactly_the_named_properties(
            id in arb_id(),
            value in arb_map(),
            pick in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        ) {
            let bytes = enc(&id, 7, &value);
            let names: Vec<&String> = value.keys().collect();
            let wanted: Vec<String> = if names.is_empty() {
                vec!["absent".to_owned()]
            } else {
                pick.iter().map(|i| i.get(&names).to_string()).collect()
            };
            let (pid, pversion, projected) =
                decode_entity_projected(&bytes, |n| wanted.iter().any(|w| w == n)).unwrap();
            let expected: Map = value
                .iter()
                .filter(|(k, _)| wanted.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            prop_assert_eq!(pid, id);
            prop_assert_eq!(pversion, 7);
            prop_assert_eq!(projected, expected);
        }

        #[test]
        fn projection_rejects_what_decoding_rejects(id in arb_id(), value in arb_map(), cut in any::<prop::sample::Index>(), flip in any::<u8>()) {
            let mut bytes = enc(&id, 3, &value);
            let at = cut.index(bytes.len());
            bytes[at] ^= flip;
            let whole = decode_entity(&bytes);
            let nothing = decode_entity_projected(&bytes, |_| false);
            let everything = decode_entity_projected(&bytes, |_| true);
            // The same bytes are accepted (messages may differ: the order of names is checked first).
            prop_assert_eq!(whole.is_ok(), nothing.is_ok());
            prop_assert_eq!(whole.ok(), everything.ok());
        }
    }

    #[test]
    fn float_bits_survive() {
        let weird_nan = f64::from_bits(0x7ff8_dead_beef_0001);
        let mut m = Map::new();
        m.insert("nan".into(), Value::Float(weird_nan));
        m.insert("negzero".into(), Value::Float(-0.0));
        let (_, _, back) = decode_entity(&enc(&Value::Int(1), 0, &m)).unwrap();
        let Some(Value::Float(f)) = back.get("nan") else {
            panic!()
        };
        assert_eq!(f.to_bits(), weird_nan.to_bits());
        let Some(Value::Float(f)) = back.get("negzero") else {
            panic!()
        };
        assert_eq!(f.to_bits(), (-0.0f64).to_bits());
    }

    #[test]
    fn extremes_round_trip() {
        let mut m = Map::new();
        for (i, v) in [i64::MIN, i64::MAX, 0, -1].into_iter().enumerate() {
            m.insert(format!("i{i}"), Value::Int(v));
            m.insert(format!("t{i}"), Value::Timestamp(v));
        }
        let bytes = enc(&Value::String(String::new()), u64::MAX, &m);
        assert_eq!(
            decode_entity(&bytes).unwrap(),
            (Value::String(String::new()), u64::MAX, m)
        );
    }

    #[test]
    fn depth_is_limited_both_ways() {
        let mut deep = Value::Null;
        for _ in 0..MAX_DEPTH {
            deep = Value::Array(vec![deep]);
        }
        let mut m = Map::new();
        m.insert("d".into(), deep.clone());
        let bytes = enc(&Value::Int(1), 0, &m);
        assert_eq!(decode_entity(&bytes).unwrap().2, m);
        m.insert("d".into(), Value::Array(vec![deep]));
        let mut out = Vec::new();
        assert!(encode_entity(&Value::Int(1), 0, &m, &mut out).is_err());
    }

    #[test]
    fn out_of_order_names_are_corrupt() {
        // {"b": null, "a": null} written by hand.
        let bytes = [FORMAT, 0, T_INT, 2, 2, 1, b'b', T_NULL, 1, b'a', T_NULL];
        assert!(decode_entity(&bytes).is_err());
        let ok = [FORMAT, 0, T_INT, 2, 2, 1, b'a', T_NULL, 1, b'b', T_NULL];
        assert!(decode_entity(&ok).is_ok());
    }
}
