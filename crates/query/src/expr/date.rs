//! Date parts (`$year` … `$dayOfYear`) in UTC.

use super::ops::{Args, Op};
use super::*;

/// `$year`, `$month`, `$dayOfMonth`, `$hour`, `$minute`, `$second`, `$millisecond`, `$dayOfWeek`, `$dayOfYear`.
pub(super) fn date_part_of(op: Op, args: &Args, ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(match args.v(0) {
        None | Some(Bson::Null) => Some(Bson::Null),
        Some(Bson::Document(d)) if d.contains_key("date") => {
            // {date: <expr>} form: evaluate the inner expression.
            let inner = parse_expr(d.get("date").expect("key"))?.eval(ctx)?;
            match inner {
                None | Some(Bson::Null) => Some(Bson::Null),
                Some(x) => Some(date_part(op, &x)?),
            }
        }
        Some(x) => Some(date_part(op, x)?),
    })
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

pub(super) fn date_part(op: Op, v: &Bson) -> DocResult<Bson> {
    let ms = match v {
        Bson::DateTime(d) => d.timestamp_millis(),
        Bson::Timestamp(t) => t.time as i64 * 1000,
        Bson::ObjectId(o) => o.timestamp().timestamp_millis(),
        other => {
            return Err(DocError::with_code(
                16006,
                "Location16006",
                format!("can't convert from BSON type {} to Date", type_name(other)),
            ))
        }
    };
    let days = ms.div_euclid(86_400_000);
    let msd = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    Ok(Bson::Int32(match op {
        Op::Year => y as i32,
        Op::Month => m as i32,
        Op::DayOfMonth => d as i32,
        Op::Hour => (msd / 3_600_000) as i32,
        Op::Minute => (msd / 60_000 % 60) as i32,
        Op::Second => (msd / 1000 % 60) as i32,
        Op::Millisecond => (msd % 1000) as i32,
        // 1 = Sunday; 1970-01-01 was a Thursday.
        Op::DayOfWeek => ((days + 4).rem_euclid(7) + 1) as i32,
        _ => {
            let (y0, _, _) = civil_from_days(days);
            let jan1 = days_from_civil(y0, 1, 1);
            (days - jan1 + 1) as i32
        }
    }))
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
