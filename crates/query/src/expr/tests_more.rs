//! Issue 14's other expressions against the examples of MongoDB's manual (each test names its
//! page under https://www.mongodb.com/docs/manual/reference/operator/aggregation/).

use super::*;
use bson::{bson, doc};

fn ev_on(e: Bson, d: Document) -> Option<Bson> {
    parse_expr(&e).unwrap().eval_root(&d).unwrap()
}

fn ev(e: Bson) -> Option<Bson> {
    ev_on(e, doc! {})
}

fn code(e: Bson) -> i32 {
    match parse_expr(&e) {
        Err(e) => e.code,
        Ok(x) => x.eval_root(&doc! {}).unwrap_err().code,
    }
}

/// regexFind/, regexFindAll/, regexMatch/.
#[test]
fn regex_find_family() {
    assert_eq!(
        ev(
            bson!({"$regexFind": {"input": "Single LINE description.", "regex": "line", "options": "i"}})
        ),
        Some(bson!({"match": "LINE", "idx": 7, "captures": []}))
    );
    assert_eq!(
        ev(bson!({"$regexFind": {"input": "Single LINE description.", "regex": "line"}})),
        Some(Bson::Null)
    );
    // `idx` counts code points; an unmatched group is null.
    assert_eq!(
        ev(bson!({"$regexFindAll": {"input": "café cafe", "regex": "(c)af(é)?"}})),
        Some(bson!([
            {"match": "café", "idx": 0, "captures": ["c", "é"]},
            {"match": "caf", "idx": 5, "captures": ["c", null]}
        ]))
    );
    let re = Bson::RegularExpression(bson::Regex {
        pattern: "^a".into(),
        options: "i".into(),
    });
    assert_eq!(
        ev(bson!({"$regexMatch": {"input": "Abc", "regex": re.clone()}})),
        Some(bson!(true))
    );
    assert_eq!(
        ev(bson!({"$regexFindAll": {"input": null, "regex": "a"}})),
        Some(bson!([]))
    );
    assert_eq!(
        code(bson!({"$regexFind": {"input": "a", "regex": re, "options": "m"}})),
        51107
    );
    assert_eq!(
        code(bson!({"$regexFind": {"input": 1, "regex": "a"}})),
        51104
    );
    assert_eq!(
        code(bson!({"$regexFind": {"input": "a", "regex": 1}})),
        51105
    );
    assert_eq!(
        code(bson!({"$regexFind": {"input": "a", "regex": "("}})),
        51091
    );
    assert_eq!(code(bson!({"$regexFind": {"input": "a"}})), 31023);
}

/// replaceOne/, replaceAll/.
#[test]
fn replace_one_and_all() {
    assert_eq!(
        ev(
            bson!({"$replaceOne": {"input": "blue paint with blue paintbrush", "find": "blue paint", "replacement": "red paint"}})
        ),
        Some(bson!("red paint with blue paintbrush"))
    );
    assert_eq!(
        ev(
            bson!({"$replaceAll": {"input": "blue paint with blue paintbrush", "find": "blue paint", "replacement": "red paint"}})
        ),
        Some(bson!("red paint with red paintbrush"))
    );
    assert_eq!(
        ev(bson!({"$replaceAll": {"input": null, "find": "a", "replacement": "b"}})),
        Some(Bson::Null)
    );
    assert_eq!(
        code(bson!({"$replaceAll": {"input": "a", "find": 1, "replacement": "b"}})),
        51746
    );
    assert_eq!(
        code(bson!({"$replaceAll": {"input": "a", "find": "a"}})),
        51747
    );
    // Output beyond mongod's buffer limits is refused, not built.
    let big = "x".repeat(1 << 20);
    assert_eq!(
        code(
            bson!({"$replaceAll": {"input": big.clone(), "find": "", "replacement": "y".repeat(200)}})
        ),
        13548
    );
    // Fifty nested groups make each one-byte match a large document.
    let groups = format!("{}x{}", "(".repeat(50), ")".repeat(50));
    assert_eq!(
        code(bson!({"$regexFindAll": {"input": big, "regex": groups}})),
        5126606
    );
}

