//! MongoDB's BSON comparison order.
//!
//! Values are first ordered by their *canonical type bracket* (mongod's `canonicalizeBSONType`):
//! MinKey < Undefined < Null < numbers < String/Symbol < Object < Array < BinData < ObjectId <
//! Bool < Date < Timestamp < Regex < DBPointer < JavaScript < JavaScript-with-scope < MaxKey.
//! Within a bracket values compare as mongod does (numbers by value across int32/int64/double/
//! decimal with NaN lowest, strings by bytes, documents element by element, …).
//!
//! Undefined has its own bracket just below Null, as in mongod (and as an empty array sorts,
//! "less than null or missing").

use std::cmp::Ordering;

use bson::{Bson, Document};

/// The canonical type bracket of a value (mongod's canonical type, shifted so MinKey is 0).
/// Values of different brackets compare by this number; numbers of all widths share one bracket,
/// as do String and Symbol.
pub fn canonical_type_rank(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 0,
        Bson::Undefined => 1,
        Bson::Null => 5,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 10,
        Bson::String(_) | Bson::Symbol(_) => 15,
        Bson::Document(_) => 20,
        Bson::Array(_) => 25,
        Bson::Binary(_) => 30,
        Bson::ObjectId(_) => 35,
        Bson::Boolean(_) => 40,
        Bson::DateTime(_) => 45,
        Bson::Timestamp(_) => 47,
        Bson::RegularExpression(_) => 50,
        Bson::DbPointer(_) => 55,
        Bson::JavaScriptCode(_) => 60,
        Bson::JavaScriptCodeWithScope(_) => 65,
        Bson::MaxKey => 127,
    }
}

/// A number widened for comparison and arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    I32(i32),
    I64(i64),
    F64(f64),
    /// Decimal128, carried as its nearest double (arithmetic and comparison on decimals are
    /// approximate: the bson crate has no decimal arithmetic).
    Dec(f64),
}

impl Num {
    pub fn of(v: &Bson) -> Option<Num> {
        match v {
            Bson::Int32(i) => Some(Num::I32(*i)),
            Bson::Int64(i) => Some(Num::I64(*i)),
            Bson::Double(f) => Some(Num::F64(*f)),
            Bson::Decimal128(d) => Some(Num::Dec(decimal_to_f64(d))),
            _ => None,
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Num::I32(i) => i as f64,
            Num::I64(i) => i as f64,
            Num::F64(f) | Num::Dec(f) => f,
        }
    }

    pub fn is_nan(self) -> bool {
        matches!(self, Num::F64(f) | Num::Dec(f) if f.is_nan())
    }

    /// Integral value if it is an integer type, or a double/decimal holding a whole number in
    /// i64 range.
    pub fn as_i64_exact(self) -> Option<i64> {
        match self {
            Num::I32(i) => Some(i as i64),
            Num::I64(i) => Some(i),
            Num::F64(f) | Num::Dec(f) => {
                if f.fract() == 0.0 && (-9.223372036854776e18..9.223372036854776e18).contains(&f) {
                    Some(f as i64)
                } else {
                    None
                }
            }
        }
    }

    pub fn to_bson(self) -> Bson {
        match self {
            Num::I32(i) => Bson::Int32(i),
            Num::I64(i) => Bson::Int64(i),
            Num::F64(f) => Bson::Double(f),
            Num::Dec(f) => Bson::Decimal128(f64_to_decimal(f)),
        }
    }
}

/// Decimal128 → nearest double (via its string form).
pub fn decimal_to_f64(d: &bson::Decimal128) -> f64 {
    let s = d.to_string();
    match s.as_str() {
        "NaN" | "-NaN" => f64::NAN,
        "Infinity" | "+Infinity" => f64::INFINITY,
        "-Infinity" => f64::NEG_INFINITY,
        _ => s.parse::<f64>().unwrap_or(f64::NAN),
    }
}

