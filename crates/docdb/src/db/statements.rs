//! The statement loop that every write command shares (plain collections in `write`,
//! time-series buckets in `timeseries`), kept apart so that neither names the other for it.

use super::*;

/// Runs a write command's statements in order and gathers their outcome as mongod does: the
/// namespace is checked once, a statement's error is recorded with its index, and an ordered
/// write stops at the first error while an unordered one goes on.
pub(super) fn run_statements<S>(
    db: &str,
    coll: &str,
    stmts: impl IntoIterator<Item = S>,
    ordered: bool,
    mut run: impl FnMut(usize, S, &mut WriteOutcome) -> DocResult<()>,
) -> WriteOutcome {
    let mut out = WriteOutcome::default();
    if let Err(error) = catalog::validate_coll_name(db, coll) {
        out.write_errors.push(WriteError { index: 0, error });
        return out;
    }
    for (i, s) in stmts.into_iter().enumerate() {
        if let Err(error) = run(i, s, &mut out) {
            out.write_errors.push(WriteError { index: i, error });
            if ordered {
                break;
            }
        }
    }
    out
}
