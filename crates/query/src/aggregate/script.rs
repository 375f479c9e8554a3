//! `$accumulator` in `$group` (and `$bucket`, `$bucketAuto`): a group's state made by
//! JavaScript functions (crate::js). `init(...initArgs)` starts it at the group's first
//! document, `accumulate(state, ...accumulateArgs)` folds in every document, and
//! `finalize(state)` (when given) makes the output. `merge` combines partial states, which a
//! single pass over the input never makes; it is checked like the others.

use bson::{Bson, Document};
use js::{Func, Kind};

use crate::error::{DocError, DocResult};
use crate::expr::{parse_expr, Expr};

/// One group's state and the functions that carry it on.
#[derive(Clone, Debug)]
pub(crate) struct JsAccumulator {
    state: Bson,
    accumulate: Func,
    finalize: Option<Func>,
}

fn err(code: i32, name: &'static str, msg: impl Into<String>) -> DocError {
    DocError::with_code(code, name, msg)
}

/// A function field of the operand, compiled once to check it.
fn function_field(d: &Document, key: &str, required: bool) -> DocResult<Option<Bson>> {
    match d.get(key) {
        None if required => Err(err(
            4544706,
            "Location4544706",
            format!("$accumulator missing required argument '{key}'"),
        )),
        None => Ok(None),
        Some(v) => {
            let source = crate::js::source_of(v, &format!("$accumulator's '{key}'"))?;
            crate::js::compiled(&source, Kind::Function)?;
            Ok(Some(Bson::String(source)))
        }
    }
}

/// An array-of-expressions field of the operand.
fn args_field(d: &Document, key: &str, required: bool) -> DocResult<Expr> {
    match d.get(key) {
        Some(a @ Bson::Array(_)) => parse_expr(a),
        None if !required => Ok(Expr::Arr(Vec::new())),
        None => Err(err(
            4544706,
            "Location4544706",
            format!("$accumulator missing required argument '{key}'"),
        )),
        Some(_) => Err(err(
            4544712,
            "Location4544712",
            format!("$accumulator '{key}' must be an array"),
        )),
    }
}

/// Checks the operand and returns the expression every document evaluates:
/// `{init, initArgs, accumulate, accumulateArgs, finalize}` (sources as literals).
pub(super) fn parse_accumulator(aa: &Bson) -> DocResult<Expr> {
    crate::js::require_enabled()?;
    let Bson::Document(d) = aa else {
        return Err(err(
            4544700,
            "Location4544700",
            "$accumulator expects an object as an argument",
        ));
    };
    const KNOWN: [&str; 7] = [
        "init",
        "initArgs",
        "accumulate",
        "accumulateArgs",
        "merge",
        "finalize",
        "lang",
    ];
    if let Some(k) = d.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(err(
            4544701,
            "Location4544701",
            format!("$accumulator got an unrecognized field: {k}"),
        ));
    }
    if !matches!(d.get("lang"), Some(Bson::String(l)) if l == "js") {
        return Err(err(
            4544707,
            "Location4544707",
            "$accumulator only supports lang: 'js'",
        ));
    }
    let mut fields = Vec::new();
    for (key, required) in [
        ("init", true),
        ("accumulate", true),
        ("merge", true),
        ("finalize", false),
    ] {
        if let Some(source) = function_field(d, key, required)? {
            fields.push((key.to_string(), Expr::Lit(source)));
        }
    }
    fields.push(("initArgs".into(), args_field(d, "initArgs", false)?));
    fields.push((
        "accumulateArgs".into(),
        args_field(d, "accumulateArgs", true)?,
    ));
    Ok(Expr::Obj(fields))
}

fn function_of(d: &Document, key: &str) -> Option<Func> {
    d.get_str(key).ok().map(|s| Func::new(s, Kind::Function))
}

fn array_of(d: &mut Document, key: &str) -> Vec<Bson> {
    match d.remove(key) {
        Some(Bson::Array(a)) => a,
        _ => Vec::new(),
    }
}

/// Folds one document's evaluated operand into the group's state (starting it first).
pub(super) fn accumulate(state: &mut Option<JsAccumulator>, v: Option<Bson>) -> DocResult<()> {
    let Some(Bson::Document(mut d)) = v else {
        unreachable!("the operand's object expression evaluates to a document")
    };
    if state.is_none() {
        let init = function_of(&d, "init").expect("parse_accumulator requires init");
        let init_args = array_of(&mut d, "initArgs");
        *state = Some(JsAccumulator {
            state: crate::js::call(&init, &init_args)?,
            accumulate: function_of(&d, "accumulate").expect("parse_accumulator requires it"),
            finalize: function_of(&d, "finalize"),
        });
    }
    let acc = state.as_mut().expect("started above");
    let mut args = vec![std::mem::replace(&mut acc.state, Bson::Null)];
    args.extend(array_of(&mut d, "accumulateArgs"));
    acc.state = crate::js::call(&acc.accumulate, &args)?;
    Ok(())
}

/// The group's output: `finalize(state)`, or the state.
pub(super) fn finalize(state: Option<JsAccumulator>) -> DocResult<Bson> {
    let Some(acc) = state else {
        return Ok(Bson::Null);
    };
    match &acc.finalize {
        Some(f) => crate::js::call(f, &[acc.state]),
        None => Ok(acc.state),
    }
}
