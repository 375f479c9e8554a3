//! Order-preserving byte encoding of BSON values ("KeyString"): for any two values,
//! `encode(a) < encode(b)` byte-wise exactly when `a < b` in MongoDB's comparison order
//! (type bracket first, then value; numbers of every type compare by value, so
//! `1 == 1.0 == NumberLong(1)` encode identically). An index table is therefore a B+tree ordered
//! the way the query language orders values, and an index range is a byte range.
//!
//! Layout of one value: a type byte (`canonical_type_rank + 2`, so 1..=129), then a payload that
//! is prefix-free (no encoding is a proper prefix of another), which makes concatenations of
//! encodings (compound keys) compare field by field and lets a descending field be encoded by
//! inverting every byte of its component.
//!
//! Payloads:
//! - numbers: a class byte (0 NaN, 1 −∞, 2 negative, 3 zero, 4 positive, 5 +∞); finite non-zero
//!   values as `m × 2^e` with `1 ≤ m < 2`: the exponent `e + 1100` as u16 big-endian, then the
//!   fraction bits of `m` left-aligned in a u64 — exact for every double and every int64
//!   (an int64 needs at most 63 fraction bits), so 2^53 + 1 (int64) sorts above 2^53 (double).
//!   Negative numbers invert those 10 bytes. Decimal128 is converted to the nearest double
//!   (documented approximation).
//! - strings, symbols, code: bytes with 0x00 escaped as 0x00 0xFF, terminated by 0x00 0x00.
//! - documents: per element its type byte, escaped field name, payload; then 0x00 (type bytes are
//!   ≥ 1, so a shorter document sorts first) — MongoDB compares type, then name, then value.
//! - arrays: per element type byte and payload; then 0x00.
//! - binary: u32 length, subtype, bytes (MongoDB orders by length, subtype, then bytes).
//! - ObjectId: 12 bytes; bool: 0/1; date: i64 with the sign bit flipped; timestamp: time, inc.
//! - regex: escaped pattern, escaped flags; code with scope: escaped code, scope document.

use bson::{Bson, Document};
use query::compare::canonical_type_rank;

/// The type byte of a value: its canonical type rank shifted to 1..=129.
pub fn type_byte(v: &Bson) -> u8 {
    (canonical_type_rank(v) as i32 + 2).clamp(1, 255) as u8
}

/// The type byte shared by all numbers.
pub fn number_type_byte() -> u8 {
    type_byte(&Bson::Int32(0))
}

/// Appends the encoding of one value in ascending order.
pub fn encode_value(out: &mut Vec<u8>, v: &Bson) {
    out.push(type_byte(v));
    encode_payload(out, v);
}

/// The encoding of one value; `descending` inverts it.
pub fn encode_one(v: &Bson, descending: bool) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(&mut out, v);
    if descending {
        invert(&mut out);
    }
    out
}

/// Encodes a compound key: one component per field, inverted for descending fields.
pub fn encode_key(values: &[&Bson], descending: &[bool]) -> Vec<u8> {
    let mut out = Vec::new();
    for (v, &desc) in values.iter().zip(descending) {
        let start = out.len();
        encode_value(&mut out, v);
        if desc {
            invert(&mut out[start..]);
        }
    }
    out
}

pub fn invert(bytes: &mut [u8]) {
    for b in bytes {
        *b = !*b;
    }
}

/// The smallest byte string greater than every string that starts with `p`, or `None` when
/// there is none (`p` is all 0xFF or empty).
pub fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut v = p.to_vec();
    while let Some(&last) = v.last() {
        if last == 0xFF {
            v.pop();
        } else {
            *v.last_mut().unwrap() = last + 1;
            return Some(v);
        }
    }
    None
}

