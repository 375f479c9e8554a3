//! Dates: the `timezone` argument (Olson names from the zone database in use, `zones`, or fixed
//! `±HH`, `±HHMM`, `±HH:MM` offsets), the calendar breakdown of an instant, the date part
//! operators (`$year` … `$isoWeekYear`, each with `{date, timezone}`), `$dateToParts` and
//! `$dateFromParts`. Formatting and parsing live in `date_fmt.rs`, arithmetic in `date_arith.rs`.
//!
//! Calendar arithmetic is done here on days since the epoch (proleptic Gregorian, as mongod's
//! timelib), so it covers every BSON date; jiff answers only "what is the offset at this instant"
//! and "which instant has this local time".

use jiff::tz::TimeZone;

use super::args::{Args, NamedArgs};
use super::op::Op;
use super::zones;
use super::*;

pub(super) const MS_PER_DAY: i64 = 86_400_000;

/// The instants `jiff::Timestamp::from_millisecond` accepts (its ±9999-year range, narrowed by
/// the largest UTC offsets; `Timestamp::MIN.as_millisecond()` is outside it).
const JIFF_MIN_MS: i64 = -377_705_023_201_000;
const JIFF_MAX_MS: i64 = 253_402_207_200_000;

/// A `timezone` argument.
#[derive(Clone, Debug)]
pub(super) enum Tz {
    /// A fixed offset from UTC, in milliseconds.
    Fixed(i64),
    Zone(TimeZone),
}

impl Tz {
    pub const UTC: Tz = Tz::Fixed(0);

    /// Parses an Olson name or a UTC offset; anything else is mongod's 40485.
    pub fn parse(s: &str) -> DocResult<Tz> {
        if let Some(off) = parse_utc_offset(s) {
            return Ok(Tz::Fixed(off));
        }
        zones::lookup(s).map(Tz::Zone).ok_or_else(|| {
            DocError::with_code(
                40485,
                "Location40485",
                format!("unrecognized time zone identifier: \"{s}\""),
            )
        })
    }

    /// mongod's "UTC zone": `UTC` or a zero offset, not `GMT` or `Etc/UTC` (the default format
    /// of `$dateToString` ends in `Z` only then, and only then may `$dateFromString`'s string
    /// carry its own offset).
    pub fn is_utc(&self) -> bool {
        match self {
            Tz::Fixed(o) => *o == 0,
            Tz::Zone(tz) => tz.iana_name() == Some("UTC"),
        }
    }

    /// The offset from UTC, in milliseconds, in force at the instant `utc_ms`.
    pub fn offset_at(&self, utc_ms: i64) -> i64 {
        match self {
            Tz::Fixed(o) => *o,
            Tz::Zone(tz) => {
                // Outside jiff's range (years ±9999) the offset at the nearest end holds.
                let clamped = utc_ms.clamp(JIFF_MIN_MS, JIFF_MAX_MS);
                let ts = jiff::Timestamp::from_millisecond(clamped).expect("clamped into range");
                tz.to_offset(ts).seconds() as i64 * 1000
            }
        }
    }

    /// The local wall-clock time (as milliseconds on a UTC calendar) of the instant `utc_ms`.
    pub fn to_local(&self, utc_ms: i64) -> i64 {
        utc_ms.saturating_add(self.offset_at(utc_ms))
    }

    /// The instant whose local time is `local_ms`. A time that falls in a gap moves forward
    /// past it and an ambiguous time takes the earlier instant (jiff's "compatible" rule).
    pub fn to_utc(&self, local_ms: i64) -> i64 {
        match self {
            Tz::Fixed(o) => local_ms.saturating_sub(*o),
            Tz::Zone(tz) => match civil_datetime(local_ms) {
                Some(dt) => match tz.to_ambiguous_timestamp(dt).compatible() {
                    Ok(ts) => ts.as_millisecond(),
                    Err(_) => local_ms - self.offset_at(local_ms),
                },
                None => local_ms.saturating_sub(self.offset_at(local_ms)),
            },
        }
    }
}

