//! `$dateToString` and `$dateFromString`: mongod's `%` format specifiers, both ways.

use super::args::NamedArgs;
use super::date::{
    date_ms, days_from_civil, days_in_month, eval_tz, iso_week1_monday, Civil, Tz, MS_PER_DAY,
};
use super::op::Op;
use super::*;

/// mongod's default formats: ISO 8601 with `Z` in UTC, without it in any other zone.
const ISO_FORMAT_Z: &str = "%Y-%m-%dT%H:%M:%S.%LZ";
const ISO_FORMAT_LOCAL: &str = "%Y-%m-%dT%H:%M:%S.%L";

/// The specifiers both `$dateToString` and `$dateFromString` understand.
const SPECIFIERS: &str = "bBdGHjLmMSuUVwYzZ%";

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Rejects a dangling `%` (18535) and an unknown specifier (18536).
pub(super) fn check_format(fmt: &str) -> DocResult<()> {
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            continue;
        }
        match it.next() {
            None => {
                return Err(DocError::with_code(
                    18535,
                    "Location18535",
                    "Unmatched '%' at end of format string",
                ))
            }
            Some(s) if SPECIFIERS.contains(s) => {}
            Some(s) => {
                return Err(DocError::with_code(
                    18536,
                    "Location18536",
                    format!("Invalid format character '%{s}' in format string"),
                ))
            }
        }
    }
    Ok(())
}

/// Formats the instant `utc_ms` in `tz` with a checked format.
pub(super) fn format_date(fmt: &str, utc_ms: i64, tz: &Tz) -> DocResult<String> {
    let offset_min = tz.offset_at(utc_ms) / 60_000;
    let c = Civil::of(tz.to_local(utc_ms));
    let mut out = String::with_capacity(fmt.len() + 8);
    let mut it = fmt.chars();
    while let Some(ch) = it.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        let spec = it.next().expect("format was checked");
        let (v, width) = match spec {
            'd' => (c.day as i64, 2),
            'G' => (four_digit_year(c.iso_week().0)?, 4),
            'H' => (c.hour as i64, 2),
            'j' => (c.day_of_year() as i64, 3),
            'L' => (c.millis as i64, 3),
            'm' => (c.month as i64, 2),
            'M' => (c.minute as i64, 2),
            'S' => (c.second as i64, 2),
            'u' => (c.iso_day_of_week() as i64, 1),
            'U' => (c.week() as i64, 2),
            'V' => (c.iso_week().1 as i64, 2),
            'w' => (c.day_of_week() as i64, 1),
            'Y' => (four_digit_year(c.year)?, 4),
            'z' => {
                let a = offset_min.abs();
                let sign = if offset_min < 0 { '-' } else { '+' };
                out.push_str(&format!("{sign}{:02}{:02}", a / 60, a % 60));
                continue;
            }
            'Z' => {
                // A plain signed number, as mongod writes it: "270", "-300", "0".
                out.push_str(&offset_min.to_string());
                continue;
            }
            '%' => {
                out.push('%');
                continue;
            }
            'b' | 'B' => {
                let month = MONTHS[c.month as usize - 1];
                out.push_str(if spec == 'b' { &month[..3] } else { month });
                continue;
            }
            other => unreachable!("format was checked: %{other}"),
        };
        out.push_str(&format!("{v:0width$}"));
    }
    Ok(out)
}

fn four_digit_year(y: i64) -> DocResult<i64> {
    if (0..=9999).contains(&y) {
        return Ok(y);
    }
    Err(DocError::with_code(
        18537,
        "Location18537",
        format!(
            "Could not convert date to string: date component was outside the supported range of 0-9999: {y}"
        ),
    ))
}

/// A string-valued argument that may be null: `Ok(None)` for null or missing.
fn string_arg(
    args: &NamedArgs,
    name: &str,
    ctx: &Ctx,
    (code, code_name): (i32, &'static str),
    op: &str,
) -> DocResult<Option<String>> {
    match args.eval(name, ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::String(s)) => Ok(Some(s)),
        Some(other) => Err(DocError::with_code(
            code,
            code_name,
            format!(
                "{op} requires that '{name}' be a string, found: {} with value {}",
                type_name(&other),
                shell_repr(&other)
            ),
        )),
    }
}

