//! How each operator evaluates: the evaluation table made from the rows of `table.rs`.
//! Parsing resolves a name to an [`Op`] once; evaluation dispatches on the `Op` through this
//! table and never compares names.

use bson::Bson;

use super::args::{Args, NamedArgs};
use super::op::Op;
use super::table::op_rows;
use super::{
    arith, array, cond, convert, date, date_arith, date_fmt, object, script, set, string, Ctx, Expr,
};
use crate::error::DocResult;

/// How an operator evaluates.
#[derive(Clone, Copy)]
pub(super) enum Eval {
    /// Evaluates its own arguments (the short-circuiting `$cond`, `$and`, `$or`, `$ifNull`).
    Lazy(fn(Op, &[Expr], &Ctx) -> DocResult<Option<Bson>>),
    /// Takes its positional arguments already evaluated.
    Values(fn(Op, &Args, &Ctx) -> DocResult<Option<Bson>>),
    /// Takes named arguments and evaluates them itself (they may bind variables).
    Named(fn(Op, &NamedArgs, &Ctx) -> DocResult<Option<Bson>>),
}

macro_rules! define_evals {
    ($($variant:ident $name:literal $arity:ident $(($($a:tt)*))? $eval:ident($f:path);)*) => {
        /// Indexed by `Op as usize`.
        const EVALS: &[Eval] = &[$(Eval::$eval($f)),*];
    };
}

op_rows!(define_evals);

impl Op {
    /// Evaluates the operator with positional arguments.
    pub(super) fn eval(self, args: &[Expr], ctx: &Ctx) -> DocResult<Option<Bson>> {
        match EVALS[self as usize] {
            Eval::Lazy(f) => f(self, args, ctx),
            Eval::Values(f) => {
                let vals: Vec<Option<Bson>> =
                    args.iter().map(|a| a.eval(ctx)).collect::<DocResult<_>>()?;
                f(self, &Args { vals: &vals }, ctx)
            }
            Eval::Named(_) => unreachable!("{} is parsed as a named operator", self.name()),
        }
    }

    /// Evaluates the operator with named arguments.
    pub(super) fn eval_named(self, args: &[(String, Expr)], ctx: &Ctx) -> DocResult<Option<Bson>> {
        match EVALS[self as usize] {
            Eval::Named(f) => f(self, &NamedArgs { args }, ctx),
            _ => unreachable!("{} is parsed as a positional operator", self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operator_has_its_evaluation() {
        assert_eq!(EVALS.len(), super::super::op::ALL.len());
    }
}
