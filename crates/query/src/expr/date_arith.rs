//! Date arithmetic: `$dateAdd`, `$dateSubtract`, `$dateDiff` and `$dateTrunc`, with mongod's
//! time units and `startOfWeek`.

use super::args::NamedArgs;
use super::date::{date_ms, days_from_civil, days_in_month, eval_tz, Civil, MS_PER_DAY};
use super::op::Op;
use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Year,
    Quarter,
    Month,
    Week,
    Day,
    Hour,
    Minute,
    Second,
    Millisecond,
}

impl Unit {
    /// The length of a fixed-length unit in milliseconds (`None` for calendar units).
    fn fixed_ms(self) -> Option<i64> {
        match self {
            Unit::Hour => Some(3_600_000),
            Unit::Minute => Some(60_000),
            Unit::Second => Some(1000),
            Unit::Millisecond => Some(1),
            _ => None,
        }
    }

    /// The length of a month-based unit in months.
    fn months(self) -> Option<i64> {
        match self {
            Unit::Year => Some(12),
            Unit::Quarter => Some(3),
            Unit::Month => Some(1),
            _ => None,
        }
    }
}

/// A `unit` value: 5439013 for a non-string, FailedToParse for an unknown unit.
fn unit_of(op: &str, v: &Bson) -> DocResult<Unit> {
    let Bson::String(s) = v else {
        return Err(DocError::with_code(
            5439013,
            "Location5439013",
            format!(
                "{op} requires 'unit' to be a string, but got {}",
                type_name(v)
            ),
        ));
    };
    Ok(match s.as_str() {
        "year" => Unit::Year,
        "quarter" => Unit::Quarter,
        "month" => Unit::Month,
        "week" => Unit::Week,
        "day" => Unit::Day,
        "hour" => Unit::Hour,
        "minute" => Unit::Minute,
        "second" => Unit::Second,
        "millisecond" => Unit::Millisecond,
        _ => {
            return Err(DocError::failed_to_parse(format!(
                "unknown time unit value: {s}"
            )))
        }
    })
}

/// A `startOfWeek` value as 0 = Monday … 6 = Sunday: full or three-letter day names in any
/// case (5439015 for a non-string, 5439016 for anything else).
fn start_of_week(op: &str, v: &Bson) -> DocResult<i64> {
    let Bson::String(s) = v else {
        return Err(DocError::with_code(
            5439015,
            "Location5439015",
            format!(
                "{op} requires 'startOfWeek' to be a string, but got {}",
                type_name(v)
            ),
        ));
    };
    const DAYS: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let lower = s.to_ascii_lowercase();
    DAYS.iter()
        .position(|d| *d == lower || d[..3] == lower)
        .map(|i| i as i64)
        .ok_or_else(|| {
            DocError::with_code(
                5439016,
                "Location5439016",
                format!(
                    "{op} parameter 'startOfWeek' value cannot be recognized as a day of a week: {s}"
                ),
            )
        })
}

/// The week (counted from the epoch) holding local day `days`, weeks starting on `sow`.
fn week_index(days: i64, sow: i64) -> i64 {
    // 1970-01-01 was a Thursday (3 with Monday = 0).
    (days + 3 - sow).div_euclid(7)
}

/// Evaluates the named argument `name`; `Ok(None)` when it is null or missing.
fn present(args: &NamedArgs, name: &str, ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(args
        .eval(name, ctx)?
        .filter(|v| !matches!(v, Bson::Null | Bson::Undefined)))
}

/// The `startOfWeek` of a `week` unit (Sunday when absent); `Ok(None)` when it is null.
fn week_start(op: &str, args: &NamedArgs, unit: Unit, ctx: &Ctx) -> DocResult<Option<i64>> {
    if unit != Unit::Week || args.get("startOfWeek").is_none() {
        return Ok(Some(6));
    }
    present(args, "startOfWeek", ctx)?
        .map(|v| start_of_week(op, &v))
        .transpose()
}

/// Adds `n` months in local time; a day past the new month's end becomes its last day.
fn add_months(local_ms: i64, n: i64) -> Option<i64> {
    let c = Civil::of(local_ms);
    let months = (c.year * 12 + c.month as i64 - 1).checked_add(n)?;
    let (y, m) = (months.div_euclid(12), months.rem_euclid(12) as u32 + 1);
    let d = c.day.min(days_in_month(y, m));
    let tod = local_ms.rem_euclid(MS_PER_DAY);
    days_from_civil(y, m, d)
        .checked_mul(MS_PER_DAY)?
        .checked_add(tod)
}

