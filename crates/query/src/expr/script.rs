//! `$function`: a JavaScript function (crate::js) of evaluated arguments,
//! `{body: <function as string or Code>, args: [<expression>, …], lang: "js"}`.

use super::args::NamedArgs;
use super::*;
use crate::js;

/// Checks `$function`'s object and compiles its body once, so a syntax error fails the
/// pipeline's parse; the named arguments are `body` (the source, a literal) and `args`.
pub(super) fn parse_function(arg: &Bson) -> DocResult<Vec<(String, Expr)>> {
    js::require_enabled()?;
    let err = |code: i32, name: &'static str, msg: String| DocError::with_code(code, name, msg);
    let Bson::Document(d) = arg else {
        return Err(err(
            31260,
            "Location31260",
            "$function requires an object as an argument".into(),
        ));
    };
    if let Some(k) = d
        .keys()
        .find(|k| !["body", "args", "lang"].contains(&k.as_str()))
    {
        return Err(err(
            31261,
            "Location31261",
            format!("Unrecognized parameter to $function: {k}"),
        ));
    }
    let body = d.get("body").ok_or_else(|| {
        err(
            31262,
            "Location31262",
            "$function requires 'body' to be specified".into(),
        )
    })?;
    let source = js::source_of(body, "$function's 'body'")?;
    let args = match d.get("args") {
        Some(a @ Bson::Array(_)) => parse_expr(a)?,
        _ => {
            return Err(err(
                31266,
                "Location31266",
                "The 'args' field of $function must be an array".into(),
            ))
        }
    };
    if !matches!(d.get("lang"), Some(Bson::String(l)) if l == "js") {
        return Err(err(
            31418,
            "Location31418",
            "$function currently only supports language 'js'".into(),
        ));
    }
    js::compiled(&source, ::js::Kind::Function)?;
    Ok(vec![
        ("body".to_string(), Expr::Lit(Bson::String(source))),
        ("args".to_string(), args),
    ])
}

/// Calls the body with the evaluated arguments.
pub(super) fn function(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let Some(Expr::Lit(Bson::String(source))) = args.get("body") else {
        unreachable!("parse_function puts the body's source in as a literal")
    };
    let values = match args.eval("args", ctx)? {
        Some(Bson::Array(a)) => a,
        _ => unreachable!("an array expression evaluates to an array"),
    };
    let f = ::js::Func::new(source, ::js::Kind::Function);
    Ok(Some(js::call(&f, &values)?))
}