/// indexOfBytes/, indexOfCP/: the pages' examples.
#[test]
fn index_of_bytes_and_code_points() {
    let b = |args: Bson| ev(bson!({"$indexOfBytes": args})).unwrap();
    assert_eq!(b(bson!(["cafeteria", "e"])), bson!(3));
    assert_eq!(b(bson!(["cafétéria", "é"])), bson!(3));
    assert_eq!(b(bson!(["cafétéria", "e"])), bson!(-1));
    assert_eq!(b(bson!(["cafétéria", "t"])), bson!(5));
    assert_eq!(b(bson!(["foo.bar.fi", ".", 5])), bson!(7));
    assert_eq!(b(bson!(["vanilla", "ll", 0, 2])), bson!(-1));
    assert_eq!(b(bson!(["vanilla", "ll", 12])), bson!(-1));
    assert_eq!(b(bson!(["vanilla", "ll", 5, 2])), bson!(-1));
    assert_eq!(b(bson!(["vanilla", "nilla", 3])), bson!(-1));
    assert_eq!(b(bson!([null, "foo"])), Bson::Null);
    let cp = |args: Bson| ev(bson!({"$indexOfCP": args})).unwrap();
    assert_eq!(cp(bson!(["cafétéria", "é"])), bson!(3));
    assert_eq!(cp(bson!(["cafétéria", "t"])), bson!(4));
    assert_eq!(cp(bson!(["abc", "", 1])), bson!(1));
    assert_eq!(code(bson!({"$indexOfBytes": ["vanilla", "ll", -1]})), 40097);
    assert_eq!(
        code(bson!({"$indexOfBytes": ["vanilla", "ll", 1.5]})),
        40096
    );
    assert_eq!(code(bson!({"$indexOfBytes": [1, "ll"]})), 40091);
    assert_eq!(code(bson!({"$indexOfCP": ["a", 1]})), 40094);
}

/// zip/: the page's examples.
#[test]
fn zip_manual_examples() {
    assert_eq!(
        ev(bson!({"$zip": {"inputs": [["a"], ["b"], ["c"]]}})),
        Some(bson!([["a", "b", "c"]]))
    );
    assert_eq!(
        ev(bson!({"$zip": {"inputs": [["a"], ["b", "c"]]}})),
        Some(bson!([["a", "b"]]))
    );
    assert_eq!(
        ev(bson!({"$zip": {"inputs": [[1], [2, 3]], "useLongestLength": true}})),
        Some(bson!([[1, 2], [null, 3]]))
    );
    assert_eq!(
        ev(
            bson!({"$zip": {"inputs": [[1], [2, 3], [4]], "useLongestLength": true, "defaults": ["a", "b", "c"]}})
        ),
        Some(bson!([[1, 2, 4], ["a", 3, "c"]]))
    );
    assert_eq!(
        ev(bson!({"$zip": {"inputs": [[1], "$missing"]}})),
        Some(Bson::Null)
    );
    assert_eq!(code(bson!({"$zip": {"inputs": [[1], 2]}})), 34468);
    assert_eq!(
        code(bson!({"$zip": {"inputs": [[1]], "defaults": [1]}})),
        34466
    );
    assert_eq!(
        code(bson!({"$zip": {"inputs": [[1]], "useLongestLength": true, "defaults": [1, 2]}})),
        34467
    );
    assert_eq!(code(bson!({"$zip": {"inputs": "$a"}})), 34461);
    assert_eq!(code(bson!({"$zip": {}})), 34465);
    assert_eq!(code(bson!({"$zip": {"inputs": [[1]], "x": 1}})), 34464);
}