fn encode_payload(out: &mut Vec<u8>, v: &Bson) {
    match v {
        Bson::Double(d) => encode_f64(out, *d),
        Bson::Int32(i) => encode_i64(out, *i as i64),
        Bson::Int64(i) => encode_i64(out, *i),
        Bson::Decimal128(d) => {
            let f = d.to_string().parse::<f64>().unwrap_or(f64::NAN);
            encode_f64(out, f)
        }
        // Strings and symbols under the collation in effect (the index's, see
        // query::collation): their sort keys, which compare as the strings do.
        Bson::String(s) | Bson::Symbol(s) => {
            query::collation::with_key_bytes(s, |b| encode_bytes_escaped(out, b))
        }
        Bson::JavaScriptCode(s) => encode_str(out, s),
        Bson::Document(d) => encode_doc(out, d),
        Bson::Array(a) => {
            for e in a {
                encode_value(out, e);
            }
            out.push(0);
        }
        Bson::Binary(b) => {
            out.extend_from_slice(&(b.bytes.len() as u32).to_be_bytes());
            out.push(u8::from(b.subtype));
            out.extend_from_slice(&b.bytes);
        }
        Bson::ObjectId(o) => out.extend_from_slice(&o.bytes()),
        Bson::Boolean(b) => out.push(*b as u8),
        Bson::DateTime(d) => {
            out.extend_from_slice(&((d.timestamp_millis() as u64) ^ (1 << 63)).to_be_bytes())
        }
        Bson::Timestamp(t) => {
            out.extend_from_slice(&t.time.to_be_bytes());
            out.extend_from_slice(&t.increment.to_be_bytes());
        }
        Bson::RegularExpression(r) => {
            encode_str(out, &r.pattern);
            encode_str(out, &r.options);
        }
        Bson::JavaScriptCodeWithScope(c) => {
            encode_str(out, &c.code);
            encode_doc(out, &c.scope);
        }
        Bson::DbPointer(_) => {
            // Fields are private in the bson crate: order by the element's BSON bytes.
            let mut d = Document::new();
            d.insert("p", v.clone());
            let mut raw = Vec::new();
            let _ = d.to_writer(&mut raw);
            encode_bytes_escaped(out, &raw);
        }
        Bson::Null | Bson::Undefined | Bson::MinKey | Bson::MaxKey => {}
    }
}

fn encode_doc(out: &mut Vec<u8>, d: &Document) {
    for (k, v) in d {
        out.push(type_byte(v));
        encode_str(out, k);
        encode_payload(out, v);
    }
    out.push(0);
}

fn encode_str(out: &mut Vec<u8>, s: &str) {
    encode_bytes_escaped(out, s.as_bytes())
}