/// `$dateToString`: `{date, format, timezone, onNull}`.
pub(super) fn date_to_string(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    // mongod's order: a bad format or zone is an error even for a null date; then a null date
    // is `onNull`; then a null zone or format is null.
    let date = args.eval("date", ctx)?;
    let format = optional_format(args, ctx, (18533, "Location18533"), "$dateToString")?;
    let tz = eval_tz(args.get("timezone"), ctx)?;
    if is_nullish(&date) {
        return on_null(args, ctx);
    }
    let (Some(tz), Some(format)) = (tz, format) else {
        return Ok(Some(Bson::Null));
    };
    let ms = date_ms(date.as_ref().expect("not nullish"))?;
    let fmt = format.as_deref().unwrap_or(if tz.is_utc() {
        ISO_FORMAT_Z
    } else {
        ISO_FORMAT_LOCAL
    });
    Ok(Some(Bson::String(format_date(fmt, ms, &tz)?)))
}

/// The `format` argument: `Some(None)` when absent, `None` when null, else a checked format.
fn optional_format(
    args: &NamedArgs,
    ctx: &Ctx,
    code: (i32, &'static str),
    op: &str,
) -> DocResult<Option<Option<String>>> {
    if args.get("format").is_none() {
        return Ok(Some(None));
    }
    let Some(f) = string_arg(args, "format", ctx, code, op)? else {
        return Ok(None);
    };
    check_format(&f)?;
    Ok(Some(Some(f)))
}

/// The `onNull` argument's value, or null.
fn on_null(args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    match args.get("onNull") {
        Some(e) => e.eval(ctx),
        None => Ok(Some(Bson::Null)),
    }
}

/// `$dateFromString`: `{dateString, format, timezone, onError, onNull}`. A string that does
/// not parse is 241 (ConversionFailure) unless `onError` is given.
pub(super) fn date_from_string(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    // mongod's order, as `$dateToString`; only errors of the string itself reach `onError`.
    let input = args.eval("dateString", ctx)?;
    let format = optional_format(args, ctx, (40684, "Location40684"), "$dateFromString")?;
    let tz = eval_tz(args.get("timezone"), ctx)?;
    if is_nullish(&input) {
        return on_null(args, ctx);
    }
    let parsed = match input.as_ref().expect("not nullish") {
        Bson::String(s) => match (tz, format) {
            (Some(tz), Some(format)) => parse_date(s, format.as_deref(), &tz).map(Some),
            _ => Ok(None),
        },
        other => Err(conversion_failure(format!(
            "$dateFromString requires that 'dateString' be a string, found: {} with value {}",
            type_name(other),
            shell_repr(other)
        ))),
    };
    match (parsed, args.get("onError")) {
        (Ok(Some(ms)), _) => Ok(Some(Bson::DateTime(DateTime::from_millis(ms)))),
        (Ok(None), _) => Ok(Some(Bson::Null)),
        (Err(e), Some(on_error)) if e.code == 241 => on_error.eval(ctx),
        (Err(e), _) => Err(e),
    }
}

/// Fields read from a date string; absent ones are `None`.
#[derive(Default)]
struct Parsed {
    year: Option<i64>,
    month: Option<i64>,
    day: Option<i64>,
    day_of_year: Option<i64>,
    iso_year: Option<i64>,
    iso_week: Option<i64>,
    iso_day: Option<i64>,
    hour: Option<i64>,
    minute: Option<i64>,
    second: Option<i64>,
    millis: i64,
    /// A UTC offset, or a zone named in the string.
    zone: Option<Tz>,
}

fn incomplete(s: &str) -> DocError {
    conversion_failure(format!(
        "an incomplete date/time string has been found, with elements missing: \"{s}\""
    ))
}

/// Parses `s` with `format`, or as ISO 8601 without one, in `tz` unless the string names its
/// own zone.
fn parse_date(s: &str, format: Option<&str>, tz: &Tz) -> DocResult<i64> {
    let fail = |why: &str| conversion_failure(format!("Error parsing date string '{s}'; {why}"));
    let p = match format {
        Some(f) => parse_with_format(s, f).map_err(|w| fail(&w))?,
        None => parse_iso(s).map_err(|w| fail(&w))?,
    };
    let days = match (p.year, p.iso_year) {
        (Some(y), _) if p.day_of_year.is_some() => {
            days_from_civil(y, 1, 1) + p.day_of_year.expect("checked") - 1
        }
        (Some(y), _) => {
            let (Some(m), Some(d)) = (p.month, p.day) else {
                return Err(incomplete(s));
            };
            if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m as u32) as i64 {
                return Err(fail("The parsed date was invalid"));
            }
            days_from_civil(y, m as u32, d as u32)
        }
        (None, Some(iy)) => {
            iso_week1_monday(iy) + (p.iso_week.unwrap_or(1) - 1) * 7 + p.iso_day.unwrap_or(1) - 1
        }
        (None, None) => return Err(incomplete(s)),
    };
    // A time left out entirely is midnight; a partial one is incomplete, as in mongod.
    let (hour, minute, second) = match (p.hour, p.minute, p.second) {
        (None, None, None) => (0, 0, 0),
        (Some(h), Some(m), Some(s)) => (h, m, s),
        _ => return Err(incomplete(s)),
    };
    if hour > 23 || minute > 59 || second > 59 {
        return Err(fail("The parsed time was invalid"));
    }
    let local = days * MS_PER_DAY + hour * 3_600_000 + minute * 60_000 + second * 1000 + p.millis;
    match p.zone {
        Some(_) if !tz.is_utc() => Err(conversion_failure(format!(
            "you cannot pass in a date/time string with time zone information ('{s}') together with a timezone argument"
        ))),
        Some(own) => Ok(own.to_utc(local)),
        None => Ok(tz.to_utc(local)),
    }
}

