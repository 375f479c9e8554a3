//! Set operators over arrays.

use super::args::Args;
use super::op::Op;
use super::*;

/// `$setUnion`, `$setIntersection`, `$setDifference`, `$setEquals`, `$setIsSubset`.
pub(super) fn set_op(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    if args.any_null() && matches!(op, Op::SetUnion | Op::SetIntersection | Op::SetDifference) {
        return Ok(Some(Bson::Null));
    }
    let sets: Vec<Vec<Bson>> = args
        .vals
        .iter()
        .map(|x| set_of(name, x))
        .collect::<DocResult<_>>()?;
    let contains = |s: &Vec<Bson>, x: &Bson| s.iter().any(|y| bson_equal(x, y));
    Ok(Some(match op {
        Op::SetUnion => {
            let mut out: Vec<Bson> = Vec::new();
            for s in &sets {
                for x in s {
                    if !contains(&out, x) {
                        out.push(x.clone());
                    }
                }
            }
            Bson::Array(out)
        }
        Op::SetIntersection => {
            let mut out = sets.first().cloned().unwrap_or_default();
            for s in &sets[1..] {
                out.retain(|x| contains(s, x));
            }
            Bson::Array(out)
        }
        Op::SetDifference => Bson::Array(
            sets[0]
                .iter()
                .filter(|x| !contains(&sets[1], x))
                .cloned()
                .collect(),
        ),
        Op::SetIsSubset => Bson::Boolean(sets[0].iter().all(|x| contains(&sets[1], x))),
        _ => Bson::Boolean(sets.windows(2).all(|w| {
            w[0].iter().all(|x| contains(&w[1], x)) && w[1].iter().all(|x| contains(&w[0], x))
        })),
    }))
}

/// `$allElementsTrue`, `$anyElementTrue`.
pub(super) fn all_any_element_true(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    let a = match args.v(0) {
        Some(Bson::Array(a)) => a,
        other => {
            return Err(DocError::with_code(
                17040,
                "Location17040",
                format!("{name}'s argument must be an array, but is {}", tn(other)),
            ))
        }
    };
    Ok(Some(Bson::Boolean(if op == Op::AllElementsTrue {
        a.iter().all(|x| truthy(Some(x)))
    } else {
        a.iter().any(|x| truthy(Some(x)))
    })))
}

pub(super) fn set_of(op: &str, v: &Option<Bson>) -> DocResult<Vec<Bson>> {
    let a = match v {
        Some(Bson::Array(a)) => a,
        other => {
            return Err(DocError::with_code(
                17044,
                "Location17044",
                format!(
                    "All operands of {op} must be arrays. One argument is of type: {}",
                    tn(other)
                ),
            ))
        }
    };
    let mut out: Vec<Bson> = Vec::new();
    for e in a {
        if !out.iter().any(|x| bson_equal(x, e)) {
            out.push(e.clone());
        }
    }
    Ok(out)
}
