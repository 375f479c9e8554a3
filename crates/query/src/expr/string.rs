//! String operators, `$trim` family and `$regexMatch` included.

use super::ops::{Args, NamedArgs, Op};
use super::*;

/// `$concat`.
pub(super) fn concat(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    let mut s = String::new();
    for x in args.vals {
        match x {
            Some(Bson::String(p)) => s.push_str(p),
            other => {
                return Err(DocError::with_code(
                    16702,
                    "Location16702",
                    format!("$concat only supports strings, not {}", tn(other)),
                ))
            }
        }
    }
    Ok(Some(Bson::String(s)))
}

/// `$toUpper`, `$toLower`.
pub(super) fn change_case(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let s = match args.v(0) {
        None | Some(Bson::Null) => String::new(),
        Some(Bson::String(s)) => s.clone(),
        Some(
            other @ (Bson::Int32(_)
            | Bson::Int64(_)
            | Bson::Double(_)
            | Bson::Decimal128(_)
            | Bson::DateTime(_)),
        ) => to_string_value(other)?,
        Some(other) => {
            return Err(DocError::with_code(
                16007,
                "Location16007",
                format!(
                    "can't convert from BSON type {} to String",
                    type_name(other)
                ),
            ))
        }
    };
    Ok(Some(Bson::String(if op == Op::ToUpper {
        s.to_uppercase()
    } else {
        s.to_lowercase()
    })))
}

/// `$substr`, `$substrBytes`, `$substrCP`.
pub(super) fn substr(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    let s = match args.v(0) {
        None | Some(Bson::Null) => String::new(),
        Some(Bson::String(s)) => s.clone(),
        Some(other) => to_string_value(other)?,
    };
    let start = args.num(1).map(|n| n.as_f64() as i64).ok_or_else(|| {
        DocError::with_code(
            16034,
            "Location16034",
            format!(
                "{name}:  starting index must be a numeric type (is BSON type {})",
                tn(args.v(1))
            ),
        )
    })?;
    let len = args.num(2).map(|n| n.as_f64() as i64).ok_or_else(|| {
        DocError::with_code(
            16035,
            "Location16035",
            format!(
                "{name}:  length must be a numeric type (is BSON type {})",
                tn(args.v(2))
            ),
        )
    })?;
    let start = start.max(0) as usize;
    let out = if op == Op::SubstrCP {
        let it = s.chars().skip(start);
        if len < 0 {
            it.collect()
        } else {
            it.take(len as usize).collect()
        }
    } else {
        let b = s.as_bytes();
        let st = start.min(b.len());
        let en = if len < 0 {
            b.len()
        } else {
            (st + len as usize).min(b.len())
        };
        if !s.is_char_boundary(st) || !s.is_char_boundary(en) {
            return Err(DocError::with_code(
                28656,
                "Location28656",
                format!("{name}:  Invalid range, starting index is a UTF-8 continuation byte."),
            ));
        }
        s[st..en].to_string()
    };
    Ok(Some(Bson::String(out)))
}

/// `$strLenBytes`, `$strLenCP`.
pub(super) fn str_len(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    Ok(match args.v(0) {
        Some(Bson::String(s)) => Some(Bson::Int32(if op == Op::StrLenBytes {
            s.len()
        } else {
            s.chars().count()
        } as i32)),
        other => {
            return Err(DocError::with_code(
                34473,
                "Location34473",
                format!("{name} requires a string argument, found: {}", tn(other)),
            ))
        }
    })
}

/// `$split`.
pub(super) fn split(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    if args.any_null() {
        return Ok(Some(Bson::Null));
    }
    Ok(match (args.v(0), args.v(1)) {
        (Some(Bson::String(s)), Some(Bson::String(d))) => {
            if d.is_empty() {
                return Err(DocError::with_code(40087, "Location40087", "$split requires a non-empty separator"));
            }
            Some(Bson::Array(s.split(d.as_str()).map(|p| Bson::String(p.to_string())).collect()))
        }
        (a, _) => {
            return Err(DocError::with_code(
                40085,
                "Location40085",
                format!("$split requires an expression that evaluates to a string as a first argument, found: {}", tn(a)),
            ))
        }
    })
}

/// `$strcasecmp`.
pub(super) fn strcasecmp(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let s = |x: &Option<Bson>| -> DocResult<String> {
        Ok(match x {
            None | Some(Bson::Null) => String::new(),
            Some(b) => to_string_value(b)?,
        })
    };
    let (a, b) = (s(args.v(0))?.to_lowercase(), s(args.v(1))?.to_lowercase());
    Ok(Some(Bson::Int32(a.cmp(&b) as i32)))
}

/// `$regexMatch`.
pub(super) fn regex_match(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    {
        let input = args
            .get("input")
            .map(|e| e.eval(ctx))
            .transpose()?
            .flatten();
        let re = args
            .get("regex")
            .map(|e| e.eval(ctx))
            .transpose()?
            .flatten();
        let opts = args
            .get("options")
            .map(|e| e.eval(ctx))
            .transpose()?
            .flatten();
        let (pat, mut o) = match re {
            Some(Bson::String(s)) => (s, String::new()),
            Some(Bson::RegularExpression(r)) => (r.pattern, r.options),
            None | Some(Bson::Null) => return Ok(Some(Bson::Boolean(false))),
            Some(other) => {
                return Err(DocError::with_code(
                    51105,
                    "Location51105",
                    format!(
                        "$regexMatch needs 'regex' to be of type string or regex, found {}",
                        type_name(&other)
                    ),
                ))
            }
        };
        if let Some(Bson::String(s)) = opts {
            o.push_str(&s);
        }
        let re = crate::matcher::compile_regex(&pat, &o)?;
        Ok(Some(Bson::Boolean(match input {
            Some(Bson::String(s)) => re.is_match(&s),
            None | Some(Bson::Null) => false,
            Some(other) => {
                return Err(DocError::with_code(
                    51104,
                    "Location51104",
                    format!(
                        "$regexMatch needs 'input' to be of type string, found {}",
                        type_name(&other)
                    ),
                ))
            }
        })))
    }
}

/// `$trim`, `$ltrim`, `$rtrim`.
pub(super) fn trim(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    {
        // $trim family
        let input = args
            .get("input")
            .map(|e| e.eval(ctx))
            .transpose()?
            .flatten();
        let chars = args
            .get("chars")
            .map(|e| e.eval(ctx))
            .transpose()?
            .flatten();
        let s = match input {
            None | Some(Bson::Null) => return Ok(Some(Bson::Null)),
            Some(Bson::String(s)) => s,
            Some(other) => {
                return Err(DocError::with_code(
                    50699,
                    "Location50699",
                    format!(
                        "{name} requires its input to be a string, got {} (of type {}) instead.",
                        shell_repr(&other),
                        type_name(&other)
                    ),
                ))
            }
        };
        let set: Vec<char> = match chars {
            Some(Bson::String(c)) => c.chars().collect(),
            _ => vec![' ', '\t', '\n', '\r', '\u{0b}', '\u{0c}', '\0'],
        };
        let f = |c: char| set.contains(&c);
        Ok(Some(Bson::String(match op {
            Op::Ltrim => s.trim_start_matches(f).to_string(),
            Op::Rtrim => s.trim_end_matches(f).to_string(),
            _ => s.trim_matches(f).to_string(),
        })))
    }
}
