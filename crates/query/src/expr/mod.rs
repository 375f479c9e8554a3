//! Aggregation expressions: field paths (`"$a.b"`), variables (`"$$ROOT"`), literals, object and
//! array expressions, and the common operators. Each operator is one row of the table in
//! `table.rs`; its evaluation lives in its family's file (`arith`, `string`, `array`, `set`,
//! `object`, `convert`, `date`, `cond`), its parsing in `parse.rs`.
//!
//! Values are `Option<Bson>`: `None` is "missing", which differs from null (it is dropped from
//! objects, and `{$eq: ["$missing", null]}` is false).

mod args;
mod arith;
mod array;
mod command_let;
mod cond;
mod convert;
mod date;
mod date_arith;
mod date_fmt;
mod eval;
mod object;
mod op;
mod ops;
mod parse;
mod script;
mod set;
mod string;
mod table;
pub mod zones;

// The numeric and conversion helpers, and the evaluation helpers of `eval.rs`, are shared by
// several families; each family file reaches them through its `use super::*`, with the
// common imports below.
use std::cmp::Ordering;

use bson::{Bson, DateTime, Document};

use crate::compare::{bson_equal, compare_bson, shell_repr, type_name, Num};
use crate::error::{DocError, DocResult};
use arith::*;
pub use arith::{add_num, avg_values, mean, mul_num, sum_values};
pub use array::n_of;
use convert::*;
use eval::*;
pub use eval::{eval_doc_path, eval_path, truthy, Ctx, Expr};
pub use op::Op;
pub use parse::parse_expr;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_date;
#[cfg(test)]
mod tests_more;
