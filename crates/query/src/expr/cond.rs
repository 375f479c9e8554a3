//! Conditionals, boolean logic, comparison, `$switch` and `$let`.

use super::args::{Args, NamedArgs};
use super::op::Op;
use super::*;

/// `$cond`.
pub(super) fn cond(_op: Op, args: &[Expr], ctx: &Ctx) -> DocResult<Option<Bson>> {
    {
        let c = truthy(args[0].eval(ctx)?.as_ref());
        args[if c { 1 } else { 2 }].eval(ctx)
    }
}

/// `$and`.
pub(super) fn and(_op: Op, args: &[Expr], ctx: &Ctx) -> DocResult<Option<Bson>> {
    {
        for a in args {
            if !truthy(a.eval(ctx)?.as_ref()) {
                return Ok(Some(Bson::Boolean(false)));
            }
        }
        Ok(Some(Bson::Boolean(true)))
    }
}

/// `$or`.
pub(super) fn or(_op: Op, args: &[Expr], ctx: &Ctx) -> DocResult<Option<Bson>> {
    {
        for a in args {
            if truthy(a.eval(ctx)?.as_ref()) {
                return Ok(Some(Bson::Boolean(true)));
            }
        }
        Ok(Some(Bson::Boolean(false)))
    }
}

/// `$ifNull`.
pub(super) fn if_null(_op: Op, args: &[Expr], ctx: &Ctx) -> DocResult<Option<Bson>> {
    {
        for a in &args[..args.len() - 1] {
            let v = a.eval(ctx)?;
            if !is_nullish(&v) {
                return Ok(v);
            }
        }
        args[args.len() - 1].eval(ctx)
    }
}

/// `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`, `$cmp`.
pub(super) fn compare(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let o = cmp_opt(args.v(0), args.v(1));
    Ok(Some(match op {
        Op::Eq => Bson::Boolean(o == Ordering::Equal),
        Op::Ne => Bson::Boolean(o != Ordering::Equal),
        Op::Gt => Bson::Boolean(o == Ordering::Greater),
        Op::Gte => Bson::Boolean(o != Ordering::Less),
        Op::Lt => Bson::Boolean(o == Ordering::Less),
        Op::Lte => Bson::Boolean(o != Ordering::Greater),
        _ => Bson::Int32(o as i32),
    }))
}

/// `$not`.
pub(super) fn not(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(Some(Bson::Boolean(!truthy(args.v(0).as_ref()))))
}

/// `$switch`.
pub(super) fn switch(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    {
        let mut i = 0;
        while let Some(case) = args.get(&format!("case{i}")) {
            if truthy(case.eval(ctx)?.as_ref()) {
                return args.get(&format!("then{i}")).expect("then").eval(ctx);
            }
            i += 1;
        }
        match args.get("default") {
            Some(d) => d.eval(ctx),
            None => Err(DocError::with_code(
                40066,
                "Location40066",
                "$switch could not find a matching branch for an input, and no default was specified.",
            )),
        }
    }
}

/// `$let`.
pub(super) fn let_vars(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    {
        let mut c = ctx.clone();
        for (k, e) in args.args {
            if let Some(vn) = k.strip_prefix("var:") {
                let v = e.eval(ctx)?.unwrap_or(Bson::Null);
                c.vars.push((vn.to_string(), v));
            }
        }
        match args.get("in") {
            Some(e) => e.eval(&c),
            None => Err(DocError::with_code(
                16711,
                "Location16711",
                "Missing 'in' parameter to $let",
            )),
        }
    }
}
