//! The parsed expression tree ([`Expr`]), the variables in scope ([`Ctx`]) and evaluation:
//! literals, paths and variables here, each operator through its row in the table.

use std::cmp::Ordering;

use bson::{Bson, DateTime, Document};

use super::op::Op;
use crate::compare::{compare_bson, shell_repr, type_name, Num};
use crate::error::{DocError, DocResult};
use crate::vars::Scope;

/// A parsed aggregation expression.
#[derive(Clone, Debug)]
pub enum Expr {
    Lit(Bson),
    /// A field path relative to `$$CURRENT`.
    Field(Vec<String>),
    /// `$$name.path…`
    Var(String, Vec<String>),
    Obj(Vec<(String, Expr)>),
    Arr(Vec<Expr>),
    Op(Op, Vec<Expr>),
    /// Operators with named arguments (`$cond` object form is normalised to `Op`).
    Named(Op, Vec<(String, Expr)>),
}

/// Variables in scope while evaluating: the document, the expression's own variables
/// (`$let`, `$map`, ...) and the command's `let` ([`Scope`]).
#[derive(Clone, Debug)]
pub struct Ctx<'a> {
    pub root: &'a Document,
    pub current: &'a Document,
    pub vars: Vec<(String, Bson)>,
    pub scope: &'a Scope,
}

impl<'a> Ctx<'a> {
    /// A context for a command without `let`.
    pub fn new(doc: &'a Document) -> Ctx<'a> {
        Self::scoped(doc, &crate::vars::EMPTY)
    }

    /// A context where the command's `let` variables are in scope.
    pub fn scoped(doc: &'a Document, scope: &'a Scope) -> Ctx<'a> {
        Ctx {
            root: doc,
            current: doc,
            vars: Vec::new(),
            scope,
        }
    }

    pub(super) fn with(&self, name: &str, v: Bson) -> Ctx<'a> {
        let mut c = self.clone();
        c.vars.push((name.to_string(), v));
        c
    }
}

/// A field name built from a string value: BSON names cannot hold a NUL byte (mongod: 4940400).
pub(super) fn check_key(k: &str) -> DocResult<()> {
    if k.contains('\0') {
        return Err(DocError::with_code(
            4940400,
            "Location4940400",
            "Key field cannot contain an embedded null byte",
        ));
    }
    Ok(())
}

/// Truthiness in aggregation: false, null, missing, undefined and zero are false.
pub fn truthy(v: Option<&Bson>) -> bool {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(other) => match Num::of(other) {
            Some(n) => n.as_f64() != 0.0,
            None => true,
        },
    }
}

pub(super) fn is_nullish(v: &Option<Bson>) -> bool {
    matches!(v, None | Some(Bson::Null) | Some(Bson::Undefined))
}

/// Evaluates a field path on a value with aggregation semantics (arrays map over their
/// elements, missing elements are dropped).
pub fn eval_path(v: &Bson, parts: &[String]) -> Option<Bson> {
    if parts.is_empty() {
        return Some(v.clone());
    }
    match v {
        Bson::Document(d) => eval_path(d.get(&parts[0])?, &parts[1..]),
        Bson::Array(a) => Some(Bson::Array(
            a.iter()
                .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
                .filter_map(|e| eval_path(e, parts))
                .collect(),
        )),
        _ => None,
    }
}

/// A document as `$$ROOT`/`$$CURRENT` show it: a text scan's score is metadata
/// (`{$meta: "textScore"}` reads it), not one of its fields.
fn without_score(d: &Document) -> Document {
    let mut d = d.clone();
    d.remove(crate::text::SCORE_FIELD);
    d
}

/// Field path on a document.
pub fn eval_doc_path(d: &Document, parts: &[String]) -> Option<Bson> {
    eval_path(d.get(&parts[0])?, &parts[1..])
}

pub(super) fn tn(v: &Option<Bson>) -> &'static str {
    match v {
        None => "missing",
        Some(b) => type_name(b),
    }
}

pub(super) fn cmp_opt(a: &Option<Bson>, b: &Option<Bson>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => compare_bson(x, y),
    }
}

pub(super) fn to_i64_arg(op: &str, v: &Bson) -> DocResult<i64> {
    Num::of(v).and_then(Num::as_i64_exact).ok_or_else(|| {
        DocError::with_code(
            28690,
            "Location28690",
            format!(
                "{op}'s argument must be an integral value, found {}",
                shell_repr(v)
            ),
        )
    })
}

impl Expr {
    /// Evaluates against a document as both `$$ROOT` and `$$CURRENT`.
    pub fn eval_root(&self, doc: &Document) -> DocResult<Option<Bson>> {
        self.eval(&Ctx::new(doc))
    }

    /// Evaluates in a context.
    pub fn eval(&self, ctx: &Ctx) -> DocResult<Option<Bson>> {
        match self {
            Expr::Lit(v) => Ok(Some(v.clone())),
            Expr::Field(parts) => Ok(eval_doc_path(ctx.current, parts)),
            Expr::Var(name, parts) => {
                let base: Bson = match name.as_str() {
                    "ROOT" => Bson::Document(without_score(ctx.root)),
                    "CURRENT" => Bson::Document(without_score(ctx.current)),
                    "REMOVE" => return Ok(None),
                    // The command's `let` may set it (a router passes its own).
                    "NOW" => match ctx.scope.get(name) {
                        Some(Some(v)) => v.clone(),
                        _ => Bson::DateTime(DateTime::now()),
                    },
                    _ => match ctx.vars.iter().rev().find(|(n, _)| n == name) {
                        Some((_, v)) => v.clone(),
                        // A variable a stage bound for its sub-pipeline ($lookup's `let`).
                        None if crate::vars::lookup(name).is_some() => {
                            match crate::vars::lookup(name).flatten() {
                                Some(v) => v,
                                None => return Ok(None),
                            }
                        }
                        // The command's `let`.
                        None if ctx.scope.get(name).is_some() => match ctx.scope.get(name) {
                            Some(Some(v)) => v.clone(),
                            _ => return Ok(None),
                        },
                        None => {
                            return Err(DocError::with_code(
                                17276,
                                "Location17276",
                                format!("Use of undefined variable: {name}"),
                            ))
                        }
                    },
                };
                Ok(eval_path(&base, parts))
            }
            Expr::Obj(fields) => {
                let mut d = Document::new();
                for (k, e) in fields {
                    if let Some(v) = e.eval(ctx)? {
                        d.insert(k.clone(), v);
                    }
                }
                Ok(Some(Bson::Document(d)))
            }
            Expr::Arr(items) => {
                let mut out = Vec::with_capacity(items.len());
                for e in items {
                    // Missing values become null inside arrays.
                    out.push(e.eval(ctx)?.unwrap_or(Bson::Null));
                }
                Ok(Some(Bson::Array(out)))
            }
            Expr::Op(op, args) => op.eval(args, ctx),
            Expr::Named(op, args) => op.eval_named(args, ctx),
        }
    }
}