/// `+HH`, `+HHMM` or `+HH:MM` (or `-`) as milliseconds, as mongod accepts them.
fn parse_utc_offset(s: &str) -> Option<i64> {
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let rest = &s[1..];
    let digits = |t: &str| -> Option<i64> {
        (t.len() == 2 && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse().ok())?
    };
    let (h, m) = match rest.len() {
        2 => (digits(rest)?, 0),
        4 => (digits(&rest[..2])?, digits(&rest[2..])?),
        5 if rest.as_bytes()[2] == b':' => (digits(&rest[..2])?, digits(&rest[3..])?),
        _ => return None,
    };
    (m < 60).then_some(sign * (h * 3_600_000 + m * 60_000))
}

/// The jiff civil time of a local time, if it is within jiff's years ±9999.
fn civil_datetime(local_ms: i64) -> Option<jiff::civil::DateTime> {
    let c = Civil::of(local_ms);
    jiff::civil::DateTime::new(
        i16::try_from(c.year).ok()?,
        c.month as i8,
        c.day as i8,
        c.hour as i8,
        c.minute as i8,
        c.second as i8,
        c.millis as i32 * 1_000_000,
    )
    .ok()
}

/// Evaluates an optional `timezone` argument: UTC when absent, `None` when it evaluates to
/// null or missing (the operator's result is then null).
pub(super) fn eval_tz(e: Option<&Expr>, ctx: &Ctx) -> DocResult<Option<Tz>> {
    match e {
        None => Ok(Some(Tz::UTC)),
        Some(e) => tz_of(&e.eval(ctx)?),
    }
}

/// A `timezone` value: null for null or missing, 40517 for a non-string.
pub(super) fn tz_of(v: &Option<Bson>) -> DocResult<Option<Tz>> {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::String(s)) => Tz::parse(s).map(Some),
        Some(other) => Err(DocError::with_code(
            40517,
            "Location40517",
            format!(
                "timezone must evaluate to a string, found {}",
                type_name(other)
            ),
        )),
    }
}

/// Milliseconds since the epoch of a date, a timestamp (its seconds) or an ObjectId (its
/// creation second), as mongod coerces them; anything else is 16006.
pub(super) fn date_ms(v: &Bson) -> DocResult<i64> {
    match v {
        Bson::DateTime(d) => Ok(d.timestamp_millis()),
        Bson::Timestamp(t) => Ok(t.time as i64 * 1000),
        Bson::ObjectId(o) => Ok(o.timestamp().timestamp_millis()),
        other => Err(DocError::with_code(
            16006,
            "Location16006",
            format!("can't convert from BSON type {} to Date", type_name(other)),
        )),
    }
}

/// The calendar fields of a local time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Civil {
    /// Days since 1970-01-01 of this local date.
    pub days: i64,
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millis: u32,
}