/// Reads up to `max` digits (at least one).
fn digits(s: &mut &str, max: usize) -> Result<i64, String> {
    let n = s.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return Err("expected a number".into());
    }
    let v = s[..n]
        .parse()
        .map_err(|_| "number out of range".to_string())?;
    *s = &s[n..];
    Ok(v)
}

/// `±HH`, `±HHMM` or `±HH:MM` at the front of `s`, as milliseconds.
fn offset(s: &mut &str) -> Result<i64, String> {
    let sign = match s.as_bytes().first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return Err("expected a UTC offset".into()),
    };
    *s = &s[1..];
    let h = digits(s, 2)?;
    if s.starts_with(':') {
        *s = &s[1..];
    }
    let m = if s.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        digits(s, 2)?
    } else {
        0
    };
    Ok(sign * (h * 3_600_000 + m * 60_000))
}

/// An English month name (`Jan` or `January`), in any case.
fn month_name(s: &mut &str, abbreviated: bool) -> Result<i64, String> {
    for (i, m) in MONTHS.iter().enumerate() {
        let want = if abbreviated { &m[..3] } else { m };
        if s.get(..want.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(want))
        {
            *s = &s[want.len()..];
            return Ok(i as i64 + 1);
        }
    }
    Err("expected a month name".into())
}

fn parse_with_format(mut s: &str, fmt: &str) -> Result<Parsed, String> {
    let mut p = Parsed::default();
    let mut f = fmt.chars();
    while let Some(c) = f.next() {
        if c != '%' {
            match s.strip_prefix(c) {
                Some(rest) => s = rest,
                None => return Err(format!("expected '{c}'")),
            }
            continue;
        }
        let spec = f.next().expect("format was checked");
        match spec {
            'd' => p.day = Some(digits(&mut s, 2)?),
            'G' => p.iso_year = Some(digits(&mut s, 4)?),
            'H' => p.hour = Some(digits(&mut s, 2)?),
            'j' => p.day_of_year = Some(digits(&mut s, 3)?),
            'L' => p.millis = digits(&mut s, 3)?,
            'm' => p.month = Some(digits(&mut s, 2)?),
            'M' => p.minute = Some(digits(&mut s, 2)?),
            'S' => p.second = Some(digits(&mut s, 2)?),
            'u' => p.iso_day = Some(digits(&mut s, 1)?),
            'V' => p.iso_week = Some(digits(&mut s, 2)?),
            'Y' => p.year = Some(digits(&mut s, 4)?),
            'z' => p.zone = Some(Tz::Fixed(offset(&mut s)?)),
            'Z' => {
                let sign = if s.starts_with('-') { -1 } else { 1 };
                s = s
                    .strip_prefix(['+', '-'])
                    .ok_or("expected a minutes offset")?;
                p.zone = Some(Tz::Fixed(sign * digits(&mut s, 4)? * 60_000));
            }
            'b' | 'B' => p.month = Some(month_name(&mut s, spec == 'b')?),
            'U' | 'w' => return Err("%U and %w cannot be parsed".into()),
            '%' => s = s.strip_prefix('%').ok_or("expected '%'")?,
            other => unreachable!("format was checked: %{other}"),
        }
    }
    if !s.is_empty() {
        return Err("trailing data".into());
    }
    Ok(p)
}

