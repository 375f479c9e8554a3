//! An operator's arguments as its family's function receives them: evaluated positional
//! values ([`Args`]) or the parsed named arguments ([`NamedArgs`]).

use bson::Bson;

use super::{is_nullish, Ctx, Expr};
use crate::compare::Num;
use crate::error::DocResult;

/// Evaluated positional arguments (missing stays `None`, distinct from null).
pub(super) struct Args<'a> {
    pub vals: &'a [Option<Bson>],
}

impl Args<'_> {
    pub fn v(&self, i: usize) -> &Option<Bson> {
        &self.vals[i]
    }
    pub fn num(&self, i: usize) -> Option<Num> {
        self.vals[i].as_ref().and_then(Num::of)
    }
    pub fn any_null(&self) -> bool {
        self.vals.iter().any(is_nullish)
    }
}

/// Parsed named arguments of a named operator.
pub(super) struct NamedArgs<'a> {
    pub args: &'a [(String, Expr)],
}

impl NamedArgs<'_> {
    pub fn get(&self, k: &str) -> Option<&Expr> {
        self.args.iter().find(|(n, _)| n == k).map(|(_, e)| e)
    }
    /// Evaluates argument `k` (missing when it was not given).
    pub fn eval(&self, k: &str, ctx: &Ctx) -> DocResult<Option<Bson>> {
        match self.get(k) {
            Some(e) => e.eval(ctx),
            None => Ok(None),
        }
    }
    /// The variable name given by `as`, or `default`.
    pub fn as_name(&self, default: &str) -> String {
        match self.get("as") {
            Some(Expr::Lit(Bson::String(s))) => s.clone(),
            _ => default.to_string(),
        }
    }
}
