use super::*;
use bson::{bson, doc};

fn ev(e: Bson, d: Document) -> Option<Bson> {
    parse_expr(&e).unwrap().eval_root(&d).unwrap()
}

fn ev_err(e: Bson, d: Document) -> DocError {
    match parse_expr(&e) {
        Err(e) => e,
        Ok(x) => x.eval_root(&d).unwrap_err(),
    }
}

#[test]
fn paths_and_literals() {
    let d = doc! {"a": {"b": 5}, "arr": [{"x": 1}, {"y": 2}, {"x": 3}, 7]};
    assert_eq!(ev(bson!("$a.b"), d.clone()), Some(bson!(5)));
    assert_eq!(ev(bson!("$nope"), d.clone()), None);
    assert_eq!(ev(bson!("$arr.x"), d.clone()), Some(bson!([1, 3])));
    assert_eq!(ev(bson!("$$ROOT.a"), d.clone()), Some(bson!({"b": 5})));
    assert_eq!(ev(bson!("$$CURRENT.a.b"), d.clone()), Some(bson!(5)));
    assert_eq!(ev(bson!({"$literal": "$a"}), d.clone()), Some(bson!("$a")));
    assert_eq!(ev(bson!(7), d.clone()), Some(bson!(7)));
    assert_eq!(
        ev(
            bson!({"x": "$a.b", "y": "$nope", "z": ["$nope", 1]}),
            d.clone()
        ),
        Some(bson!({"x": 5, "z": [null, 1]}))
    );
    assert_eq!(ev_err(bson!("$$nope"), d.clone()).code, 17276);
    assert_eq!(ev_err(bson!({"$foo": 1}), d.clone()).code, 168);
    assert_eq!(ev_err(bson!({"$add": 1, "$sub": 2}), d.clone()).code, 15983);
    assert_eq!(ev_err(bson!({"$eq": [1]}), d.clone()).code, 16020);
    assert_eq!(ev_err(bson!("$"), d.clone()).code, 16872);
}

#[test]
fn arithmetic() {
    let d = doc! {"i": 2, "l": Bson::Int64(3), "f": 1.5, "big": i32::MAX, "n": null};
    assert_eq!(ev(bson!({"$add": ["$i", 3]}), d.clone()), Some(bson!(5)));
    assert_eq!(
        ev(bson!({"$add": ["$i", "$l"]}), d.clone()),
        Some(Bson::Int64(5))
    );
    assert_eq!(
        ev(bson!({"$add": ["$i", "$f"]}), d.clone()),
        Some(bson!(3.5))
    );
    assert_eq!(
        ev(bson!({"$add": ["$big", 1]}), d.clone()),
        Some(Bson::Int64(i32::MAX as i64 + 1))
    );
    assert_eq!(
        ev(bson!({"$add": ["$i", "$n"]}), d.clone()),
        Some(Bson::Null)
    );
    assert_eq!(
        ev(bson!({"$add": ["$i", "$missing"]}), d.clone()),
        Some(Bson::Null)
    );
    assert_eq!(
        ev(bson!({"$add": [DateTime::from_millis(1000), 5]}), d.clone()),
        Some(Bson::DateTime(DateTime::from_millis(1005)))
    );
    assert_eq!(ev_err(bson!({"$add": ["a", 1]}), d.clone()).code, 14);
    assert_eq!(
        ev(bson!({"$subtract": [10, "$i"]}), d.clone()),
        Some(bson!(8))
    );
    assert_eq!(
        ev(
            bson!({"$subtract": [DateTime::from_millis(10), DateTime::from_millis(4)]}),
            d.clone()
        ),
        Some(Bson::Int64(6))
    );
    assert_eq!(
        ev(bson!({"$multiply": ["$i", "$f", 2]}), d.clone()),
        Some(bson!(6.0))
    );
    assert_eq!(ev(bson!({"$divide": [9, 2]}), d.clone()), Some(bson!(4.5)));
    assert_eq!(
        ev_err(bson!({"$divide": [9, 0]}), d.clone()).message,
        "can't $divide by zero"
    );
    assert_eq!(ev(bson!({"$mod": [9, 4]}), d.clone()), Some(bson!(1)));
    assert_eq!(ev(bson!({"$abs": -3}), d.clone()), Some(bson!(3)));
    assert_eq!(ev(bson!({"$ceil": 1.2}), d.clone()), Some(bson!(2.0)));
    assert_eq!(ev(bson!({"$floor": 1.8}), d.clone()), Some(bson!(1.0)));
    assert_eq!(ev(bson!({"$round": [2.5]}), d.clone()), Some(bson!(2.0)));
    assert_eq!(
        ev(bson!({"$round": [1.256, 2]}), d.clone()),
        Some(bson!(1.26))
    );
    assert_eq!(ev(bson!({"$trunc": 1.9}), d.clone()), Some(bson!(1.0)));
    assert_eq!(ev(bson!({"$pow": [2, 10]}), d.clone()), Some(bson!(1024)));
    assert_eq!(ev(bson!({"$sqrt": 16}), d.clone()), Some(bson!(4.0)));
}