/// The largest `amount` of `unit` mongod's `$dateAdd` accepts (its range of a date, roughly);
/// milliseconds are only checked for overflow.
fn max_amount(unit: Unit) -> Option<i64> {
    let max_days = (u64::MAX / MS_PER_DAY as u64 + 1) as i64;
    let max_years = max_days / 365 + 1;
    Some(match unit {
        Unit::Year => max_years,
        Unit::Quarter => max_years * 4,
        Unit::Month => max_years * 12,
        Unit::Week => max_days / 7,
        Unit::Day => max_days,
        Unit::Hour => max_days * 24,
        Unit::Minute => max_days * 24 * 60,
        Unit::Second => max_days * 24 * 3600,
        Unit::Millisecond => return None,
    })
}

/// `$dateAdd`, `$dateSubtract`: `{startDate, unit, amount, timezone}`.
pub(super) fn date_add(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    let (Some(start), Some(unit_value), Some(amount)) = (
        present(args, "startDate", ctx)?,
        present(args, "unit", ctx)?,
        present(args, "amount", ctx)?,
    ) else {
        return Ok(Some(Bson::Null));
    };
    let Some(tz) = eval_tz(args.get("timezone"), ctx)? else {
        return Ok(Some(Bson::Null));
    };
    let start = date_ms(&start).map_err(|_| {
        DocError::with_code(
            5166403,
            "Location5166403",
            format!("{name} requires startDate to be convertible to a date"),
        )
    })?;
    let unit = unit_of(name, &unit_value)?;
    let mut n = Num::of(&amount)
        .and_then(Num::as_i64_exact)
        .ok_or_else(|| {
            DocError::with_code(
                5166405,
                "Location5166405",
                format!("{name} expects integer amount of time units"),
            )
        })?;
    let overflow = || DocError::with_code(5166406, "Location5166406", "dateAdd overflowed");
    if op == Op::DateSubtract {
        n = n.checked_neg().ok_or_else(|| {
            DocError::with_code(
                6045000,
                "Location6045000",
                format!("invalid $dateSubtract 'amount' parameter value: {n}"),
            )
        })?;
    }
    if let Some(max) = max_amount(unit) {
        if !(-max < n && n < max) {
            return Err(DocError::with_code(
                5976500,
                "Location5976500",
                format!(
                    "invalid dateAdd 'amount' parameter value: {n} {}",
                    unit_value.as_str().unwrap_or_default()
                ),
            ));
        }
    }
    let result = match (unit.fixed_ms(), unit.months()) {
        (Some(ms), _) => n.checked_mul(ms).and_then(|d| start.checked_add(d)),
        (None, Some(months)) => n
            .checked_mul(months)
            .and_then(|m| add_months(tz.to_local(start), m))
            .map(|l| tz.to_utc(l)),
        (None, None) => {
            let days = if unit == Unit::Week {
                n.checked_mul(7)
            } else {
                Some(n)
            };
            days.and_then(|d| d.checked_mul(MS_PER_DAY))
                .and_then(|d| tz.to_local(start).checked_add(d))
                .map(|l| tz.to_utc(l))
        }
    };
    Ok(Some(Bson::DateTime(DateTime::from_millis(
        result.ok_or_else(overflow)?,
    ))))
}

/// `$dateDiff`: `{startDate, endDate, unit, timezone, startOfWeek}`, counting the unit
/// boundaries crossed between the two dates in local time (so 23:59 to 00:01 is one day).
pub(super) fn date_diff(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    let (Some(start), Some(end), Some(unit)) = (
        present(args, "startDate", ctx)?,
        present(args, "endDate", ctx)?,
        present(args, "unit", ctx)?,
    ) else {
        return Ok(Some(Bson::Null));
    };
    let Some(tz) = eval_tz(args.get("timezone"), ctx)? else {
        return Ok(Some(Bson::Null));
    };
    let as_date = |v: &Bson, which: &str| {
        date_ms(v).map_err(|_| {
            DocError::with_code(
                5166307,
                "Location5166307",
                format!(
                    "{name} requires '{which}' to be a date, but got {}",
                    type_name(v)
                ),
            )
        })
    };
    let (start, end) = (as_date(&start, "startDate")?, as_date(&end, "endDate")?);
    let unit = unit_of(name, &unit)?;
    let Some(sow) = week_start(name, args, unit, ctx)? else {
        return Ok(Some(Bson::Null));
    };
    let (a, b) = (Civil::of(tz.to_local(start)), Civil::of(tz.to_local(end)));
    let diff = match unit {
        Unit::Year => b.year - a.year,
        Unit::Quarter => {
            (b.year * 4 + (b.month as i64 - 1) / 3) - (a.year * 4 + (a.month as i64 - 1) / 3)
        }
        Unit::Month => (b.year * 12 + b.month as i64) - (a.year * 12 + a.month as i64),
        Unit::Week => week_index(b.days, sow) - week_index(a.days, sow),
        Unit::Day => b.days - a.days,
        Unit::Millisecond => end.checked_sub(start).ok_or_else(|| {
            DocError::with_code(5166308, "Location5166308", "dateDiff overflowed")
        })?,
        fixed => {
            // Boundaries crossed in local time, corrected by the change of UTC offset between
            // the two dates (as mongod: across a DST change an hour still counts once).
            let ms = fixed.fixed_ms().expect("fixed unit");
            let (off_a, off_b) = (tz.offset_at(start), tz.offset_at(end));
            tz.to_local(end).div_euclid(ms) - tz.to_local(start).div_euclid(ms)
                + (off_a - off_b) / ms
        }
    };
    Ok(Some(Bson::Int64(diff)))
}

