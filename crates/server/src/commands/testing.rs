//! The test commands (mongod's, served only with `--setParameter enableTestCommands=1`; the
//! table's `test_only` rows): `configureFailPoint` and `waitForFailPoint` over the fail points
//! of `crate::failpoint`, `sleep`, and `testVersion2`, a command outside Stable API version 1
//! that drivers' tests run to see `apiStrict` refuse it.

use super::call::Call;
use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};
use std::time::{Duration, Instant};

/// How often a waiting test command looks at what it waits for and at its interruption.
const POLL: Duration = Duration::from_millis(5);

/// `configureFailPoint: name, mode, data`: answers `count`, the times the fail point had fired.
pub(crate) fn configure_fail_point(call: &Call) -> DocResult<Document> {
    let name = match call.cmd.get(call.name) {
        Some(Bson::String(s)) => s.as_str(),
        _ => {
            return Err(DocError::type_mismatch(
                "configureFailPoint: the fail point's name must be a string",
            ))
        }
    };
    let count = call.state.failpoints.configure(name, call.cmd)?;
    Ok(doc! {"count": count})
}

/// `waitForFailPoint: name, timesEntered: n, maxTimeMS`: returns once the fail point has
/// fired `n` times in all.
pub(crate) fn wait_for_fail_point(call: &Call) -> DocResult<Document> {
    let name = call.cmd.get_str(call.name).map_err(|_| {
        DocError::type_mismatch("waitForFailPoint: the fail point's name must be a string")
    })?;
    if !crate::failpoint::NAMES.contains(&name) {
        return Err(DocError::with_code(
            266,
            "FailPointSetFailed",
            format!("{name} not found"),
        ));
    }
    let want = match call.cmd.get("timesEntered") {
        Some(Bson::Int32(n)) if *n >= 0 => *n as u64,
        Some(Bson::Int64(n)) if *n >= 0 => *n as u64,
        Some(Bson::Double(f)) if *f >= 0.0 && f.fract() == 0.0 => *f as u64,
        _ => {
            return Err(DocError::failed_to_parse(
                "waitForFailPoint: 'timesEntered' must be a non-negative number",
            ))
        }
    };
    if !call.cmd.contains_key("maxTimeMS") {
        return Err(DocError::failed_to_parse(
            "waitForFailPoint: 'maxTimeMS' is required",
        ));
    }
    while call.state.failpoints.times_entered(name) < want {
        interrupted()?;
        std::thread::sleep(POLL);
    }
    Ok(doc! {})
}

/// `sleep: 1, millis | secs, lock`: holds the connection that long (killOp and maxTimeMS end
/// it early). flashdoc's commands take no global lock, so `lock` may only say `none`, and
/// saying `r` or `w` would be accepted and not honoured: refused.
pub(crate) fn sleep(call: &Call) -> DocResult<Document> {
    match call.cmd.get("lock") {
        None => {}
        Some(Bson::String(s)) if s == "none" => {}
        Some(other) => {
            return Err(DocError::bad_value(format!(
                "sleep: lock {other} is not available: flashdoc has no global lock to hold (only 'none')"
            )))
        }
    }
    let number = |k: &str| {
        call.cmd.get(k).map(|v| match v {
            Bson::Int32(n) if *n >= 0 => Ok(*n as u64),
            Bson::Int64(n) if *n >= 0 => Ok(*n as u64),
            Bson::Double(f) if *f >= 0.0 => Ok(*f as u64),
            _ => Err(DocError::type_mismatch(format!(
                "sleep: '{k}' must be a non-negative number"
            ))),
        })
    };
    let millis = match (number("millis").transpose()?, number("secs").transpose()?) {
        (Some(ms), _) => ms,
        (None, Some(s)) => s.saturating_mul(1000),
        // mongod's default: a long sleep, for a test to kill.
        (None, None) => 100_000,
    };
    let until = Instant::now() + Duration::from_millis(millis);
    while Instant::now() < until {
        interrupted()?;
        std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
    }
    Ok(doc! {})
}

/// `testVersion2`: replies; it exists to be outside Stable API version 1.
pub(crate) fn test_version(_: &Call) -> DocResult<Document> {
    Ok(doc! {})
}

/// The running command's maxTimeMS or killOp, as an error.
fn interrupted() -> DocResult<()> {
    crate::ops::current().map_or(Ok(()), |i| i.check())
}