#[test]
fn comparison_logic_cond() {
    let d = doc! {"a": 1, "s": "x", "n": null};
    assert_eq!(
        ev(bson!({"$eq": ["$a", 1.0]}), d.clone()),
        Some(bson!(true))
    );
    assert_eq!(
        ev(bson!({"$eq": ["$missing", null]}), d.clone()),
        Some(bson!(false))
    );
    assert_eq!(
        ev(bson!({"$eq": ["$n", null]}), d.clone()),
        Some(bson!(true))
    );
    assert_eq!(ev(bson!({"$gt": ["$s", 5]}), d.clone()), Some(bson!(true)));
    assert_eq!(
        ev(bson!({"$lt": ["$missing", null]}), d.clone()),
        Some(bson!(true))
    );
    assert_eq!(ev(bson!({"$cmp": [1, 2]}), d.clone()), Some(bson!(-1)));
    assert_eq!(ev(bson!({"$ne": ["$a", 2]}), d.clone()), Some(bson!(true)));
    assert_eq!(
        ev(bson!({"$and": [1, "$s", true]}), d.clone()),
        Some(bson!(true))
    );
    assert_eq!(
        ev(bson!({"$and": [1, "$n"]}), d.clone()),
        Some(bson!(false))
    );
    assert_eq!(
        ev(bson!({"$or": [0, "$missing"]}), d.clone()),
        Some(bson!(false))
    );
    assert_eq!(ev(bson!({"$not": [0]}), d.clone()), Some(bson!(true)));
    assert_eq!(
        ev(
            bson!({"$cond": [{"$eq": ["$a", 1]}, "yes", "no"]}),
            d.clone()
        ),
        Some(bson!("yes"))
    );
    assert_eq!(
        ev(
            bson!({"$cond": {"if": "$n", "then": "yes", "else": "no"}}),
            d.clone()
        ),
        Some(bson!("no"))
    );
    assert_eq!(
        ev_err(bson!({"$cond": {"if": 1, "then": 2}}), d.clone()).code,
        17080
    );
    assert_eq!(
        ev(bson!({"$ifNull": ["$n", "$missing", "d"]}), d.clone()),
        Some(bson!("d"))
    );
    assert_eq!(
        ev(bson!({"$ifNull": ["$a", "d"]}), d.clone()),
        Some(bson!(1))
    );
    assert_eq!(
        ev(
            bson!({"$switch": {"branches": [{"case": {"$eq": ["$a", 2]}, "then": "two"}, {"case": {"$eq": ["$a", 1]}, "then": "one"}], "default": "other"}}),
            d.clone()
        ),
        Some(bson!("one"))
    );
    assert_eq!(
        ev_err(bson!({"$switch": {"branches": []}}), d.clone()).code,
        40066
    );
}

