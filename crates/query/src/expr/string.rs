//! String operators, `$trim` family and `$regexMatch` included.

use super::args::{Args, NamedArgs};
use super::op::Op;
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

/// `$regexMatch`, `$regexFind`, `$regexFindAll`: `{input, regex, options}`.
pub(super) fn regex_ops(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    let nothing = || match op {
        Op::RegexMatch => Bson::Boolean(false),
        Op::RegexFind => Bson::Null,
        _ => Bson::Array(Vec::new()),
    };
    let options = match args.eval("options", ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => None,
        Some(Bson::String(o)) => Some(o),
        Some(other) => {
            return Err(DocError::with_code(
                51106,
                "Location51106",
                format!(
                    "{name} needs 'options' to be of type string, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    let (pattern, flags) = match args.eval("regex", ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(nothing())),
        Some(Bson::String(p)) => (p, options.unwrap_or_default()),
        Some(Bson::RegularExpression(r)) => match options {
            Some(_) if !r.options.is_empty() => {
                return Err(DocError::with_code(
                    51107,
                    "Location51107",
                    format!(
                    "{name}: found regex option(s) specified in both 'regex' and 'option' fields"
                ),
                ))
            }
            Some(o) => (r.pattern, o),
            None => (r.pattern, r.options),
        },
        Some(other) => {
            return Err(DocError::with_code(
                51105,
                "Location51105",
                format!(
                    "{name} needs 'regex' to be of type string or regex, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    let re = crate::regex::compile_regex_cached(&pattern, &flags)?;
    let input = match args.eval("input", ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(nothing())),
        Some(Bson::String(s)) => s,
        Some(other) => {
            return Err(DocError::with_code(
                51104,
                "Location51104",
                format!(
                    "{name} needs 'input' to be of type string, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    Ok(Some(match op {
        Op::RegexMatch => Bson::Boolean(re.captures_at(&input, 0, name)?.is_some()),
        Op::RegexFind => re
            .captures_at(&input, 0, name)?
            .map_or(Bson::Null, |c| regex_match_doc(&input, &c)),
        _ => {
            // mongod caps the output of $regexFindAll at 64 MB (an empty pattern matches at
            // every position of a 16 MB string).
            let mut out = Vec::new();
            let mut bytes = 0usize;
            re.for_each_match(&input, name, |c| {
                bytes += c
                    .groups
                    .iter()
                    .flatten()
                    .map(|(s, e)| e - s + 32)
                    .sum::<usize>()
                    + 64;
                if bytes > MAX_REGEX_FIND_ALL_BYTES {
                    return Err(DocError::with_code(
                        5126606,
                        "Location5126606",
                        "$regexFindAll: the size of buffer to store output exceeded the 64MB limit",
                    ));
                }
                out.push(regex_match_doc(&input, c));
                Ok(())
            })?;
            Bson::Array(out)
        }
    }))
}

const MAX_REGEX_FIND_ALL_BYTES: usize = 64 << 20;

/// The largest string `$replaceAll` builds, mongod's buffer limit.
const MAX_REPLACE_BYTES: usize = 125 << 20;

/// One match as mongod reports it: `{match, idx, captures}`, `idx` in code points and an
/// unmatched group as null.
fn regex_match_doc(input: &str, c: &crate::regex::Captures) -> Bson {
    let (start, end) = c.span();
    let captures: Vec<Bson> = c
        .groups
        .iter()
        .skip(1)
        .map(|g| g.map_or(Bson::Null, |(s, e)| Bson::String(input[s..e].to_string())))
        .collect();
    Bson::Document(bson::doc! {
        "match": &input[start..end],
        "idx": input[..start].chars().count() as i32,
        "captures": captures,
    })
}

/// `$replaceOne`, `$replaceAll`: `{input, find, replacement}`, null if any is null.
pub(super) fn replace(op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let mut vals = Vec::with_capacity(3);
    for k in ["input", "find", "replacement"] {
        match args.eval(k, ctx)? {
            None | Some(Bson::Null) | Some(Bson::Undefined) => vals.push(None),
            Some(Bson::String(s)) => vals.push(Some(s)),
            Some(other) => {
                return Err(DocError::with_code(
                    51746,
                    "Location51746",
                    format!(
                        "{} requires that '{k}' be a string, found: {}",
                        op.name(),
                        shell_repr(&other)
                    ),
                ))
            }
        }
    }
    let [Some(input), Some(find), Some(replacement)] =
        <[Option<String>; 3]>::try_from(vals).expect("three arguments")
    else {
        return Ok(Some(Bson::Null));
    };
    let count = if op == Op::ReplaceOne {
        usize::from(input.contains(find.as_str()))
    } else if find.is_empty() {
        input.chars().count() + 1
    } else {
        input.matches(find.as_str()).count()
    };
    let len = input.len() - count * find.len() + count.saturating_mul(replacement.len());
    if len > MAX_REPLACE_BYTES {
        return Err(DocError::with_code(
            13548,
            "Location13548",
            format!("BufBuilder attempted to grow() to {len} bytes, past the 125MB limit."),
        ));
    }
    Ok(Some(Bson::String(if op == Op::ReplaceOne {
        input.replacen(&find, &replacement, 1)
    } else {
        input.replace(&find, &replacement)
    })))
}

/// The first position of `needle` in `hay` (an empty needle is found at 0).
fn find_slice<T: PartialEq>(hay: &[T], needle: &[T]) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    (0..=hay.len() - needle.len()).find(|&i| hay[i..].starts_with(needle))
}

/// `$indexOfBytes`, `$indexOfCP`: `[string, substring, start, end]`; -1 when not found.
pub(super) fn index_of(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let name = op.name();
    let bytes = op == Op::IndexOfBytes;
    let (c1, c2) = if bytes {
        (40091, 40092)
    } else {
        (40093, 40094)
    };
    let s = match args.v(0) {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::String(s)) => s,
        other => {
            return Err(DocError::with_code(
                c1,
                if bytes {
                    "Location40091"
                } else {
                    "Location40093"
                },
                format!(
                    "{name} requires a string as the first argument, found: {}",
                    tn(other)
                ),
            ))
        }
    };
    let Some(Bson::String(sub)) = args.v(1) else {
        return Err(DocError::with_code(
            c2,
            if bytes {
                "Location40092"
            } else {
                "Location40094"
            },
            format!(
                "{name} requires a string as the second argument, found: {}",
                tn(args.v(1))
            ),
        ));
    };
    let len = if bytes { s.len() } else { s.chars().count() } as i64;
    let bound = |i: usize, what: &str| -> DocResult<i64> {
        let v = args.v(i).as_ref().unwrap_or(&Bson::Null);
        let n = Num::of(v).and_then(Num::as_i64_exact).ok_or_else(|| {
            DocError::with_code(
                40096,
                "Location40096",
                format!(
                    "{name} requires an integral {what}, found a value of type: {}, with value: {}",
                    type_name(v),
                    shell_repr(v)
                ),
            )
        })?;
        if n < 0 {
            return Err(DocError::with_code(
                40097,
                "Location40097",
                format!("{name} requires a nonnegative {what}, found: {n}"),
            ));
        }
        Ok(n)
    };
    let start = if args.vals.len() > 2 {
        bound(2, "starting index")?
    } else {
        0
    };
    let end = if args.vals.len() > 3 {
        bound(3, "ending index")?.min(len)
    } else {
        len
    };
    if start > len || start > end {
        return Ok(Some(Bson::Int32(-1)));
    }
    let (start, end) = (start as usize, end as usize);
    let found = if bytes {
        find_slice(&s.as_bytes()[start..end], sub.as_bytes())
    } else {
        let chars: Vec<char> = s.chars().collect();
        find_slice(&chars[start..end], &sub.chars().collect::<Vec<_>>())
    };
    let found = found.map(|i| i + start);
    Ok(Some(Bson::Int32(found.map_or(-1, |i| i as i32))))
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