/// 2000-01-01T00:00:00Z.
const REFERENCE_MS: i64 = 946_684_800_000;

/// 2000-01-01T00:00 local, the point bins of `$dateTrunc` count from, in days.
fn reference_days() -> i64 {
    days_from_civil(2000, 1, 1)
}

/// `$dateTrunc`: `{date, unit, binSize, timezone, startOfWeek}`: the start of the
/// `binSize`-unit bin holding `date`, bins counted from 2000-01-01 in local time (for weeks,
/// from the first `startOfWeek` on or after it).
pub(super) fn date_trunc(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    let (Some(date), Some(unit)) = (present(args, "date", ctx)?, present(args, "unit", ctx)?)
    else {
        return Ok(Some(Bson::Null));
    };
    let bin = if args.get("binSize").is_some() {
        match present(args, "binSize", ctx)? {
            Some(b) => bin_size(&b)?,
            None => return Ok(Some(Bson::Null)),
        }
    } else {
        1
    };
    let Some(tz) = eval_tz(args.get("timezone"), ctx)? else {
        return Ok(Some(Bson::Null));
    };
    let date = date_ms(&date).map_err(|_| {
        DocError::with_code(
            5166307,
            "Location5166307",
            format!(
                "{name} requires 'date' to be a date, but got {}",
                type_name(&date)
            ),
        )
    })?;
    let unit = unit_of(name, &unit)?;
    let Some(sow) = week_start(name, args, unit, ctx)? else {
        return Ok(Some(Bson::Null));
    };
    let overflow = || DocError::with_code(5439000, "Location5439000", "dateTrunc overflowed");
    if unit.fixed_ms().is_none() && bin > 100_000_000_000 {
        return Err(DocError::with_code(
            5439006,
            "Location5439006",
            "dateTrunc unsupported binSize value",
        ));
    }
    let local = tz.to_local(date);
    let result = match (unit.fixed_ms(), unit.months()) {
        (Some(ms), _) => {
            // Bins are counted on UTC instants from 2000-01-01T00:00 local with the offset in
            // force then (as mongod), so in a zone with DST an hour bin does not move with it.
            let span = bin.checked_mul(ms).ok_or_else(overflow)?;
            let origin = REFERENCE_MS - tz.offset_at(REFERENCE_MS);
            let shifted = date.checked_sub(origin).ok_or_else(overflow)?;
            date.checked_sub(shifted.rem_euclid(span))
                .ok_or_else(overflow)?
        }
        (None, Some(months)) => {
            let c = Civil::of(local);
            let span = bin.checked_mul(months).ok_or_else(overflow)?;
            let origin = 2000 * 12;
            let m = origin + (c.year * 12 + c.month as i64 - 1 - origin).div_euclid(span) * span;
            let days = days_from_civil(m.div_euclid(12), m.rem_euclid(12) as u32 + 1, 1);
            tz.to_utc(days.checked_mul(MS_PER_DAY).ok_or_else(overflow)?)
        }
        (None, None) => {
            let c = Civil::of(local);
            let (origin, span) = if unit == Unit::Week {
                let r = reference_days();
                // The first startOfWeek on or after 2000-01-01.
                let shift = (sow - (r + 3).rem_euclid(7)).rem_euclid(7);
                (r + shift, bin.checked_mul(7).ok_or_else(overflow)?)
            } else {
                (reference_days(), bin)
            };
            let days = origin + (c.days - origin).div_euclid(span) * span;
            tz.to_utc(days.checked_mul(MS_PER_DAY).ok_or_else(overflow)?)
        }
    };
    Ok(Some(Bson::DateTime(DateTime::from_millis(result))))
}

/// A `binSize`: a positive integral number (5439017, 5439018).
fn bin_size(v: &Bson) -> DocResult<i64> {
    let n = Num::of(v).and_then(Num::as_i64_exact).ok_or_else(|| {
        DocError::with_code(
            5439017,
            "Location5439017",
            format!(
                "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '{}' of type {}",
                shell_repr(v),
                type_name(v)
            ),
        )
    })?;
    if n <= 0 {
        return Err(DocError::with_code(
            5439018,
            "Location5439018",
            format!("$dateTrunc requires 'binSize' to be greater than 0, but got value {n}"),
        ));
    }
    Ok(n)
}