/// double → Decimal128 (via the shortest round-trip string of the double).
pub fn f64_to_decimal(f: f64) -> bson::Decimal128 {
    let s = if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        if f > 0.0 {
            "Infinity".to_string()
        } else {
            "-Infinity".to_string()
        }
    } else {
        let s = format!("{f:e}");
        // Rust writes `1.5e3`; Decimal128's parser wants `1.5E3`.
        s.replace('e', "E")
    };
    s.parse()
        .unwrap_or_else(|_| "0".parse().expect("zero parses"))
}

fn cmp_f64(a: f64, b: f64) -> Ordering {
    // NaN is equal to NaN and lower than every other number.
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

fn cmp_i64_f64(i: i64, f: f64) -> Ordering {
    if f.is_nan() {
        return Ordering::Greater;
    }
    if f >= 9.223372036854776e18 {
        return Ordering::Less;
    }
    if f < -9.223372036854776e18 {
        return Ordering::Greater;
    }
    let t = f.trunc();
    let ti = t as i64;
    match i.cmp(&ti) {
        Ordering::Equal => {
            let frac = f - t;
            if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

/// Compares two numbers by value (exactly between integers and doubles).
pub fn compare_numbers(a: Num, b: Num) -> Ordering {
    use Num::*;
    let ai = match a {
        I32(i) => Some(i as i64),
        I64(i) => Some(i),
        _ => None,
    };
    let bi = match b {
        I32(i) => Some(i as i64),
        I64(i) => Some(i),
        _ => None,
    };
    match (ai, bi) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(x), None) => cmp_i64_f64(x, b.as_f64()),
        (None, Some(y)) => cmp_i64_f64(y, a.as_f64()).reverse(),
        (None, None) => cmp_f64(a.as_f64(), b.as_f64()),
    }
}

fn string_of(v: &Bson) -> &str {
    match v {
        Bson::String(s) | Bson::Symbol(s) => s,
        _ => "",
    }
}

/// Compares two documents as mongod does: element by element (canonical type, then field name,
/// then value); a prefix is less.
pub fn compare_documents(a: &Document, b: &Document) -> Ordering {
    let mut ia = a.iter();
    let mut ib = b.iter();
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let o = canonical_type_rank(va)
                    .cmp(&canonical_type_rank(vb))
                    .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
                    .then_with(|| compare_bson(va, vb));
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

fn compare_arrays(a: &[Bson], b: &[Bson]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let o = compare_bson(x, y);
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// MongoDB's total order on BSON values (simple binary collation).
pub fn compare_bson(a: &Bson, b: &Bson) -> Ordering {
    let (ra, rb) = (canonical_type_rank(a), canonical_type_rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        // Under the collation in effect (bytes when there is none): crate::collation.
        (Bson::String(_) | Bson::Symbol(_), _) => {
            crate::collation::compare_strings(string_of(a), string_of(b))
        }
        (Bson::Document(x), Bson::Document(y)) => compare_documents(x, y),
        (Bson::Array(x), Bson::Array(y)) => compare_arrays(x, y),
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .as_bytes()
            .cmp(y.pattern.as_bytes())
            .then_with(|| x.options.as_bytes().cmp(y.options.as_bytes())),
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => x
            .code
            .as_bytes()
            .cmp(y.code.as_bytes())
            .then_with(|| compare_documents(&x.scope, &y.scope)),
        _ => match (Num::of(a), Num::of(b)) {
            (Some(x), Some(y)) => compare_numbers(x, y),
            // MinKey, MaxKey, Null, Undefined, DBPointer: equal within their bracket.
            _ => Ordering::Equal,
        },
    }
}

/// MongoDB equality: equal under [`compare_bson`] (so `1 == 1.0 == NumberLong(1)`, and
/// documents compare field names and order).
pub fn bson_equal(a: &Bson, b: &Bson) -> bool {
    compare_bson(a, b) == Ordering::Equal
}

/// The type name mongod uses in messages and in `$type` (aggregation).
/// BSON type names and their numeric codes, as `$type` and `$convert` accept them.
pub const TYPE_CODES: &[(&str, i32)] = &[
    ("double", 1),
    ("string", 2),
    ("object", 3),
    ("array", 4),
    ("binData", 5),
    ("undefined", 6),
    ("objectId", 7),
    ("bool", 8),
    ("date", 9),
    ("null", 10),
    ("regex", 11),
    ("dbPointer", 12),
    ("javascript", 13),
    ("symbol", 14),
    ("javascriptWithScope", 15),
    ("int", 16),
    ("timestamp", 17),
    ("long", 18),
    ("decimal", 19),
    ("minKey", -1),
    ("maxKey", 127),
];

pub fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

/// A mongo-shell-like rendering of a value, for error messages (`{ a: 1, b: "x" }`).
pub fn shell_repr(v: &Bson) -> String {
    match v {
        Bson::String(s) => format!("{s:?}"),
        Bson::Document(d) => doc_repr(d),
        Bson::Array(a) => {
            if a.is_empty() {
                "[]".to_string()
            } else {
                let inner: Vec<String> = a.iter().map(shell_repr).collect();
                format!("[ {} ]", inner.join(", "))
            }
        }
        Bson::Int64(i) => i.to_string(),
        Bson::Double(f) => {
            if f.fract() == 0.0 && f.is_finite() {
                format!("{f:.1}")
            } else {
                f.to_string()
            }
        }
        Bson::Null => "null".to_string(),
        Bson::ObjectId(o) => format!("ObjectId('{o}')"),
        other => other.to_string(),
    }
}

/// [`shell_repr`] of a document.
pub fn doc_repr(d: &Document) -> String {
    if d.is_empty() {
        return "{}".to_string();
    }
    let inner: Vec<String> = d
        .iter()
        .map(|(k, v)| format!("{k}: {}", shell_repr(v)))
        .collect();
    format!("{{ {} }}", inner.join(", "))
}

/// Ordering wrapper so BSON values can key ordered maps (MongoDB equality semantics).
#[derive(Clone, Debug)]
pub struct OrdBson(pub Bson);

impl PartialEq for OrdBson {
    fn eq(&self, other: &Self) -> bool {
        bson_equal(&self.0, &other.0)
    }
}
impl Eq for OrdBson {}
impl PartialOrd for OrdBson {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdBson {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_bson(&self.0, &other.0)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, spec::BinarySubtype, Binary, DateTime, Decimal128, Regex};
    use proptest::prelude::*;

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(s.parse::<Decimal128>().unwrap())
    }

    #[test]
    fn brackets_in_order() {
        let ascending = vec![
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Int32(-5),
            Bson::Int64(3),
            Bson::Double(3.5),
            dec("1000"),
            Bson::String("".into()),
            Bson::String("a".into()),
            Bson::Symbol("b".into()),
            Bson::Document(doc! {}),
            Bson::Document(doc! {"a": 1}),
            Bson::Array(vec![]),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![9],
            }),
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(DateTime::from_millis(-1)),
            Bson::DateTime(DateTime::from_millis(5)),
            Bson::Timestamp(bson::Timestamp {
                time: 1,
                increment: 0,
            }),
            Bson::RegularExpression(Regex {
                pattern: "a".into(),
                options: "".into(),
            }),
            Bson::JavaScriptCode("x".into()),
            Bson::MaxKey,
        ];
        for (i, a) in ascending.iter().enumerate() {
            for (j, b) in ascending.iter().enumerate() {
                assert_eq!(compare_bson(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(bson_equal(&Bson::Int32(1), &Bson::Double(1.0)));
        assert!(bson_equal(&Bson::Int32(1), &Bson::Int64(1)));
        assert!(bson_equal(&Bson::Int64(1), &dec("1.0")));
        assert!(bson_equal(&Bson::Double(0.0), &Bson::Double(-0.0)));
        assert!(bson_equal(&Bson::Double(f64::NAN), &dec("NaN")));
        assert_eq!(
            compare_bson(
                &Bson::Int64(i64::MAX),
                &Bson::Double(9.223_372_036_854_776e18)
            ),
            Ordering::Less
        );
        assert_eq!(
            compare_bson(
                &Bson::Int64(9007199254740993),
                &Bson::Double(9007199254740992.0)
            ),
            Ordering::Greater
        );
        assert_eq!(
            compare_bson(&Bson::Int32(2), &Bson::Double(2.5)),
            Ordering::Less
        );
        assert_eq!(
            compare_bson(&Bson::Int32(-3), &Bson::Double(-2.5)),
            Ordering::Less
        );
        assert_eq!(
            compare_bson(&Bson::Double(f64::NAN), &Bson::Double(f64::NEG_INFINITY)),
            Ordering::Less
        );
        assert_eq!(
            compare_bson(&Bson::Double(f64::INFINITY), &Bson::Int64(i64::MAX)),
            Ordering::Greater
        );
    }

    #[test]
    fn within_brackets() {
        // Strings by bytes: uppercase before lowercase.
        assert_eq!(
            compare_bson(&Bson::String("B".into()), &Bson::String("a".into())),
            Ordering::Less
        );
        assert!(bson_equal(
            &Bson::String("x".into()),
            &Bson::Symbol("x".into())
        ));
        // Documents: field names matter, then order, then values.
        assert!(!bson_equal(
            &doc! {"a": 1, "b": 2}.into(),
            &doc! {"b": 2, "a": 1}.into()
        ));
        assert_eq!(
            compare_bson(&doc! {"a": 1}.into(), &doc! {"b": 0}.into()),
            Ordering::Less
        );
        // Type bracket of the element before its field name.
        assert_eq!(
            compare_bson(&doc! {"b": 1}.into(), &doc! {"a": "x"}.into()),
            Ordering::Less
        );
        assert_eq!(
            compare_bson(&doc! {"a": 1}.into(), &doc! {"a": 1, "b": 0}.into()),
            Ordering::Less
        );
        assert!(bson_equal(&doc! {"a": 1}.into(), &doc! {"a": 1.0}.into()));
        // Arrays element-wise, prefix less.
        assert_eq!(
            compare_bson(&bson::bson!([1, 2]).clone(), &bson::bson!([1, 2, 0])),
            Ordering::Less
        );
        assert_eq!(
            compare_bson(&bson::bson!([2]), &bson::bson!([1, 5])),
            Ordering::Greater
        );
        // BinData: length first, then subtype, then bytes.
        let bin = |st: u8, b: Vec<u8>| {
            Bson::Binary(Binary {
                subtype: BinarySubtype::from(st),
                bytes: b,
            })
        };
        assert_eq!(
            compare_bson(&bin(0, vec![9]), &bin(0, vec![0, 0])),
            Ordering::Less
        );
        assert_eq!(
            compare_bson(&bin(5, vec![0]), &bin(0, vec![1])),
            Ordering::Greater
        );
        assert_eq!(
            compare_bson(&bin(0, vec![1]), &bin(0, vec![2])),
            Ordering::Less
        );
        // Timestamps unsigned.
        let ts = |t: u32, i: u32| {
            Bson::Timestamp(bson::Timestamp {
                time: t,
                increment: i,
            })
        };
        assert_eq!(compare_bson(&ts(u32::MAX, 0), &ts(1, 5)), Ordering::Greater);
        assert_eq!(compare_bson(&ts(1, 1), &ts(1, 2)), Ordering::Less);
        // Null and undefined are distinct brackets, MinKey/MaxKey equal themselves.
        assert!(!bson_equal(&Bson::Null, &Bson::Undefined));
        assert!(bson_equal(&Bson::MaxKey, &Bson::MaxKey));
    }

    #[test]
    fn repr_and_decimal_round_trip() {
        assert_eq!(
            shell_repr(&doc! {"a": 5, "b": "x"}.into()),
            "{ a: 5, b: \"x\" }"
        );
        assert_eq!(shell_repr(&bson::bson!([1, 2.0])), "[ 1, 2.0 ]");
        assert_eq!(decimal_to_f64(&f64_to_decimal(1.25e10)), 1.25e10);
        assert_eq!(decimal_to_f64(&f64_to_decimal(-0.1)), -0.1);
        assert!(decimal_to_f64(&f64_to_decimal(f64::NAN)).is_nan());
    }

    pub(crate) fn arb_bson() -> impl Strategy<Value = Bson> {
        let leaf = prop_oneof![
            Just(Bson::Null),
            Just(Bson::Undefined),
            Just(Bson::MinKey),
            Just(Bson::MaxKey),
            any::<bool>().prop_map(Bson::Boolean),
            (-3i32..3).prop_map(Bson::Int32),
            prop_oneof![
                (-3i64..3),
                Just(i64::MAX),
                Just(i64::MIN),
                Just(9007199254740993)
            ]
            .prop_map(Bson::Int64),
            prop_oneof![
                (-3i32..3).prop_map(|i| i as f64 / 2.0),
                Just(f64::NAN),
                Just(f64::INFINITY),
                Just(-0.0),
                Just(9.223_372_036_854_776e18),
                Just(9007199254740992.0)
            ]
            .prop_map(Bson::Double),
            (-3i32..3).prop_map(|i| dec(&format!("{i}.0"))),
            "[ab]{0,2}".prop_map(Bson::String),
            "[ab]{0,2}".prop_map(Bson::Symbol),
            (0u8..3, proptest::collection::vec(0u8..3, 0..3)).prop_map(|(s, b)| Bson::Binary(
                Binary {
                    subtype: BinarySubtype::from(s),
                    bytes: b
                }
            )),
            (-2i64..2).prop_map(|m| Bson::DateTime(DateTime::from_millis(m))),
            (0u32..2, 0u32..2).prop_map(|(t, i)| Bson::Timestamp(bson::Timestamp {
                time: t,
                increment: i
            })),
            ("[ab]{0,2}", "[im]{0,1}").prop_map(|(p, o)| Bson::RegularExpression(Regex {
                pattern: p,
                options: o
            })),
            (0u8..2).prop_map(|b| Bson::ObjectId(ObjectId::from_bytes([b; 12]))),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
                proptest::collection::vec(("[ab]", inner), 0..3).prop_map(|kv| {
                    let mut d = Document::new();
                    for (k, v) in kv {
                        d.insert(k, v);
                    }
                    Bson::Document(d)
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn total_order(a in arb_bson(), b in arb_bson(), c in arb_bson()) {
            // Reflexive and antisymmetric.
            prop_assert_eq!(compare_bson(&a, &a), Ordering::Equal);
            prop_assert_eq!(compare_bson(&a, &b), compare_bson(&b, &a).reverse());
            // Transitive, over every ordering of the three values.
            let v = [&a, &b, &c];
            for (x, y, z) in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)] {
                let xy = compare_bson(v[x], v[y]);
                let yz = compare_bson(v[y], v[z]);
                let xz = compare_bson(v[x], v[z]);
                if xy != Ordering::Greater && yz != Ordering::Greater {
                    prop_assert_ne!(xz, Ordering::Greater);
                    if xy == Ordering::Less || yz == Ordering::Less {
                        prop_assert_eq!(xz, Ordering::Less);
                    }
                }
            }
            // Consistent with equality.
            prop_assert_eq!(bson_equal(&a, &b), compare_bson(&a, &b) == Ordering::Equal);
            if bson_equal(&a, &b) {
                prop_assert_eq!(compare_bson(&a, &c), compare_bson(&b, &c));
                prop_assert_eq!(canonical_type_rank(&a), canonical_type_rank(&b));
            }
            // Different brackets order by bracket.
            if canonical_type_rank(&a) < canonical_type_rank(&b) {
                prop_assert_eq!(compare_bson(&a, &b), Ordering::Less);
            }
        }
    }
}