/// ISO 8601: `YYYY-MM-DD`, then optionally `T` or a space and `HH:MM[:SS[.fff]]`, then
/// optionally `Z`, an offset, or `GMT`/`UTC` with an offset (`GMT+02:00`).
fn parse_iso(s: &str) -> Result<Parsed, String> {
    let mut p = Parsed::default();
    let mut rest = s.trim();
    let date_sep = |r: &mut &str| -> Result<(), String> {
        *r = r
            .strip_prefix(['-', '/'])
            .ok_or("expected a date separator")?;
        Ok(())
    };
    let year_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if year_len != 4 {
        return Err("expected a four-digit year".into());
    }
    p.year = Some(digits(&mut rest, 4)?);
    date_sep(&mut rest)?;
    p.month = Some(digits(&mut rest, 2)?);
    date_sep(&mut rest)?;
    p.day = Some(digits(&mut rest, 2)?);
    if let Some(r) = rest.strip_prefix(['T', 't', ' ']) {
        rest = r;
        p.hour = Some(digits(&mut rest, 2)?);
        rest = rest.strip_prefix(':').ok_or("expected ':'")?;
        p.minute = Some(digits(&mut rest, 2)?);
        p.second = Some(0);
        if let Some(r) = rest.strip_prefix(':') {
            rest = r;
            p.second = Some(digits(&mut rest, 2)?);
            if let Some(r) = rest.strip_prefix(['.', ',']) {
                let n = r.bytes().take_while(u8::is_ascii_digit).count();
                if n == 0 {
                    return Err("expected fractional seconds".into());
                }
                let frac = &r[..n.min(3)];
                p.millis = frac.parse::<i64>().expect("digits") * 10i64.pow(3 - frac.len() as u32);
                rest = &r[n..];
            }
        }
    }
    p.zone = parse_zone_suffix(rest.trim_start())?;
    Ok(p)
}

/// A trailing zone: `Z`, `±HH[:MM]`, or `UTC`/`GMT` optionally followed by an offset.
fn parse_zone_suffix(mut s: &str) -> Result<Option<Tz>, String> {
    if s.is_empty() {
        return Ok(None);
    }
    if s == "Z" || s == "z" {
        return Ok(Some(Tz::UTC));
    }
    if s.starts_with(['+', '-']) {
        let off = offset(&mut s)?;
        return if s.is_empty() {
            Ok(Some(Tz::Fixed(off)))
        } else {
            Err("trailing data".into())
        };
    }
    for prefix in ["GMT", "UTC"] {
        if let Some(mut r) = s.strip_prefix(prefix) {
            if r.is_empty() {
                return Ok(Some(Tz::UTC));
            }
            if r.starts_with(['+', '-']) {
                let off = offset(&mut r)?;
                if r.is_empty() {
                    return Ok(Some(Tz::Fixed(off)));
                }
            }
        }
    }
    // mongod gives timelib no zone database here: a zone name in the string is refused.
    Err(if s.contains('/') {
        "passing a time zone identifier as part of the string is not allowed".to_string()
    } else {
        format!("unexpected trailing data '{s}'")
    })
}

/// `$toDate` and `$convert` parse a string as `$dateFromString` without a format does.
pub(super) fn parse_date_string(s: &str) -> DocResult<i64> {
    parse_date(s, None, &Tz::UTC)
}
