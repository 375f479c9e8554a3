//! KeyString order equals MongoDB's comparison order (`compare::compare_bson`) on random values,
//! ascending and descending, for single values and compound keys.

use bson::{doc, oid::ObjectId, Bson, Document};
use docdb::keystring::{encode_key, encode_one};
use proptest::prelude::*;
use query::compare::compare_bson;
use std::cmp::Ordering;

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        prop_oneof![
            Just(9007199254740992i64),
            Just(9007199254740993i64),
            Just(-9007199254740993i64),
            Just(i64::MAX),
            Just(i64::MIN),
            -1000i64..1000
        ]
        .prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
            Just(9007199254740992.0),
            Just(9.223372036854776e18),
            Just(5e-324),
            (-1000i32..1000).prop_map(|i| i as f64 / 4.0)
        ]
        .prop_map(Bson::Double),
        "[a-c\\x00]{0,4}".prop_map(Bson::String),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
        Just(Bson::MinKey),
        Just(Bson::MaxKey),
        any::<[u8; 12]>().prop_map(|b| Bson::ObjectId(ObjectId::from_bytes(b))),
        any::<i64>().prop_map(|ms| Bson::DateTime(bson::DateTime::from_millis(ms))),
        (any::<u32>(), any::<u32>()).prop_map(|(t, i)| Bson::Timestamp(bson::Timestamp {
            time: t,
            increment: i
        })),
        proptest::collection::vec(any::<u8>(), 0..4).prop_map(|b| Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: b
        })),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    scalar().prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
            proptest::collection::vec(("[ab]{1,2}", inner), 0..3).prop_map(|kv| {
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
    fn single_values(a in value(), b in value()) {
        let want = compare_bson(&a, &b);
        prop_assert_eq!(encode_one(&a, false).cmp(&encode_one(&b, false)), want, "{} vs {}", a, b);
        prop_assert_eq!(encode_one(&a, true).cmp(&encode_one(&b, true)), want.reverse());
    }

    #[test]
    fn compound_keys(a in (value(), value()), b in (value(), value()), d1 in any::<bool>(), d2 in any::<bool>()) {
        let dir = |o: Ordering, d: bool| if d { o.reverse() } else { o };
        let want = dir(compare_bson(&a.0, &b.0), d1).then(dir(compare_bson(&a.1, &b.1), d2));
        let ka = encode_key(&[&a.0, &a.1], &[d1, d2]);
        let kb = encode_key(&[&b.0, &b.1], &[d1, d2]);
        prop_assert_eq!(ka.cmp(&kb), want);
    }
}

#[test]
fn fixed_cases() {
    let cases = [
        (
            Bson::Int64(9007199254740993),
            Bson::Double(9007199254740992.0),
        ),
        (Bson::Double(f64::NAN), Bson::Int32(i32::MIN)),
        (
            Bson::Document(doc! {"a": 1}),
            Bson::Document(doc! {"a": 1, "b": 0}),
        ),
        (
            Bson::Document(doc! {"b": 1}),
            Bson::Document(doc! {"a": "x"}),
        ),
        (Bson::Array(vec![]), Bson::Array(vec![Bson::MinKey])),
    ];
    for (a, b) in cases {
        assert_eq!(
            encode_one(&a, false).cmp(&encode_one(&b, false)),
            compare_bson(&a, &b),
            "{a} vs {b}"
        );
    }
}
