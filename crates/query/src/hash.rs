//! The 64-bit hash of a BSON value that mongod's hashed indexes and hashed shard keys use
//! (`BSONElementHasher::hash64`, which `convertShardKeyToHashed()` returns): an MD5 over the
//! seed (int32, little-endian; 0 for indexes and shard keys), then the value's canonical form,
//! and the first 8 bytes of the digest read as a little-endian int64.
//!
//! The canonical form of one value is its canonical type (int32 LE: MinKey −1, undefined 0,
//! null 5, numbers 10, strings and symbols 15, objects 20, arrays 25, binary 30, ObjectId 35,
//! bool 40, date 45, timestamp 47, regex 50, DBPointer 55, code 60, code with scope 65,
//! MaxKey 127), then:
//! - numbers: the value as an int64 (LE), truncated toward zero and saturated; NaN is 0 — so
//!   `42`, `42.9` and `NumberLong(42)` hash alike (mongod's `safeNumberLong`);
//! - objects and arrays: every element in order as its canonical type, its field name with the
//!   terminating NUL (array elements are named "0", "1", …) and its canonical value, then the
//!   end-of-object marker as type 0 alone (no name, no value);
//! - everything else: the element's value bytes exactly as BSON stores them (strings with their
//!   int32 length and NUL, binary with length and subtype, ObjectId's 12 bytes, …).
//!
//! Test vectors: mongod's `hasher_test.cpp` (the tests below).
use bson::{spec::ElementType, Bson, Document};
use md5::{Digest, Md5};

/// mongod's hash of one value with the default seed (0), as a hashed index stores it.
pub fn hash_value(v: &Bson) -> i64 {
    hash_with_seed(v, 0)
}

pub fn hash_with_seed(v: &Bson, seed: i32) -> i64 {
    let mut h = Md5::new();
    h.update(seed.to_le_bytes());
    add_value(&mut h, v, None);
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}

/// mongod's canonical type as hashing sees it: the comparison bracket, except that MinKey is
/// −1 and undefined 0 there.
fn canonical_type(v: &Bson) -> i32 {
    match v {
        Bson::MinKey => -1,
        Bson::Undefined => 0,
        other => crate::compare::canonical_type_rank(other) as i32,
    }
}

/// `safeNumberLong`: truncation toward zero, saturating at the int64 range, NaN as 0.
fn safe_number_long(v: &Bson) -> i64 {
    let f = match v {
        Bson::Int32(i) => return *i as i64,
        Bson::Int64(i) => return *i,
        Bson::Double(d) => *d,
        Bson::Decimal128(d) => crate::compare::decimal_to_f64(d),
        _ => unreachable!("not a number"),
    };
    // `as` saturates and maps NaN to 0, which is exactly safeNumberLong.
    f as i64
}

fn add_value(h: &mut Md5, v: &Bson, field_name: Option<&str>) {
    h.update(canonical_type(v).to_le_bytes());
    if let Some(name) = field_name {
        h.update(name.as_bytes());
        h.update([0u8]);
    }
    match v {
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => {
            h.update(safe_number_long(v).to_le_bytes())
        }
        Bson::Document(d) => add_elements(h, d.iter().map(|(k, v)| (k.as_str(), v))),
        Bson::Array(a) => {
            let names: Vec<String> = (0..a.len()).map(|i| i.to_string()).collect();
            add_elements(h, names.iter().map(String::as_str).zip(a.iter()))
        }
        other => h.update(value_bytes(other)),
    }
}

fn add_elements<'a>(h: &mut Md5, elements: impl Iterator<Item = (&'a str, &'a Bson)>) {
    for (name, v) in elements {
        add_value(h, v, Some(name));
    }
    // The end-of-object element: canonical type 0; mongod gives it no name bytes and no value.
    h.update(0i32.to_le_bytes());
}

/// The value part of a BSON element, as stored on the wire.
fn value_bytes(v: &Bson) -> Vec<u8> {
    // Serialize `{"": v}` and cut the value out: type byte, empty name + NUL, then the value,
    // then the document's terminating NUL.
    let mut d = Document::new();
    d.insert("", v.clone());
    let bytes = bson::to_vec(&d).expect("a single value always serializes");
    debug_assert_eq!(bytes[4], v.element_type() as u8);
    let start = 4 + 1 + 1;
    bytes[start..bytes.len() - 1].to_vec()
}

