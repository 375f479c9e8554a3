//! Object operators: `$mergeObjects`, `$objectToArray`, `$arrayToObject`.

use super::args::{Args, NamedArgs};
use super::op::Op;
use super::*;

/// `$mergeObjects`.
pub(super) fn merge_objects(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let mut d = Document::new();
    let items: Vec<&Option<Bson>> = args.vals.iter().collect();
    for (i, x) in items.into_iter().enumerate() {
        match x {
            None | Some(Bson::Null) => {}
            Some(Bson::Document(o)) => {
                for (k, val) in o {
                    d.insert(k.clone(), val.clone());
                }
            }
            other => {
                return Err(DocError::with_code(
                    40400,
                    "Location40400",
                    format!(
                        "$mergeObjects requires object inputs, but input {} is of type {}",
                        i,
                        tn(other)
                    ),
                ))
            }
        }
    }
    Ok(Some(Bson::Document(d)))
}

/// `$objectToArray`.
pub(super) fn object_to_array(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(match args.v(0) {
        None | Some(Bson::Null) => Some(Bson::Null),
        Some(Bson::Document(d)) => Some(Bson::Array(
            d.iter()
                .map(|(k, val)| Bson::Document(bson::doc! {"k": k.clone(), "v": val.clone()}))
                .collect(),
        )),
        other => {
            return Err(DocError::with_code(
                40390,
                "Location40390",
                format!(
                    "$objectToArray requires a document input, found: {}",
                    tn(other)
                ),
            ))
        }
    })
}

/// `$arrayToObject`.
pub(super) fn array_to_object(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(match args.v(0) {
        None | Some(Bson::Null) => Some(Bson::Null),
        Some(Bson::Array(a)) => {
            let mut d = Document::new();
            for e in a {
                match e {
                    Bson::Array(kv) if kv.len() == 2 => {
                        let Bson::String(k) = &kv[0] else {
                            return Err(DocError::with_code(40395, "Location40395", "$arrayToObject requires an array of key-value pairs, where the key must be of type string"));
                        };
                        check_key(k)?;
                        d.insert(k.clone(), kv[1].clone());
                    }
                    Bson::Document(kv) if kv.len() == 2 => match (kv.get("k"), kv.get("v")) {
                        (Some(Bson::String(k)), Some(val)) => {
                            check_key(k)?;
                            d.insert(k.clone(), val.clone());
                        }
                        _ => {
                            return Err(DocError::with_code(
                                40393,
                                "Location40393",
                                "$arrayToObject requires an object with keys 'k' and 'v'",
                            ))
                        }
                    },
                    _ => {
                        return Err(DocError::with_code(
                            40398,
                            "Location40398",
                            "Unrecognised input type format for $arrayToObject",
                        ))
                    }
                }
            }
            Some(Bson::Document(d))
        }
        other => {
            return Err(DocError::with_code(
                40386,
                "Location40386",
                format!(
                    "$arrayToObject requires an array input, found: {}",
                    tn(other)
                ),
            ))
        }
    })
}

/// The `field` of `$getField`/`$setField`/`$unsetField`: a string (mongod wants a constant;
/// `$literal` lets it start with `$`).
fn field_name(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<String> {
    let (code, code_name) = if op == Op::GetField {
        (3041704, "Location3041704")
    } else {
        (4161107, "Location4161107")
    };
    match args.eval("field", ctx)? {
        Some(Bson::String(s)) => Ok(s),
        other => Err(DocError::with_code(
            code,
            code_name,
            format!(
                "{} requires 'field' to evaluate to type String, but got {}",
                op.name(),
                tn(&other)
            ),
        )),
    }
}

/// `$getField`: `{field, input}` (input defaults to `$$CURRENT`), or just `field`. A field
/// named with dots or `$` is read as one name, not a path.
pub(super) fn get_field(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let field = field_name(op, args, ctx)?;
    let input = match args.get("input") {
        Some(e) => e.eval(ctx)?,
        None => Some(Bson::Document(ctx.current.clone())),
    };
    match input {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Document(d)) => Ok(d.get(&field).cloned()),
        Some(other) => Err(DocError::with_code(
            3041705,
            "Location3041705",
            format!(
                "$getField requires 'input' to evaluate to type Object, but got {}",
                type_name(&other)
            ),
        )),
    }
}

/// `$setField` (`{field, input, value}`; a `value` of `$$REMOVE` removes the field) and
/// `$unsetField` (`{field, input}`).
pub(super) fn set_field(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let field = field_name(op, args, ctx)?;
    let mut d = match args.eval("input", ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Document(d)) => d,
        Some(other) => {
            return Err(DocError::with_code(
                4161105,
                "Location4161105",
                format!(
                    "{} requires 'input' to evaluate to type Object, but got {}",
                    op.name(),
                    type_name(&other)
                ),
            ))
        }
    };
    let value = if op == Op::UnsetField {
        None
    } else {
        args.eval("value", ctx)?
    };
    match value {
        Some(v) => {
            d.insert(field, v);
        }
        None => {
            d.remove(&field);
        }
    }
    Ok(Some(Bson::Document(d)))
}