fn encode_bytes_escaped(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

const EXP_BIAS: i32 = 1100;

fn encode_f64(out: &mut Vec<u8>, d: f64) {
    if d.is_nan() {
        out.push(0);
    } else if d == f64::NEG_INFINITY {
        out.push(1);
    } else if d == f64::INFINITY {
        out.push(5);
    } else if d == 0.0 {
        out.push(3);
    } else {
        let bits = d.abs().to_bits();
        let exp_bits = ((bits >> 52) & 0x7ff) as i32;
        let mant = bits & ((1u64 << 52) - 1);
        let (e, frac) = if exp_bits == 0 {
            // Subnormal: value = mant × 2^-1074.
            let lead = 63 - mant.leading_zeros() as i32;
            let frac = if lead == 0 { 0 } else { mant << (64 - lead) };
            (lead - 1074, frac)
        } else {
            (exp_bits - 1023, mant << 12)
        };
        push_magnitude(out, d < 0.0, e, frac);
    }
}

fn encode_i64(out: &mut Vec<u8>, i: i64) {
    if i == 0 {
        out.push(3);
        return;
    }
    let n = i.unsigned_abs();
    let lead = 63 - n.leading_zeros() as i32;
    let frac = if lead == 0 { 0 } else { n << (64 - lead) };
    push_magnitude(out, i < 0, lead, frac);
}

fn push_magnitude(out: &mut Vec<u8>, negative: bool, e: i32, frac: u64) {
    let mut b = [0u8; 10];
    b[..2].copy_from_slice(&((e + EXP_BIAS) as u16).to_be_bytes());
    b[2..].copy_from_slice(&frac.to_be_bytes());
    if negative {
        out.push(2);
        invert(&mut b);
    } else {
        out.push(4);
    }
    out.extend_from_slice(&b);
}

/// A readable rendering of a value for explain's index bounds (MongoDB's shape, roughly).
pub fn display_value(v: &Bson) -> String {
    match v {
        Bson::String(s) => format!("{s:?}"),
        Bson::Double(d) if d.is_infinite() => {
            if *d > 0.0 {
                "inf.0".into()
            } else {
                "-inf.0".into()
            }
        }
        Bson::MinKey => "MinKey".into(),
        Bson::MaxKey => "MaxKey".into(),
        other => other.to_string(),
    }
}

/// The smallest and largest representative of a type bracket, for explain output.
pub fn bracket_display(type_byte: u8, upper: bool) -> String {
    if type_byte == number_type_byte() {
        return if upper { "inf.0" } else { "-inf.0" }.into();
    }
    if type_byte == self::type_byte(&Bson::String(String::new())) {
        return if upper { "{}" } else { "\"\"" }.into();
    }
    if upper {
        "MaxKey".into()
    } else {
        "MinKey".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    fn ord(a: &Bson, b: &Bson) -> Ordering {
        encode_one(a, false).cmp(&encode_one(b, false))
    }

    #[test]
    fn numbers_compare_by_value_across_types() {
        assert_eq!(ord(&Bson::Int32(1), &Bson::Double(1.0)), Ordering::Equal);
        assert_eq!(ord(&Bson::Int64(1), &Bson::Double(1.0)), Ordering::Equal);
        assert_eq!(ord(&Bson::Double(-0.0), &Bson::Int32(0)), Ordering::Equal);
        let big = 1i64 << 53;
        assert_eq!(
            ord(&Bson::Int64(big + 1), &Bson::Double(big as f64)),
            Ordering::Greater
        );
        assert_eq!(
            ord(&Bson::Int64(big), &Bson::Double(big as f64)),
            Ordering::Equal
        );
        assert_eq!(
            ord(&Bson::Int64(i64::MAX), &Bson::Double(9.223372036854776e18)),
            Ordering::Less
        );
        assert_eq!(
            ord(&Bson::Int64(i64::MIN), &Bson::Double(-9.223372036854776e18)),
            Ordering::Equal
        );
        assert_eq!(
            ord(&Bson::Double(f64::NAN), &Bson::Double(f64::NEG_INFINITY)),
            Ordering::Less
        );
        assert_eq!(ord(&Bson::Double(-2.5), &Bson::Int32(-2)), Ordering::Less);
        assert_eq!(
            ord(&Bson::Double(5e-324), &Bson::Int32(0)),
            Ordering::Greater
        );
        assert_eq!(
            ord(&Bson::Double(5e-324), &Bson::Double(1e-323)),
            Ordering::Less
        );
    }

    #[test]
    fn brackets_and_strings() {
        assert_eq!(ord(&Bson::Null, &Bson::Int32(0)), Ordering::Less);
        assert_eq!(
            ord(&Bson::Int32(99), &Bson::String("".into())),
            Ordering::Less
        );
        assert_eq!(
            ord(&Bson::String("a".into()), &Bson::String("a\0".into())),
            Ordering::Less
        );
        assert_eq!(
            ord(&Bson::String("ab".into()), &Bson::String("b".into())),
            Ordering::Less
        );
        assert_eq!(ord(&Bson::MinKey, &Bson::Null), Ordering::Less);
        assert_eq!(ord(&Bson::MaxKey, &Bson::Boolean(true)), Ordering::Greater);
    }

    #[test]
    fn descending_inverts_and_successor() {
        let a = encode_one(&Bson::Int32(1), true);
        let b = encode_one(&Bson::Int32(2), true);
        assert!(a > b);
        assert_eq!(prefix_successor(&[1, 2, 0xFF]), Some(vec![1, 3]));
        assert_eq!(prefix_successor(&[0xFF]), None);
    }
}