/// The element type whose values a hashed index refuses (mongod: 16766).
pub fn is_unhashable(v: &Bson) -> bool {
    v.element_type() == ElementType::Array
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, spec::BinarySubtype, Binary, Regex};

    // Values from mongod's src/mongo/db/hasher_test.cpp.
    #[test]
    fn numbers_hash_as_truncated_int64() {
        for v in [Bson::Int32(42), Bson::Double(42.123), Bson::Int64(42)] {
            assert_eq!(hash_value(&v), -944302157085130861);
        }
        for v in [
            Bson::Int32(0),
            Bson::Double(0.456),
            Bson::Int64(0),
            Bson::Double(f64::NAN),
        ] {
            assert_eq!(hash_value(&v), 4854801880128277513);
        }
        assert_eq!(hash_value(&Bson::Int32(1)), 5902408780260971510);
        assert_eq!(hash_value(&Bson::Double(1.987)), 5902408780260971510);
        assert_eq!(hash_value(&Bson::Int32(-1)), 1140205862565771219);
        assert_eq!(hash_value(&Bson::Double(-1.789)), 1140205862565771219);
        assert_eq!(hash_value(&Bson::Int32(i32::MIN)), 6165898260261354870);
        assert_eq!(hash_value(&Bson::Int32(i32::MAX)), 1143184177162245883);
        assert_eq!(hash_value(&Bson::Double(f64::MAX)), 921523596458303250);
        assert_eq!(hash_value(&Bson::Int64(i64::MAX)), 921523596458303250);
        assert_eq!(hash_value(&Bson::Double(-f64::MAX)), 4532067210535695462);
        assert_eq!(hash_value(&Bson::Int64(i64::MIN)), 4532067210535695462);
    }

    #[test]
    fn other_types_match_mongod() {
        assert_eq!(hash_value(&Bson::MinKey), 7961148599568647290);
        assert_eq!(hash_value(&Bson::MaxKey), 5504842513779440750);
        assert_eq!(hash_value(&Bson::Undefined), 40158834000849533);
        assert_eq!(hash_value(&Bson::String("abc".into())), 8478485326885698097);
        assert_eq!(hash_value(&Bson::Symbol("abc".into())), 8478485326885698097);
        assert_eq!(
            hash_value(&Bson::String(String::new())),
            2049396243249673340
        );
        assert_eq!(
            hash_value(&Bson::Document(doc! {"a": "abc", "b": 123i64})),
            4771603801758380216
        );
        assert_eq!(hash_value(&Bson::Document(doc! {})), 7980500913326740417);
        assert_eq!(
            hash_value(&Bson::Array(vec!["bar".into(), "baz".into(), "qux".into()])),
            -2938911267422831539
        );
        assert_eq!(hash_value(&Bson::Array(vec![])), 8849948234993459283);
        let bin = |subtype, bytes: &[u8]| {
            Bson::Binary(Binary {
                subtype,
                bytes: bytes.to_vec(),
            })
        };
        let six = [0u8, 1, 2, 3, 4, 6];
        assert_eq!(
            hash_value(&bin(BinarySubtype::Generic, &six)),
            7252465090394235301
        );
        assert_eq!(
            hash_value(&bin(BinarySubtype::UserDefined(0x80), &six)),
            5736670452907618262
        );
        let uuid: Vec<u8> = (0..16).collect();
        assert_eq!(
            hash_value(&bin(BinarySubtype::Uuid, &uuid)),
            6084661258071355978
        );
        let oid = |s: &str| Bson::ObjectId(ObjectId::parse_str(s).unwrap());
        assert_eq!(
            hash_value(&oid("010203040506070809101112")),
            -5588663249627035708
        );
        assert_eq!(
            hash_value(&oid("000000000000000000000000")),
            -4293118519463489418
        );
        assert_eq!(hash_value(&Bson::Boolean(true)), 6405873908747105701);
        assert_eq!(hash_value(&Bson::Boolean(false)), 6289544573401934092);
        assert_eq!(
            hash_value(&Bson::DateTime(bson::DateTime::from_millis(
                0x5566778811223344
            ))),
            4476222765095560467
        );
        assert_eq!(
            hash_value(&Bson::DateTime(bson::DateTime::from_millis(0))),
            -1178696894582842035
        );
        let re = |p: &str, o: &str| {
            Bson::RegularExpression(Regex {
                pattern: p.into(),
                options: o.into(),
            })
        };
        assert_eq!(hash_value(&re("mongodb", "")), -7275792090268217043);
        assert_eq!(hash_value(&re(".*", "i")), 7095855029187981886);
        assert_eq!(
            hash_value(&Bson::JavaScriptCode("func f() { return 1; }".into())),
            6861638109178014270
        );
    }

    /// By hand from the definition: MD5(seed 0 ‖ type 10 ‖ int64 7), first 8 bytes LE.
    #[test]
    fn hand_computed_from_the_definition() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0i32.to_le_bytes());
        bytes.extend_from_slice(&10i32.to_le_bytes());
        bytes.extend_from_slice(&7i64.to_le_bytes());
        let d = Md5::digest(&bytes);
        let want = i64::from_le_bytes(d[..8].try_into().unwrap());
        assert_eq!(hash_value(&Bson::Int32(7)), want);
        // A string: type 15, int32 length including the NUL, the bytes, the NUL.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0i32.to_le_bytes());
        bytes.extend_from_slice(&15i32.to_le_bytes());
        bytes.extend_from_slice(&4i32.to_le_bytes());
        bytes.extend_from_slice(b"abc\0");
        let d = Md5::digest(&bytes);
        assert_eq!(
            hash_value(&Bson::String("abc".into())),
            i64::from_le_bytes(d[..8].try_into().unwrap())
        );
    }

    proptest::proptest! {
        /// Numbers that compare equal hash alike whatever their type, and a double hashes as
        /// its truncation toward zero (`safeNumberLong`), so a hashed index finds `2` for
        /// `2.0` and `NumberLong(2)`.
        #[test]
        fn equal_numbers_hash_alike(n in -(1i64 << 40)..(1i64 << 40), frac in 0.0f64..1.0) {
            let d = n as f64;
            proptest::prop_assert_eq!(hash_value(&Bson::Int64(n)), hash_value(&Bson::Double(d)));
            if let Ok(i) = i32::try_from(n) {
                proptest::prop_assert_eq!(hash_value(&Bson::Int32(i)), hash_value(&Bson::Int64(n)));
            }
            let same_truncation = if n >= 0 { d + frac } else { d - frac };
            // Near 2^40 a double's step is 2^-12: a fraction just below 1 rounds the sum up to
            // the next integer, whose truncation is no longer `n`.
            proptest::prop_assume!(same_truncation.trunc() == d);
            proptest::prop_assert_eq!(
                hash_value(&Bson::Double(same_truncation)),
                hash_value(&Bson::Int64(n))
            );
        }
    }
}