impl Civil {
    pub fn of(local_ms: i64) -> Civil {
        let days = local_ms.div_euclid(MS_PER_DAY);
        let msd = local_ms.rem_euclid(MS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        Civil {
            days,
            year,
            month,
            day,
            hour: (msd / 3_600_000) as u32,
            minute: (msd / 60_000 % 60) as u32,
            second: (msd / 1000 % 60) as u32,
            millis: (msd % 1000) as u32,
        }
    }

    /// 1 = Sunday … 7 = Saturday (`$dayOfWeek`, `%w`).
    pub fn day_of_week(&self) -> u32 {
        // 1970-01-01 was a Thursday.
        ((self.days + 4).rem_euclid(7) + 1) as u32
    }

    /// 1 = Monday … 7 = Sunday (`$isoDayOfWeek`, `%u`).
    pub fn iso_day_of_week(&self) -> u32 {
        iso_dow(self.days)
    }

    /// 1 … 366.
    pub fn day_of_year(&self) -> u32 {
        (self.days - days_from_civil(self.year, 1, 1) + 1) as u32
    }

    /// 0 … 53: weeks start on Sunday and days before the year's first Sunday are week 0
    /// (`$week`, `%U`).
    pub fn week(&self) -> u32 {
        (self.day_of_year() - 1 + 7 - (self.day_of_week() - 1)) / 7
    }

    /// The ISO 8601 week-numbering year and week (1 … 53): weeks start on Monday and week 1
    /// holds the year's first Thursday.
    pub fn iso_week(&self) -> (i64, u32) {
        let thursday = self.days - (self.iso_day_of_week() as i64 - 1) + 3;
        let (iso_year, _, _) = civil_from_days(thursday);
        let week = (thursday - days_from_civil(iso_year, 1, 1)) / 7 + 1;
        (iso_year, week as u32)
    }
}

pub(super) fn iso_dow(days: i64) -> u32 {
    ((days + 3).rem_euclid(7) + 1) as u32
}

/// Days since the epoch of the Monday that starts ISO week 1 of `iso_year`.
pub(super) fn iso_week1_monday(iso_year: i64) -> i64 {
    let jan4 = days_from_civil(iso_year, 1, 4);
    jan4 - (iso_dow(jan4) as i64 - 1)
}

pub(super) fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

pub(super) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

pub(super) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub(super) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// The date part operators, `$year` … `$isoWeekYear`: `[date]`, `date` or
/// `{date, timezone}` (parsed to one or two positional arguments).
pub(super) fn date_part_of(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    // As mongod: a null date is null, then the date is checked, then the zone.
    let Some(date) = args.v(0).as_ref().filter(|_| !is_nullish(args.v(0))) else {
        return Ok(Some(Bson::Null));
    };
    let ms = date_ms(date)?;
    let tz = match args.vals.get(1) {
        None => Tz::UTC,
        Some(v) => match tz_of(v)? {
            Some(tz) => tz,
            None => return Ok(Some(Bson::Null)),
        },
    };
    Ok(Some(date_part(op, &Civil::of(tz.to_local(ms)))))
}

fn date_part(op: Op, c: &Civil) -> Bson {
    let v = match op {
        Op::Year => c.year,
        Op::Month => c.month as i64,
        Op::DayOfMonth => c.day as i64,
        Op::Hour => c.hour as i64,
        Op::Minute => c.minute as i64,
        Op::Second => c.second as i64,
        Op::Millisecond => c.millis as i64,
        Op::DayOfWeek => c.day_of_week() as i64,
        Op::DayOfYear => c.day_of_year() as i64,
        Op::Week => c.week() as i64,
        Op::IsoWeek => c.iso_week().1 as i64,
        Op::IsoDayOfWeek => c.iso_day_of_week() as i64,
        // mongod answers `$isoWeekYear` as a long.
        Op::IsoWeekYear => return Bson::Int64(c.iso_week().0),
        _ => unreachable!("{} is not a date part operator", op.name()),
    };
    Bson::Int32(v as i32)
}

/// `$dateToParts`: `{date, timezone, iso8601}`.
pub(super) fn date_to_parts(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let date = args.eval("date", ctx)?;
    let Some(tz) = eval_tz(args.get("timezone"), ctx)? else {
        return Ok(Some(Bson::Null));
    };
    let iso = match args.eval("iso8601", ctx)? {
        None if args.get("iso8601").is_none() => false,
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Boolean(b)) => b,
        Some(other) => {
            return Err(DocError::with_code(
                40521,
                "Location40521",
                format!(
                    "iso8601 must evaluate to a bool, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    let Some(date) = date.filter(|d| !matches!(d, Bson::Null | Bson::Undefined)) else {
        return Ok(Some(Bson::Null));
    };
    let c = Civil::of(tz.to_local(date_ms(&date)?));
    let mut d = Document::new();
    if iso {
        let (y, w) = c.iso_week();
        d.insert("isoWeekYear", y as i32);
        d.insert("isoWeek", w as i32);
        d.insert("isoDayOfWeek", c.iso_day_of_week() as i32);
    } else {
        d.insert("year", c.year as i32);
        d.insert("month", c.month as i32);
        d.insert("day", c.day as i32);
    }
    d.insert("hour", c.hour as i32);
    d.insert("minute", c.minute as i32);
    d.insert("second", c.second as i32);
    d.insert("millisecond", c.millis as i32);
    Ok(Some(Bson::Document(d)))
}

const CALENDAR_PARTS: [&str; 3] = ["year", "month", "day"];
const ISO_PARTS: [&str; 3] = ["isoWeekYear", "isoWeek", "isoDayOfWeek"];
const TIME_PARTS: [&str; 4] = ["hour", "minute", "second", "millisecond"];

/// Parse-time checks of `$dateFromParts`: a year of one kind, and not both kinds.
pub(super) fn check_date_from_parts(args: &[(String, Expr)]) -> DocResult<()> {
    let has = |k: &str| args.iter().any(|(n, _)| n == k);
    let calendar = CALENDAR_PARTS.iter().any(|k| has(k));
    let iso = ISO_PARTS.iter().any(|k| has(k));
    if calendar && iso {
        return Err(DocError::with_code(
            40489,
            "Location40489",
            "$dateFromParts does not allow mixing natural dates with ISO dates",
        ));
    }
    if !has("year") && !has("isoWeekYear") {
        return Err(DocError::with_code(
            40516,
            "Location40516",
            "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
        ));
    }
    Ok(())
}

/// `$dateFromParts`: calendar (`year`, `month`, `day`) or ISO (`isoWeekYear`, `isoWeek`,
/// `isoDayOfWeek`) date, then `hour` … `millisecond`, in `timezone`. Parts beyond their range
/// carry into the next larger one, as in mongod (month 14 is February of the next year, day 0
/// the last day of the previous month).
pub(super) fn date_from_parts(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    // mongod's order: the time parts, the zone, then the date parts; a null anywhere is null.
    let mut time = [0i64; 4];
    for (i, name) in TIME_PARTS.iter().enumerate() {
        match part_value(args, name, 0, ctx)? {
            Some(v) => time[i] = v,
            None => return Ok(Some(Bson::Null)),
        }
    }
    let Some(tz) = eval_tz(args.get("timezone"), ctx)? else {
        return Ok(Some(Bson::Null));
    };
    let iso = args.get("isoWeekYear").is_some();
    let mut date = [0i64; 3];
    for (i, name) in (if iso { ISO_PARTS } else { CALENDAR_PARTS })
        .iter()
        .enumerate()
    {
        match part_value(args, name, if i == 0 { 1970 } else { 1 }, ctx)? {
            Some(v) => date[i] = v,
            None => return Ok(Some(Bson::Null)),
        }
    }
    let [y, a, b] = date;
    if !(1..=9999).contains(&y) {
        let (code, code_name, name) = if iso {
            (31095, "Location31095", "isoWeekYear")
        } else {
            (40523, "Location40523", "year")
        };
        return Err(DocError::with_code(
            code,
            code_name,
            format!("'{name}' must evaluate to an integer in the range 1 to 9999, found {y}"),
        ));
    }
    let days = if iso {
        iso_week1_monday(y) + (a - 1) * 7 + (b - 1)
    } else {
        let months = y * 12 + (a - 1);
        days_from_civil(months.div_euclid(12), months.rem_euclid(12) as u32 + 1, 1) + (b - 1)
    };
    let [hour, minute, second, millis] = time.map(i128::from);
    // Seconds and milliseconds are unbounded: add in 128 bits and keep the result a date.
    let local = i128::from(days) * i128::from(MS_PER_DAY)
        + hour * 3_600_000
        + minute * 60_000
        + second * 1000
        + millis;
    let local = local.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    Ok(Some(Bson::DateTime(DateTime::from_millis(
        tz.to_utc(local),
    ))))
}

/// One part of `$dateFromParts`: `None` when null, the default when absent, else an integral
/// value (40515) that for the parts mongod bounds fits 16 bits (31034).
fn part_value(args: &NamedArgs, name: &str, default: i64, ctx: &Ctx) -> DocResult<Option<i64>> {
    if args.get(name).is_none() {
        return Ok(Some(default));
    }
    let v = match args.eval(name, ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(None),
        Some(v) => v,
    };
    let n = Num::of(&v).and_then(Num::as_i64_exact).ok_or_else(|| {
        DocError::with_code(
            40515,
            "Location40515",
            format!(
                "'{name}' must evaluate to an integer, found {} with value {}",
                type_name(&v),
                shell_repr(&v)
            ),
        )
    })?;
    let bounded = !matches!(name, "year" | "isoWeekYear" | "second" | "millisecond");
    if bounded && !(-32768..=32767).contains(&n) {
        return Err(DocError::with_code(
            31034,
            "Location31034",
            format!(
                "'{name}' must evaluate to a value in the range [-32768, 32767]; value {n} is not in range"
            ),
        ));
    }
    Ok(Some(n))
}