#[test]
fn strings() {
    let d = doc! {"s": "Hello", "n": null};
    assert_eq!(
        ev(bson!({"$concat": ["$s", " ", "World"]}), d.clone()),
        Some(bson!("Hello World"))
    );
    assert_eq!(
        ev(bson!({"$concat": ["$s", "$n"]}), d.clone()),
        Some(Bson::Null)
    );
    assert_eq!(ev_err(bson!({"$concat": ["$s", 1]}), d.clone()).code, 16702);
    assert_eq!(
        ev(bson!({"$toUpper": "$s"}), d.clone()),
        Some(bson!("HELLO"))
    );
    assert_eq!(
        ev(bson!({"$toLower": "$s"}), d.clone()),
        Some(bson!("hello"))
    );
    assert_eq!(ev(bson!({"$toLower": "$n"}), d.clone()), Some(bson!("")));
    assert_eq!(
        ev(bson!({"$substr": ["$s", 1, 3]}), d.clone()),
        Some(bson!("ell"))
    );
    assert_eq!(
        ev(bson!({"$substrCP": ["$s", 1, -1]}), d.clone()),
        Some(bson!("ello"))
    );
    assert_eq!(ev(bson!({"$strLenCP": "héllo"}), d.clone()), Some(bson!(5)));
    assert_eq!(
        ev(bson!({"$strLenBytes": "héllo"}), d.clone()),
        Some(bson!(6))
    );
    assert_eq!(
        ev(bson!({"$split": ["a,b", ","]}), d.clone()),
        Some(bson!(["a", "b"]))
    );
    assert_eq!(
        ev(bson!({"$trim": {"input": "  x "}}), d.clone()),
        Some(bson!("x"))
    );
    assert_eq!(
        ev(bson!({"$ltrim": {"input": "xxy", "chars": "x"}}), d.clone()),
        Some(bson!("y"))
    );
    assert_eq!(
        ev(bson!({"$strcasecmp": ["ab", "AB"]}), d.clone()),
        Some(bson!(0))
    );
    assert_eq!(
        ev(
            bson!({"$regexMatch": {"input": "$s", "regex": "^h", "options": "i"}}),
            d.clone()
        ),
        Some(bson!(true))
    );
    assert_eq!(ev(bson!({"$toString": 5}), d.clone()), Some(bson!("5")));
    assert_eq!(ev(bson!({"$toInt": "42"}), d.clone()), Some(bson!(42)));
    assert_eq!(ev(bson!({"$toLong": 4.7}), d.clone()), Some(Bson::Int64(4)));
    assert_eq!(ev(bson!({"$toDouble": "1.5"}), d.clone()), Some(bson!(1.5)));
    assert_eq!(ev(bson!({"$toBool": 0}), d.clone()), Some(bson!(false)));
    assert_eq!(ev_err(bson!({"$toInt": "x"}), d.clone()).code, 241);
    assert_eq!(ev(bson!({"$type": "$s"}), d.clone()), Some(bson!("string")));
    assert_eq!(
        ev(bson!({"$type": "$missing"}), d.clone()),
        Some(bson!("missing"))
    );
}