/// sortArray/: the page's examples.
#[test]
fn sort_array_manual_examples() {
    let team = bson!([
        {"name": "pat", "age": 30, "address": {"street": "12 Baker St", "city": "London"}},
        {"name": "dallas", "age": 36, "address": {"street": "12 Cowper St", "city": "Palo Alto"}},
        {"name": "charlie", "age": 42, "address": {"street": "12 French St", "city": "New Brunswick"}}
    ]);
    let names =
        |sort_by: Bson| match ev(bson!({"$sortArray": {"input": team.clone(), "sortBy": sort_by}}))
        {
            Some(Bson::Array(a)) => a
                .iter()
                .map(|m| {
                    m.as_document()
                        .unwrap()
                        .get_str("name")
                        .unwrap()
                        .to_string()
                })
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
    assert_eq!(names(bson!({"name": 1})), ["charlie", "dallas", "pat"]);
    assert_eq!(
        names(bson!({"address.city": -1})),
        ["dallas", "charlie", "pat"]
    );
    assert_eq!(
        ev(bson!({"$sortArray": {"input": [1, 4, 1, 6, 12, 5], "sortBy": -1}})),
        Some(bson!([12, 6, 5, 4, 1, 1]))
    );
    assert_eq!(
        ev(
            bson!({"$sortArray": {"input": [20, 4, {"a": "Free"}, 6, 21, 5, "Gratis", {"a": null}, {"a": {"sale": true, "price": 19}}, 10.23, {"a": "On sale"}], "sortBy": 1}})
        ),
        Some(
            bson!([4, 5, 6, 10.23, 20, 21, "Gratis", {"a": null}, {"a": "Free"}, {"a": "On sale"}, {"a": {"sale": true, "price": 19}}])
        )
    );
    assert_eq!(
        code(bson!({"$sortArray": {"input": 1, "sortBy": 1}})),
        2942504
    );
    assert_eq!(
        code(bson!({"$sortArray": {"input": [1], "sortBy": 2}})),
        2942506
    );
    assert_eq!(code(bson!({"$sortArray": {"input": [1]}})), 2942503);
}

/// firstN-array-element/, lastN-array-element/, maxN-array-element/, minN-array-element/.
#[test]
fn n_element_operators() {
    let input = bson!([3, null, 1, 8, 5]);
    assert_eq!(
        ev(bson!({"$firstN": {"n": 2, "input": input.clone()}})),
        Some(bson!([3, null]))
    );
    assert_eq!(
        ev(bson!({"$lastN": {"n": 2, "input": input.clone()}})),
        Some(bson!([8, 5]))
    );
    assert_eq!(
        ev(bson!({"$maxN": {"n": 2, "input": input.clone()}})),
        Some(bson!([8, 5]))
    );
    assert_eq!(
        ev(bson!({"$minN": {"n": 10, "input": input.clone()}})),
        Some(bson!([1, 3, 5, 8]))
    );
    assert_eq!(code(bson!({"$firstN": {"n": 0, "input": [1]}})), 5787908);
    assert_eq!(code(bson!({"$firstN": {"n": "a", "input": [1]}})), 5787902);
    assert_eq!(code(bson!({"$lastN": {"n": 1, "input": 5}})), 5788200);
    assert_eq!(code(bson!({"$maxN": {"input": [1]}})), 5787906);
}

/// getField/, setField/, unsetField/: fields whose names hold dots or `$`.
#[test]
fn get_set_unset_field() {
    let d = doc! {"price.usd": 45, "qty": 2, "$price": 9};
    assert_eq!(
        ev_on(bson!({"$getField": "price.usd"}), d.clone()),
        Some(bson!(45))
    );
    assert_eq!(
        ev_on(bson!({"$getField": {"$literal": "$price"}}), d.clone()),
        Some(bson!(9))
    );
    assert_eq!(
        ev_on(
            bson!({"$getField": {"field": "qty", "input": {"qty": 7}}}),
            d.clone()
        ),
        Some(bson!(7))
    );
    assert_eq!(
        ev_on(
            bson!({"$getField": {"field": "x", "input": null}}),
            d.clone()
        ),
        Some(Bson::Null)
    );
    assert_eq!(ev_on(bson!({"$getField": "nope"}), d.clone()), None);
    assert_eq!(
        ev_on(
            bson!({"$setField": {"field": "price.usd", "input": "$$ROOT", "value": 50}}),
            d.clone()
        ),
        Some(bson!({"price.usd": 50, "qty": 2, "$price": 9}))
    );
    assert_eq!(
        ev_on(
            bson!({"$setField": {"field": {"$literal": "$price"}, "input": "$$ROOT", "value": "$$REMOVE"}}),
            d.clone()
        ),
        Some(bson!({"price.usd": 45, "qty": 2}))
    );
    assert_eq!(
        ev_on(
            bson!({"$unsetField": {"field": "qty", "input": "$$ROOT"}}),
            d.clone()
        ),
        Some(bson!({"price.usd": 45, "$price": 9}))
    );
    assert_eq!(code(bson!({"$getField": {"field": 1}})), 3041704);
    assert_eq!(
        code(bson!({"$getField": {"field": "a", "input": 1}})),
        3041705
    );
    assert_eq!(
        code(bson!({"$setField": {"field": "a", "input": 1, "value": 1}})),
        4161105
    );
    assert_eq!(
        code(bson!({"$setField": {"field": "a", "input": {}}})),
        4161103
    );
    assert_eq!(code(bson!({"$unsetField": {"field": "a"}})), 4161109);
}

/// convert/: type names and numeric codes, onError, onNull.
#[test]
fn convert_with_on_error_and_on_null() {
    assert_eq!(
        ev(bson!({"$convert": {"input": "5.5", "to": "double"}})),
        Some(bson!(5.5))
    );
    assert_eq!(
        ev(bson!({"$convert": {"input": 5.9, "to": 16}})),
        Some(bson!(5))
    );
    assert_eq!(
        ev(bson!({"$convert": {"input": 5, "to": "long"}})),
        Some(Bson::Int64(5))
    );
    assert_eq!(
        ev(bson!({"$convert": {"input": 0, "to": "bool"}})),
        Some(bson!(false))
    );
    assert_eq!(
        ev(
            bson!({"$convert": {"input": DateTime::from_millis(1_522_169_931_538), "to": "string"}})
        ),
        Some(bson!("2018-03-27T16:58:51.538Z"))
    );
    assert_eq!(
        ev(bson!({"$convert": {"input": "2018-03-27", "to": 9}})),
        Some(Bson::DateTime(DateTime::from_millis(1_522_108_800_000)))
    );
    assert_eq!(
        ev(bson!({"$convert": {"input": "abc", "to": "int", "onError": -1}})),
        Some(bson!(-1))
    );
    assert_eq!(
        ev(bson!({"$convert": {"input": null, "to": "int", "onNull": 0}})),
        Some(bson!(0))
    );
    assert_eq!(
        ev(bson!({"$convert": {"input": "$nope", "to": "int"}})),
        Some(Bson::Null)
    );
    assert_eq!(
        ev(bson!({"$convert": {"input": 1, "to": null}})),
        Some(Bson::Null)
    );
    assert_eq!(
        code(bson!({"$convert": {"input": "abc", "to": "int"}})),
        241
    );
    // A string is an int or a long only when written as an integer.
    assert_eq!(
        code(bson!({"$convert": {"input": "5.5", "to": "int"}})),
        241
    );
    assert_eq!(
        ev(bson!({"$convert": {"input": "-12", "to": "long"}})),
        Some(Bson::Int64(-12))
    );
    assert_eq!(
        code(bson!({"$convert": {"input": "3000000000", "to": "int"}})),
        241
    );
    assert_eq!(code(bson!({"$convert": {"input": 1, "to": "regex"}})), 241);
    assert_eq!(code(bson!({"$convert": {"input": 1, "to": "foo"}})), 9);
    assert_eq!(code(bson!({"$convert": {"input": 1, "to": 99}})), 9);
    assert_eq!(code(bson!({"$convert": {"input": 1}})), 9);
    assert_eq!(
        code(bson!({"$convert": {"input": 1, "to": "int", "x": 1}})),
        9
    );
}

/// rand/.
#[test]
fn rand_is_a_double_in_unit_interval() {
    for _ in 0..100 {
        match ev(bson!({"$rand": {}})) {
            Some(Bson::Double(f)) => assert!((0.0..1.0).contains(&f)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(code(bson!({"$rand": {"seed": 1}})), 3040501);
}

/// sin/ … radiansToDegrees/, log/.
#[test]
fn trigonometry_and_log() {
    let f = |e: Bson| match ev(e) {
        Some(Bson::Double(x)) => x,
        other => panic!("{other:?}"),
    };
    assert!((f(bson!({"$sin": {"$degreesToRadians": 30}})) - 0.5).abs() < 1e-12);
    assert!((f(bson!({"$cos": 0})) - 1.0).abs() < 1e-12);
    assert!((f(bson!({"$atan2": [1, 1]})) - std::f64::consts::FRAC_PI_4).abs() < 1e-12);
    assert!((f(bson!({"$radiansToDegrees": std::f64::consts::PI})) - 180.0).abs() < 1e-9);
    assert!((f(bson!({"$acosh": 1})) - 0.0).abs() < 1e-12);
    assert_eq!(f(bson!({"$log": [100, 10]})), 2.0);
    assert!((f(bson!({"$log": [100, std::f64::consts::E]})) - 4.605170185988092).abs() < 1e-12);
    assert!(matches!(
        ev(bson!({"$sin": Bson::Decimal128("1".parse().unwrap())})),
        Some(Bson::Decimal128(_))
    ));
    assert_eq!(ev(bson!({"$tan": null})), Some(Bson::Null));
    assert_eq!(code(bson!({"$acos": 2})), 50989);
    assert_eq!(code(bson!({"$sin": f64::INFINITY})), 50989);
    assert_eq!(code(bson!({"$sin": "a"})), 28765);
    assert_eq!(code(bson!({"$log": [0, 10]})), 28758);
    assert_eq!(code(bson!({"$log": [10, 1]})), 28759);
}

/// bitAnd/, bitOr/, bitXor/, bitNot/.
#[test]
fn bitwise_operators() {
    assert_eq!(ev(bson!({"$bitAnd": [3, 5]})), Some(bson!(1)));
    assert_eq!(
        ev(bson!({"$bitOr": [3, Bson::Int64(5)]})),
        Some(Bson::Int64(7))
    );
    assert_eq!(ev(bson!({"$bitXor": [3, 5]})), Some(bson!(6)));
    assert_eq!(ev(bson!({"$bitNot": 0})), Some(bson!(-1)));
    assert_eq!(
        ev(bson!({"$bitNot": Bson::Int64(3)})),
        Some(Bson::Int64(-4))
    );
    assert_eq!(ev(bson!({"$bitAnd": [3, null]})), Some(Bson::Null));
    assert_eq!(code(bson!({"$bitAnd": [3, 1.5]})), 14);
}

/// binarySize/, bsonSize/, tsSecond/, tsIncrement/, toUUID/, stdDevPop/ (expression form).
#[test]
fn sizes_timestamps_uuid_and_std_dev() {
    assert_eq!(ev(bson!({"$binarySize": "café"})), Some(bson!(5)));
    assert_eq!(
        ev(bson!({"$bsonSize": {"$literal": {"a": 1}}})),
        Some(bson!(12))
    );
    assert_eq!(code(bson!({"$bsonSize": 1})), 31393);
    assert_eq!(code(bson!({"$binarySize": 1})), 51276);
    let ts = Bson::Timestamp(bson::Timestamp {
        time: 1_622_731_060,
        increment: 10,
    });
    assert_eq!(
        ev(bson!({"$tsSecond": ts.clone()})),
        Some(Bson::Int64(1_622_731_060))
    );
    assert_eq!(ev(bson!({"$tsIncrement": ts})), Some(Bson::Int64(10)));
    assert_eq!(code(bson!({"$tsSecond": 1})), 5687301);
    match ev(bson!({"$toUUID": "123e4567-e89b-12d3-a456-426614174000"})) {
        Some(Bson::Binary(b)) => {
            assert_eq!(b.subtype, bson::spec::BinarySubtype::Uuid);
            assert_eq!(b.bytes[..2], [0x12, 0x3e]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(code(bson!({"$toUUID": "nope"})), 241);
    let sd = |e: Bson| match ev(e) {
        Some(Bson::Double(x)) => x,
        other => panic!("{other:?}"),
    };
    assert!((sd(bson!({"$stdDevPop": [[1, 2, 3, 4]]})) - 1.118033988749895).abs() < 1e-12);
    assert!((sd(bson!({"$stdDevSamp": [1, 2, "x", 3, 4]})) - 1.2909944487358056).abs() < 1e-12);
    assert_eq!(ev(bson!({"$stdDevSamp": [[1]]})), Some(Bson::Null));
}

/// percentile/ and median/ (expression forms): the page's testScores example.
#[test]
fn percentile_and_median_are_exact() {
    let scores = bson!([62, 81, 80, 75, 68]);
    assert_eq!(
        ev(
            bson!({"$percentile": {"input": scores.clone(), "p": [0.25, 0.5, 0.75], "method": "approximate"}})
        ),
        Some(bson!([68.0, 75.0, 80.0]))
    );
    assert_eq!(
        ev(bson!({"$median": {"input": scores.clone(), "method": "approximate"}})),
        Some(bson!(75.0))
    );
    assert_eq!(
        ev(bson!({"$median": {"input": [1, "x", null, 3], "method": "approximate"}})),
        Some(bson!(1.0))
    );
    assert_eq!(
        ev(bson!({"$median": {"input": [], "method": "approximate"}})),
        Some(Bson::Null)
    );
    assert_eq!(
        code(bson!({"$median": {"input": [1], "method": "exact"}})),
        2
    );
    assert_eq!(code(bson!({"$median": {"input": [1]}})), 40414);
    assert_eq!(
        code(bson!({"$percentile": {"input": [1], "p": [1.5], "method": "approximate"}})),
        7750301
    );
    assert_eq!(
        code(bson!({"$percentile": {"input": [1], "p": [0.5], "method": "approximate", "x": 1}})),
        40415
    );
}

/// toHashedIndexKey/: the manual's example ("string to hash" → 763543691661428748), and a
/// missing value hashes as null.
#[test]
fn to_hashed_index_key() {
    assert_eq!(
        ev(bson!({"$toHashedIndexKey": "string to hash"})),
        Some(Bson::Int64(763543691661428748))
    );
    assert_eq!(
        ev(bson!({"$toHashedIndexKey": "$nope"})),
        Some(Bson::Int64(crate::hash::hash_value(&Bson::Null)))
    );
}

/// `$function`: the body (string or Code) over the evaluated arguments.
#[test]
fn function_calls_javascript_over_its_arguments() {
    let d = doc! {"name": "ada", "scores": [1, 2, 3]};
    let f = bson!({"$function": {
        "body": "function(n, s) { return n.toUpperCase() + ':' + s.reduce(function(a, b) { return a + b; }, 0); }",
        "args": ["$name", "$scores"],
        "lang": "js",
    }});
    assert_eq!(ev_on(f, d.clone()), Some(Bson::String("ADA:6".into())));
    let code = bson!({"$function": {
        "body": Bson::JavaScriptCode("function(x) { return {twice: [x, x]}; }".into()),
        "args": [{"$add": [1, 2]}],
        "lang": "js",
    }});
    assert_eq!(ev_on(code, d.clone()), Some(bson!({"twice": [3.0, 3.0]})));
    let err = |spec: Bson| {
        crate::expr::parse_expr(&bson!({ "$function": spec }))
            .unwrap_err()
            .code
    };
    assert_eq!(err(bson!({"body": "function() {}", "args": []})), 31418);
    assert_eq!(
        err(bson!({"body": "function() {}", "args": 1, "lang": "js"})),
        31266
    );
    assert_eq!(err(bson!({"args": [], "lang": "js"})), 31262);
    assert_eq!(
        err(bson!({"body": "function( {", "args": [], "lang": "js"})),
        139
    );
    assert_eq!(
        err(bson!({"body": "function() {}", "args": [], "lang": "js", "x": 1})),
        31261
    );
    let thrower = bson!({"$function": {"body": "function() { throw new TypeError('bad'); }", "args": [], "lang": "js"}});
    let e = crate::expr::parse_expr(&thrower)
        .unwrap()
        .eval_root(&d)
        .unwrap_err();
    assert_eq!(e.code, 139);
    assert!(e.message.contains("TypeError: bad"), "{}", e.message);
}
