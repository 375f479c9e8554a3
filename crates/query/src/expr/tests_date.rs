//! The date operators against the examples of MongoDB's manual (each test names its page
//! under https://www.mongodb.com/docs/manual/reference/operator/aggregation/).

use super::*;
use bson::{bson, doc, oid::ObjectId, Timestamp};

fn ev(e: Bson) -> Option<Bson> {
    parse_expr(&e).unwrap().eval_root(&doc! {}).unwrap()
}

fn code(e: Bson) -> i32 {
    match parse_expr(&e) {
        Err(e) => e.code,
        Ok(x) => x.eval_root(&doc! {}).unwrap_err().code,
    }
}

fn date(s: &str) -> Bson {
    Bson::DateTime(DateTime::parse_rfc3339_str(s).unwrap())
}

fn ds(e: Bson) -> String {
    match ev(e) {
        Some(Bson::String(s)) => s,
        other => panic!("not a string: {other:?}"),
    }
}

/// dateToString/: the page's example document and outputs.
#[test]
fn date_to_string_manual_examples() {
    let d = date("2014-01-01T08:15:39.736Z");
    let f = |format: &str, tz: &str| {
        ds(bson!({"$dateToString": {"format": format, "date": d.clone(), "timezone": tz}}))
    };
    assert_eq!(f("%Y-%m-%d", "UTC"), "2014-01-01");
    assert_eq!(f("%H:%M:%S:%L%z", "America/New_York"), "03:15:39:736-0500");
    assert_eq!(f("%H:%M:%S:%L%z", "+04:30"), "12:45:39:736+0430");
    assert_eq!(f("%Z", "America/New_York"), "-300");
    assert_eq!(f("%Z", "+04:30"), "270");
    assert_eq!(f("%b", "+04:30"), "Jan");
    assert_eq!(f("%B", "+04:30"), "January");
    // The remaining specifiers: 2014-01-01 was a Wednesday in ISO week 1 of 2014.
    assert_eq!(f("%j %w %u %U %V %G %%", "UTC"), "001 4 3 00 01 2014 %");
    assert_eq!(
        ds(bson!({"$dateToString": {"date": d.clone()}})),
        "2014-01-01T08:15:39.736Z"
    );
    assert_eq!(
        ds(bson!({"$dateToString": {"date": d.clone(), "timezone": "Asia/Kolkata"}})),
        "2014-01-01T13:45:39.736"
    );
    // Only `UTC` and zero offsets are mongod's UTC zone; `GMT` is a zone like any other.
    assert_eq!(
        ds(bson!({"$dateToString": {"date": d.clone(), "timezone": "GMT"}})),
        "2014-01-01T08:15:39.736"
    );
    assert_eq!(
        ds(bson!({"$dateToString": {"date": d.clone(), "timezone": "+00:00"}})),
        "2014-01-01T08:15:39.736Z"
    );
    // Timestamps and ObjectIds are dates too.
    let ts = Bson::Timestamp(Timestamp {
        time: 1_388_564_139,
        increment: 1,
    });
    assert_eq!(
        ds(bson!({"$dateToString": {"date": ts, "format": "%H:%M:%S"}})),
        "08:15:39"
    );
    let oid = ObjectId::from_bytes([0x52, 0xc3, 0xcf, 0xab, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        ds(bson!({"$dateToString": {"date": oid, "format": "%Y"}})),
        "2014"
    );
}

#[test]
fn date_to_string_nulls_and_errors() {
    let d = date("2014-01-01T08:15:39.736Z");
    assert_eq!(
        ev(bson!({"$dateToString": {"date": "$nope"}})),
        Some(Bson::Null)
    );
    assert_eq!(
        ev(bson!({"$dateToString": {"date": null, "onNull": "none"}})),
        Some(bson!("none"))
    );
    assert_eq!(
        ev(bson!({"$dateToString": {"date": d.clone(), "timezone": null}})),
        Some(Bson::Null)
    );
    assert_eq!(code(bson!({"$dateToString": {"format": "%Y"}})), 18628);
    assert_eq!(
        code(bson!({"$dateToString": {"date": d.clone(), "x": 1}})),
        18534
    );
    assert_eq!(code(bson!({"$dateToString": "x"})), 18629);
    // A null date is onNull even when the format is null; a bad format fails even then.
    assert_eq!(
        ev(bson!({"$dateToString": {"date": null, "format": null, "onNull": 1}})),
        Some(bson!(1))
    );
    assert_eq!(
        ev(bson!({"$dateToString": {"date": d.clone(), "format": null}})),
        Some(Bson::Null)
    );
    assert_eq!(
        code(bson!({"$dateToString": {"date": null, "format": "%Q"}})),
        18536
    );
    assert_eq!(
        code(bson!({"$dateToString": {"date": d.clone(), "format": 1}})),
        18533
    );
    assert_eq!(
        code(bson!({"$dateToString": {"date": d.clone(), "format": "%"}})),
        18535
    );
    assert_eq!(
        code(bson!({"$dateToString": {"date": d.clone(), "format": "%q"}})),
        18536
    );
    assert_eq!(
        code(bson!({"$dateToString": {"date": d.clone(), "timezone": "Mars/Base"}})),
        40485
    );
    assert_eq!(
        code(bson!({"$dateToString": {"date": d.clone(), "timezone": 5}})),
        40517
    );
    assert_eq!(code(bson!({"$dateToString": {"date": "2014"}})), 16006);
    let far = Bson::DateTime(DateTime::from_millis(253_402_300_800_000)); // year 10000
    assert_eq!(code(bson!({"$dateToString": {"date": far}})), 18537);
}

/// year/, hour/, isoWeek/, week/ …: `{date, timezone}` on every part operator.
#[test]
fn date_parts_with_timezones() {
    let d = date("2014-01-01T08:15:39.736Z");
    let part = |op: &str, tz: Option<&str>| {
        let arg = match tz {
            Some(tz) => bson!({"date": d.clone(), "timezone": tz}),
            None => d.clone(),
        };
        ev(Bson::Document(doc! {op: arg})).unwrap()
    };
    assert_eq!(part("$year", None), bson!(2014));
    assert_eq!(part("$month", None), bson!(1));
    assert_eq!(part("$dayOfMonth", None), bson!(1));
    assert_eq!(part("$hour", None), bson!(8));
    assert_eq!(part("$minute", None), bson!(15));
    assert_eq!(part("$second", None), bson!(39));
    assert_eq!(part("$millisecond", None), bson!(736));
    assert_eq!(part("$dayOfYear", None), bson!(1));
    assert_eq!(part("$dayOfWeek", None), bson!(4));
    assert_eq!(part("$week", None), bson!(0));
    assert_eq!(part("$isoWeek", None), bson!(1));
    assert_eq!(part("$isoDayOfWeek", None), bson!(3));
    assert_eq!(part("$isoWeekYear", None), Bson::Int64(2014));
    // In New York it is 03:15; in Honolulu still 2013-12-31 22:15.
    assert_eq!(part("$hour", Some("America/New_York")), bson!(3));
    assert_eq!(part("$year", Some("Pacific/Honolulu")), bson!(2013));
    assert_eq!(part("$dayOfYear", Some("Pacific/Honolulu")), bson!(365));
    assert_eq!(part("$dayOfWeek", Some("Pacific/Honolulu")), bson!(3));
    assert_eq!(part("$minute", Some("+05:30")), bson!(45));
    assert_eq!(part("$hour", Some("-0330")), bson!(4));
    assert_eq!(part("$hour", Some("+01")), bson!(9));
    // 2016-01-01 (a Friday) is in ISO week 53 of 2015.
    let jan1 = date("2016-01-01T00:00:00Z");
    assert_eq!(ev(bson!({"$isoWeek": jan1.clone()})), Some(bson!(53)));
    assert_eq!(
        ev(bson!({"$isoWeekYear": [jan1.clone()]})),
        Some(Bson::Int64(2015))
    );
    assert_eq!(
        ev(bson!({"$week": date("2016-01-03T00:00:00Z")})),
        Some(bson!(1))
    );
    assert_eq!(ev(bson!({"$year": {"date": null}})), Some(Bson::Null));
    assert_eq!(
        ev(bson!({"$year": {"date": jan1.clone(), "timezone": null}})),
        Some(Bson::Null)
    );
    assert_eq!(
        code(bson!({"$year": {"date": jan1.clone(), "tz": "UTC"}})),
        40535
    );
    assert_eq!(code(bson!({"$year": {"timezone": "UTC"}})), 40539);
    assert_eq!(code(bson!({"$year": [jan1.clone(), jan1.clone()]})), 40536);
    assert_eq!(
        code(bson!({"$year": {"date": jan1.clone(), "timezone": "Nowhere"}})),
        40485
    );
    assert_eq!(code(bson!({"$year": "x"})), 16006);
    // The date is checked before the zone is looked at.
    assert_eq!(
        code(bson!({"$year": {"date": "x", "timezone": null}})),
        16006
    );
}

/// dateToParts/: the page's example.
#[test]
fn date_to_parts_manual_example() {
    let d = date("2017-01-01T01:29:09.123Z");
    assert_eq!(
        ev(bson!({"$dateToParts": {"date": d.clone()}})),
        Some(
            bson!({"year": 2017, "month": 1, "day": 1, "hour": 1, "minute": 29, "second": 9, "millisecond": 123})
        )
    );
    assert_eq!(
        ev(bson!({"$dateToParts": {"date": d.clone(), "iso8601": true}})),
        Some(
            bson!({"isoWeekYear": 2016, "isoWeek": 52, "isoDayOfWeek": 7, "hour": 1, "minute": 29, "second": 9, "millisecond": 123})
        )
    );
    assert_eq!(
        ev(bson!({"$dateToParts": {"date": d.clone(), "timezone": "America/New_York"}})),
        Some(
            bson!({"year": 2016, "month": 12, "day": 31, "hour": 20, "minute": 29, "second": 9, "millisecond": 123})
        )
    );
    assert_eq!(
        code(bson!({"$dateToParts": {"date": d.clone(), "iso8601": 1}})),
        40521
    );
    assert_eq!(code(bson!({"$dateToParts": {}})), 40522);
    assert_eq!(
        code(bson!({"$dateToParts": {"date": d.clone(), "x": 1}})),
        40520
    );
    assert_eq!(code(bson!({"$dateToParts": 1})), 40524);
}

/// dateFromParts/: the page's examples, including values beyond their range.
#[test]
fn date_from_parts_manual_examples() {
    assert_eq!(
        ev(bson!({"$dateFromParts": {"year": 2017, "month": 2, "day": 8, "hour": 12}})),
        Some(date("2017-02-08T12:00:00Z"))
    );
    assert_eq!(
        ev(
            bson!({"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 6, "isoDayOfWeek": 3, "hour": 12}})
        ),
        Some(date("2017-02-08T12:00:00Z"))
    );
    assert_eq!(
        ev(
            bson!({"$dateFromParts": {"year": 2016, "month": 12, "day": 31, "hour": 23, "minute": 46, "second": 12, "timezone": "America/New_York"}})
        ),
        Some(date("2017-01-01T04:46:12Z"))
    );
    let carry = |parts: Bson| ev(bson!({"$dateFromParts": parts}));
    assert_eq!(
        carry(bson!({"year": 2017, "month": 14, "day": 1, "hour": 12})),
        Some(date("2018-02-01T12:00:00Z"))
    );
    assert_eq!(
        carry(bson!({"year": 2017, "month": 0, "day": 1, "hour": 12})),
        Some(date("2016-12-01T12:00:00Z"))
    );
    assert_eq!(
        carry(bson!({"year": 2017, "month": 3, "day": 0})),
        Some(date("2017-02-28T00:00:00Z"))
    );
    assert_eq!(
        carry(bson!({"year": 2017, "month": 1, "day": 1, "hour": -1})),
        Some(date("2016-12-31T23:00:00Z"))
    );
    assert_eq!(
        carry(bson!({"year": 2017, "millisecond": 1500})),
        Some(date("2017-01-01T00:00:01.500Z"))
    );
    assert_eq!(
        carry(bson!({"year": 2017, "month": 1.0})),
        Some(date("2017-01-01T00:00:00Z"))
    );
    assert_eq!(
        carry(bson!({"year": 2017, "month": null})),
        Some(Bson::Null)
    );
    assert_eq!(code(bson!({"$dateFromParts": {"month": 1}})), 40516);
    // Seconds and milliseconds are not bounded; an ISO year out of range is 31095.
    assert_eq!(
        carry(bson!({"year": 2017, "second": 86_400})),
        Some(date("2017-01-02T00:00:00Z"))
    );
    assert_eq!(code(bson!({"$dateFromParts": {"isoWeekYear": 0}})), 31095);
    assert_eq!(
        code(bson!({"$dateFromParts": {"year": 2017, "isoWeek": 1}})),
        40489
    );
    assert_eq!(code(bson!({"$dateFromParts": {"year": "2017"}})), 40515);
    assert_eq!(
        code(bson!({"$dateFromParts": {"year": 2017, "month": 1.5}})),
        40515
    );
    assert_eq!(code(bson!({"$dateFromParts": {"year": 10000}})), 40523);
    assert_eq!(
        code(bson!({"$dateFromParts": {"year": 2017, "day": 40000}})),
        31034
    );
    assert_eq!(
        code(bson!({"$dateFromParts": {"year": 2017, "x": 1}})),
        40518
    );
    assert_eq!(code(bson!({"$dateFromParts": [2017]})), 40519);
}

/// dateFromString/: the page's examples.
#[test]
fn date_from_string_manual_examples() {
    let f = |args: Bson| ev(bson!({"$dateFromString": args}));
    assert_eq!(
        f(bson!({"dateString": "2017-02-08T12:10:40.787", "timezone": "America/New_York"})),
        Some(date("2017-02-08T17:10:40.787Z"))
    );
    assert_eq!(
        f(bson!({"dateString": "2017-02-08"})),
        Some(date("2017-02-08T00:00:00Z"))
    );
    assert_eq!(
        f(bson!({"dateString": "06-15-2018", "format": "%m-%d-%Y"})),
        Some(date("2018-06-15T00:00:00Z"))
    );
    assert_eq!(
        f(bson!({"dateString": "15-06-2018", "format": "%d-%m-%Y"})),
        Some(date("2018-06-15T00:00:00Z"))
    );
    assert_eq!(
        f(bson!({"dateString": "2017-02-09T03:35:02.055", "timezone": "+0530"})),
        Some(date("2017-02-08T22:05:02.055Z"))
    );
    assert_eq!(
        f(bson!({"dateString": "2017-07-12T22:23:55 GMT+02:00"})),
        Some(date("2017-07-12T20:23:55Z"))
    );
    // mongod's parser has no zone database: a zone name in the string is an error.
    assert_eq!(
        code(bson!({"$dateFromString": {"dateString": "2017-07-12 22:23:55 Europe/London"}})),
        241
    );
    assert_eq!(
        f(bson!({"dateString": "2017-07-12T22:23:55Z"})),
        Some(date("2017-07-12T22:23:55Z"))
    );
    assert_eq!(
        f(bson!({"dateString": "2017 Jan 05 10:30:00", "format": "%Y %b %d %H:%M:%S"})),
        Some(date("2017-01-05T10:30:00Z"))
    );
    // An hour without minutes and seconds is incomplete.
    assert_eq!(
        code(bson!({"$dateFromString": {"dateString": "2017-01-05 10", "format": "%Y-%m-%d %H"}})),
        241
    );
    assert_eq!(
        f(bson!({"dateString": "2017-W06-3", "format": "%G-W%V-%u"})),
        Some(date("2017-02-08T00:00:00Z"))
    );
    // onError and onNull.
    assert_eq!(
        f(
            bson!({"dateString": "20177-02-09T03:35:02.055", "timezone": "America/New_York", "onError": "bad"})
        ),
        Some(bson!("bad"))
    );
    assert_eq!(
        f(bson!({"dateString": 5, "onError": "bad"})),
        Some(bson!("bad"))
    );
    assert_eq!(
        f(bson!({"dateString": null, "onNull": "none"})),
        Some(bson!("none"))
    );
    assert_eq!(f(bson!({"dateString": "$missing"})), Some(Bson::Null));
    assert_eq!(
        code(bson!({"$dateFromString": {"dateString": "20177-02-09"}})),
        241
    );
    assert_eq!(
        code(bson!({"$dateFromString": {"dateString": "2017-02-30"}})),
        241
    );
    assert_eq!(
        code(bson!({"$dateFromString": {"dateString": "2017", "format": "%Y"}})),
        241
    );
    assert_eq!(
        code(
            bson!({"$dateFromString": {"dateString": "2017-02-08T10:00:00Z", "timezone": "Europe/Paris"}})
        ),
        241
    );
    assert_eq!(code(bson!({"$dateFromString": {"format": "%Y"}})), 40542);
    assert_eq!(
        code(bson!({"$dateFromString": {"dateString": "x", "y": 1}})),
        40541
    );
    assert_eq!(code(bson!({"$dateFromString": "x"})), 40540);
    assert_eq!(
        code(bson!({"$dateFromString": {"dateString": "x", "format": 1}})),
        40684
    );
    assert_eq!(
        code(bson!({"$dateFromString": {"dateString": "x", "format": "%Q"}})),
        18536
    );
}

/// dateAdd/, dateSubtract/: month ends clamp; days keep the local time across DST.
#[test]
fn date_add_and_subtract() {
    let add = |args: Bson| ev(bson!({"$dateAdd": args}));
    assert_eq!(
        add(bson!({"startDate": date("2021-01-31T10:00:00Z"), "unit": "month", "amount": 1})),
        Some(date("2021-02-28T10:00:00Z"))
    );
    assert_eq!(
        add(bson!({"startDate": date("2020-02-29T00:00:00Z"), "unit": "year", "amount": 1})),
        Some(date("2021-02-28T00:00:00Z"))
    );
    assert_eq!(
        add(bson!({"startDate": date("2020-11-30T00:00:00Z"), "unit": "quarter", "amount": 1})),
        Some(date("2021-02-28T00:00:00Z"))
    );
    assert_eq!(
        add(
            bson!({"startDate": date("2021-01-01T00:00:00Z"), "unit": "hour", "amount": Bson::Int64(25)})
        ),
        Some(date("2021-01-02T01:00:00Z"))
    );
    // New York leaves daylight time on 2021-11-07: a day later is still 09:00 local.
    assert_eq!(
        add(
            bson!({"startDate": date("2021-11-06T13:00:00Z"), "unit": "day", "amount": 1, "timezone": "America/New_York"})
        ),
        Some(date("2021-11-07T14:00:00Z"))
    );
    assert_eq!(
        add(
            bson!({"startDate": date("2021-11-06T13:00:00Z"), "unit": "hour", "amount": 24, "timezone": "America/New_York"})
        ),
        Some(date("2021-11-07T13:00:00Z"))
    );
    assert_eq!(
        ev(
            bson!({"$dateSubtract": {"startDate": date("2021-03-31T00:00:00Z"), "unit": "month", "amount": 1}})
        ),
        Some(date("2021-02-28T00:00:00Z"))
    );
    assert_eq!(
        ev(
            bson!({"$dateSubtract": {"startDate": date("2021-01-08T00:00:00Z"), "unit": "week", "amount": 1}})
        ),
        Some(date("2021-01-01T00:00:00Z"))
    );
    assert_eq!(
        add(bson!({"startDate": null, "unit": "day", "amount": 1})),
        Some(Bson::Null)
    );
    let s = date("2021-01-01T00:00:00Z");
    assert_eq!(
        code(bson!({"$dateAdd": {"startDate": s.clone(), "unit": "day"}})),
        5166402
    );
    assert_eq!(
        code(bson!({"$dateAdd": {"startDate": s.clone(), "unit": "day", "amount": 1, "x": 1}})),
        5166401
    );
    assert_eq!(code(bson!({"$dateAdd": 1})), 5166400);
    assert_eq!(
        code(bson!({"$dateSubtract": {"startDate": s.clone(), "unit": "day", "amount": i64::MIN}})),
        6045000
    );
    assert_eq!(
        code(bson!({"$dateAdd": {"startDate": "x", "unit": "day", "amount": 1}})),
        5166403
    );
    assert_eq!(
        code(bson!({"$dateAdd": {"startDate": s.clone(), "unit": "day", "amount": 1.5}})),
        5166405
    );
    assert_eq!(
        code(bson!({"$dateAdd": {"startDate": s.clone(), "unit": "fortnight", "amount": 1}})),
        9
    );
    assert_eq!(
        code(bson!({"$dateAdd": {"startDate": s.clone(), "unit": 1, "amount": 1}})),
        5439013
    );
    assert_eq!(
        code(
            bson!({"$dateAdd": {"startDate": s.clone(), "unit": "day", "amount": 1_000_000_000_000i64}})
        ),
        5976500
    );
    assert_eq!(
        code(
            bson!({"$dateAdd": {"startDate": s.clone(), "unit": "millisecond", "amount": i64::MAX}})
        ),
        5166406
    );
}

/// dateDiff/: boundaries crossed, not elapsed time; `startOfWeek`.
#[test]
fn date_diff_counts_boundaries() {
    let diff = |a: &str, b: &str, unit: &str| {
        ev(bson!({"$dateDiff": {"startDate": date(a), "endDate": date(b), "unit": unit}})).unwrap()
    };
    assert_eq!(
        diff("2020-12-31T23:59:00Z", "2021-01-01T00:01:00Z", "year"),
        Bson::Int64(1)
    );
    assert_eq!(
        diff("2021-01-01T00:00:00Z", "2021-12-31T23:59:00Z", "year"),
        Bson::Int64(0)
    );
    assert_eq!(
        diff("2021-03-31T00:00:00Z", "2021-04-01T00:00:00Z", "quarter"),
        Bson::Int64(1)
    );
    assert_eq!(
        diff("2021-01-31T00:00:00Z", "2021-03-01T00:00:00Z", "month"),
        Bson::Int64(2)
    );
    assert_eq!(
        diff("2021-01-01T23:59:00Z", "2021-01-02T00:01:00Z", "day"),
        Bson::Int64(1)
    );
    assert_eq!(
        diff("2021-01-02T00:00:00Z", "2021-01-01T00:00:00Z", "day"),
        Bson::Int64(-1)
    );
    assert_eq!(
        diff("2021-01-01T10:59:59Z", "2021-01-01T11:00:00Z", "hour"),
        Bson::Int64(1)
    );
    assert_eq!(
        diff(
            "2021-01-01T00:00:00Z",
            "2021-01-01T00:00:01.5Z",
            "millisecond"
        ),
        Bson::Int64(1500)
    );
    // dateDiff/ "Use $dateDiff with startOfWeek": Saturday 2017-01-07 to Monday 2017-01-09.
    let week = |sow: &str| {
        ev(bson!({"$dateDiff": {"startDate": date("2017-01-07T00:00:00Z"), "endDate": date("2017-01-09T00:00:00Z"), "unit": "week", "startOfWeek": sow}})).unwrap()
    };
    assert_eq!(week("monday"), Bson::Int64(1));
    assert_eq!(week("SUN"), Bson::Int64(1));
    assert_eq!(week("Saturday"), Bson::Int64(0));
    assert_eq!(
        diff("2017-01-07T00:00:00Z", "2017-01-09T00:00:00Z", "week"),
        Bson::Int64(1)
    );
    // In New York, 2021-01-01T03:00Z is still 2020-12-31.
    assert_eq!(
        ev(
            bson!({"$dateDiff": {"startDate": date("2021-01-01T03:00:00Z"), "endDate": date("2021-01-01T06:00:00Z"), "unit": "day", "timezone": "America/New_York"}})
        ),
        Some(Bson::Int64(1))
    );
    let s = date("2021-01-01T00:00:00Z");
    assert_eq!(
        code(
            bson!({"$dateDiff": {"startDate": s.clone(), "endDate": s.clone(), "unit": "week", "startOfWeek": "someday"}})
        ),
        5439016
    );
    // New York falls back at 2021-11-07T06:00Z: 01:30 EDT to 01:30 EST is one hour.
    assert_eq!(
        ev(
            bson!({"$dateDiff": {"startDate": date("2021-11-07T05:30:00Z"), "endDate": date("2021-11-07T06:30:00Z"), "unit": "hour", "timezone": "America/New_York"}})
        ),
        Some(Bson::Int64(1))
    );
    assert_eq!(
        code(bson!({"$dateDiff": {"startDate": s.clone(), "endDate": "x", "unit": "day"}})),
        5166307
    );
    assert_eq!(
        code(bson!({"$dateDiff": {"endDate": s.clone(), "unit": "day"}})),
        5166303
    );
    assert_eq!(
        code(bson!({"$dateDiff": {"startDate": s.clone(), "unit": "day"}})),
        5166304
    );
    assert_eq!(
        code(bson!({"$dateDiff": {"startDate": s.clone(), "endDate": s.clone()}})),
        5166305
    );
}

/// dateTrunc/: bins count from 2000-01-01 local; week bins from "the first day of the week,
/// not earlier than 2000-01-01" (Monday 2000-01-03 here), as the page's Behavior section says.
#[test]
fn date_trunc_bins() {
    let t = |d: &str, more: Document| {
        let mut args = doc! {"date": date(d)};
        args.extend(more);
        ev(bson!({"$dateTrunc": args})).unwrap()
    };
    assert_eq!(
        t(
            "2020-05-18T14:10:30Z",
            doc! {"unit": "week", "binSize": 2, "timezone": "America/Los_Angeles", "startOfWeek": "Monday"}
        ),
        date("2020-05-11T07:00:00Z")
    );
    assert_eq!(
        t(
            "2000-01-04T12:00:00Z",
            doc! {"unit": "week", "binSize": 2, "startOfWeek": "mon"}
        ),
        date("2000-01-03T00:00:00Z")
    );
    assert_eq!(
        t(
            "2000-01-02T12:00:00Z",
            doc! {"unit": "week", "binSize": 2, "startOfWeek": "mon"}
        ),
        date("1999-12-20T00:00:00Z")
    );
    assert_eq!(
        t("2021-03-20T11:30:05Z", doc! {"unit": "month"}),
        date("2021-03-01T00:00:00Z")
    );
    assert_eq!(
        t("2021-03-20T11:30:05Z", doc! {"unit": "quarter"}),
        date("2021-01-01T00:00:00Z")
    );
    assert_eq!(
        t("2021-03-20T11:30:05Z", doc! {"unit": "year", "binSize": 5}),
        date("2020-01-01T00:00:00Z")
    );
    assert_eq!(
        t("2021-03-20T11:30:05Z", doc! {"unit": "hour", "binSize": 6}),
        date("2021-03-20T06:00:00Z")
    );
    // Fixed units count from 2000-01-01 local with that day's offset: in New York (UTC-5 then)
    // two-hour bins start at odd UTC hours, in summer too.
    assert_eq!(
        t(
            "2021-07-01T12:30:00Z",
            doc! {"unit": "hour", "binSize": 2, "timezone": "America/New_York"}
        ),
        date("2021-07-01T11:00:00Z")
    );
    assert_eq!(
        code(
            bson!({"$dateTrunc": {"date": date("2021-07-01T12:30:00Z"), "unit": "day", "binSize": 200_000_000_000i64}})
        ),
        5439006
    );
    assert_eq!(
        t("2021-03-20T11:30:05.5Z", doc! {"unit": "second"}),
        date("2021-03-20T11:30:05Z")
    );
    assert_eq!(
        t(
            "2021-03-20T11:30:05Z",
            doc! {"unit": "day", "timezone": "+05:30"}
        ),
        date("2021-03-19T18:30:00Z")
    );
    // Weeks start on Sunday unless told otherwise; 2021-03-20 was a Saturday.
    assert_eq!(
        t("2021-03-20T11:30:05Z", doc! {"unit": "week"}),
        date("2021-03-14T00:00:00Z")
    );
    assert_eq!(
        t(
            "2021-03-20T11:30:05Z",
            doc! {"unit": "week", "binSize": null}
        ),
        Bson::Null
    );
    let d = date("2021-03-20T11:30:05Z");
    assert_eq!(
        code(bson!({"$dateTrunc": {"date": d.clone(), "unit": "day", "binSize": 0}})),
        5439018
    );
    assert_eq!(
        code(bson!({"$dateTrunc": {"date": d.clone(), "unit": "day", "binSize": "2"}})),
        5439017
    );
    assert_eq!(
        code(bson!({"$dateTrunc": {"date": 1, "unit": "day"}})),
        5166307
    );
    assert_eq!(code(bson!({"$dateTrunc": {"unit": "day"}})), 5439009);
    assert_eq!(code(bson!({"$dateTrunc": {"date": d.clone()}})), 5439010);
    assert_eq!(
        code(bson!({"$dateTrunc": {"date": d.clone(), "unit": "day", "x": 1}})),
        5439008
    );
}

proptest::proptest! {
    /// Formatting a date with every field and parsing it back gives the same instant, in any
    /// fixed offset.
    #[test]
    fn format_then_parse_round_trips(ms in -62_135_596_800_000i64..253_402_300_799_999, off_min in -840i64..840) {
        let tz = if off_min < 0 { format!("-{:02}{:02}", -off_min / 60, -off_min % 60) } else { format!("+{:02}{:02}", off_min / 60, off_min % 60) };
        let d = Bson::DateTime(DateTime::from_millis(ms));
        let fmt = "%Y-%m-%dT%H:%M:%S.%L";
        let s = ds(bson!({"$dateToString": {"date": d.clone(), "format": fmt, "timezone": tz.clone()}}));
        let back = ev(bson!({"$dateFromString": {"dateString": s, "format": fmt, "timezone": tz}}));
        proptest::prop_assert_eq!(back, Some(d.clone()));
        let iso = ds(bson!({"$dateToString": {"date": d.clone(), "format": "%G-%V-%u %H:%M:%S.%L"}}));
        let back = ev(bson!({"$dateFromString": {"dateString": iso, "format": "%G-%V-%u %H:%M:%S.%L"}}));
        proptest::prop_assert_eq!(back, Some(d));
    }
}

/// Every operator on `ms` in every unit and a few zones: an answer or an error, never a panic.
fn every_date_operator_on(ms: i64) {
    let d = Bson::DateTime(DateTime::from_millis(ms));
    for unit in [
        "year",
        "quarter",
        "month",
        "week",
        "day",
        "hour",
        "second",
        "millisecond",
    ] {
        for tz in ["UTC", "America/New_York", "+14:00", "-12"] {
            let exprs = [
                bson!({"$dateTrunc": {"date": d.clone(), "unit": unit, "binSize": 3, "timezone": tz}}),
                bson!({"$dateDiff": {"startDate": d.clone(), "endDate": DateTime::from_millis(0), "unit": unit, "timezone": tz}}),
                bson!({"$dateAdd": {"startDate": d.clone(), "unit": unit, "amount": 1, "timezone": tz}}),
                bson!({"$dateSubtract": {"startDate": d.clone(), "unit": unit, "amount": 1, "timezone": tz}}),
                bson!({"$dateToParts": {"date": d.clone(), "timezone": tz, "iso8601": true}}),
                bson!({"$isoWeekYear": {"date": d.clone(), "timezone": tz}}),
                bson!({"$dateToString": {"date": d.clone(), "timezone": tz, "format": "%G %V %u %j %U %w %z %Z %b"}}),
            ];
            for e in exprs {
                let _ = parse_expr(&e).unwrap().eval_root(&doc! {});
            }
        }
    }
}

/// The extreme dates BSON can hold never overflow the arithmetic.
#[test]
fn extreme_dates_do_not_overflow() {
    for ms in [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX - 1, i64::MAX] {
        every_date_operator_on(ms);
    }
}

proptest::proptest! {
    #[test]
    fn any_date_gets_an_answer_or_an_error(ms in proptest::num::i64::ANY) {
        every_date_operator_on(ms);
    }
}