#[test]
fn arrays_and_objects() {
    let d = doc! {"a": [1, 2, 3], "o": {"x": 1}};
    assert_eq!(ev(bson!({"$size": "$a"}), d.clone()), Some(bson!(3)));
    assert_eq!(ev_err(bson!({"$size": "$missing"}), d.clone()).code, 17124);
    assert_eq!(
        ev(bson!({"$arrayElemAt": ["$a", 0]}), d.clone()),
        Some(bson!(1))
    );
    assert_eq!(
        ev(bson!({"$arrayElemAt": ["$a", -1]}), d.clone()),
        Some(bson!(3))
    );
    assert_eq!(ev(bson!({"$arrayElemAt": ["$a", 5]}), d.clone()), None);
    assert_eq!(ev(bson!({"$first": "$a"}), d.clone()), Some(bson!(1)));
    assert_eq!(ev(bson!({"$last": "$a"}), d.clone()), Some(bson!(3)));
    assert_eq!(ev(bson!({"$in": [2, "$a"]}), d.clone()), Some(bson!(true)));
    assert_eq!(
        ev_err(bson!({"$in": [2, "$missing"]}), d.clone()).code,
        40081
    );
    assert_eq!(ev(bson!({"$isArray": "$a"}), d.clone()), Some(bson!(true)));
    assert_eq!(
        ev(bson!({"$concatArrays": ["$a", [4]]}), d.clone()),
        Some(bson!([1, 2, 3, 4]))
    );
    assert_eq!(
        ev(bson!({"$slice": ["$a", -2]}), d.clone()),
        Some(bson!([2, 3]))
    );
    assert_eq!(
        ev(bson!({"$slice": ["$a", 1, 1]}), d.clone()),
        Some(bson!([2]))
    );
    assert_eq!(
        ev(bson!({"$reverseArray": "$a"}), d.clone()),
        Some(bson!([3, 2, 1]))
    );
    assert_eq!(
        ev(bson!({"$range": [0, 6, 2]}), d.clone()),
        Some(bson!([0, 2, 4]))
    );
    assert_eq!(
        ev(bson!({"$indexOfArray": ["$a", 3]}), d.clone()),
        Some(bson!(2))
    );
    assert_eq!(
        ev(
            bson!({"$filter": {"input": "$a", "as": "x", "cond": {"$gt": ["$$x", 1]}}}),
            d.clone()
        ),
        Some(bson!([2, 3]))
    );
    assert_eq!(
        ev(
            bson!({"$map": {"input": "$a", "in": {"$multiply": ["$$this", 10]}}}),
            d.clone()
        ),
        Some(bson!([10, 20, 30]))
    );
    assert_eq!(
        ev(
            bson!({"$reduce": {"input": "$a", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}),
            d.clone()
        ),
        Some(bson!(6))
    );
    assert_eq!(
        ev(
            bson!({"$let": {"vars": {"t": 5}, "in": {"$add": ["$$t", 1]}}}),
            d.clone()
        ),
        Some(bson!(6))
    );
    assert_eq!(
        ev(bson!({"$mergeObjects": ["$o", {"y": 2}, null]}), d.clone()),
        Some(bson!({"x": 1, "y": 2}))
    );
    assert_eq!(
        ev(bson!({"$objectToArray": "$o"}), d.clone()),
        Some(bson!([{"k": "x", "v": 1}]))
    );
    assert_eq!(
        ev(bson!({"$arrayToObject": [[["a", 1]]]}), d.clone()),
        Some(bson!({"a": 1}))
    );
    assert_eq!(
        ev_err(bson!({"$arrayToObject": [[["a\0", 1]]]}), d.clone()).code,
        4940400
    );
    assert_eq!(ev(bson!({"$sum": "$a"}), d.clone()), Some(bson!(6)));
    assert_eq!(ev(bson!({"$avg": "$a"}), d.clone()), Some(bson!(2.0)));
    assert_eq!(ev(bson!({"$max": "$a"}), d.clone()), Some(bson!(3)));
    assert_eq!(ev(bson!({"$min": [5, 2, null]}), d.clone()), Some(bson!(2)));
    assert_eq!(
        ev(bson!({"$setUnion": [[1, 2], [2, 3]]}), d.clone()),
        Some(bson!([1, 2, 3]))
    );
    assert_eq!(
        ev(bson!({"$setIntersection": [[1, 2], [2, 3]]}), d.clone()),
        Some(bson!([2]))
    );
}

#[test]
fn dates() {
    // 2021-03-04T05:06:07.089Z
    let d = doc! {"t": DateTime::from_millis(1614834367089)};
    assert_eq!(ev(bson!({"$year": "$t"}), d.clone()), Some(bson!(2021)));
    assert_eq!(ev(bson!({"$month": "$t"}), d.clone()), Some(bson!(3)));
    assert_eq!(ev(bson!({"$dayOfMonth": "$t"}), d.clone()), Some(bson!(4)));
    assert_eq!(ev(bson!({"$hour": "$t"}), d.clone()), Some(bson!(5)));
    assert_eq!(ev(bson!({"$minute": "$t"}), d.clone()), Some(bson!(6)));
    assert_eq!(ev(bson!({"$second": "$t"}), d.clone()), Some(bson!(7)));
    assert_eq!(
        ev(bson!({"$millisecond": "$t"}), d.clone()),
        Some(bson!(89))
    );
    assert_eq!(ev(bson!({"$dayOfWeek": "$t"}), d.clone()), Some(bson!(5))); // Thursday
    assert_eq!(ev(bson!({"$dayOfYear": "$t"}), d.clone()), Some(bson!(63)));
}
