//! `$type` and the type conversions (`$toString`, `$toInt`, …).

use super::args::{Args, NamedArgs};
use super::op::Op;
use super::*;
use crate::compare::TYPE_CODES;

/// `$isNumber`.
pub(super) fn is_number(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(Some(Bson::Boolean(args.num(0).is_some())))
}

/// `$type`.
pub(super) fn type_of(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    Ok(Some(Bson::String(tn(args.v(0)).to_string())))
}

/// `$toString`, `$toInt`, `$toLong`, `$toDouble`, `$toDecimal`, `$toBool`, `$toObjectId`, `$toDate`.
pub(super) fn to_type(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let target = match op {
        Op::ToInt => "int",
        Op::ToLong => "long",
        Op::ToDouble => "double",
        Op::ToDecimal => "decimal",
        Op::ToBool => "bool",
        Op::ToObjectId => "objectId",
        Op::ToDate => "date",
        _ => "string",
    };
    Ok(match args.v(0) {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Some(Bson::Null),
        Some(x) => Some(convert(target, x)?),
    })
}

/// The type `to` names: a type name or its numeric code (FailedToParse otherwise).
fn target_type(to: &Bson) -> DocResult<&'static str> {
    let found = match to {
        Bson::String(s) => TYPE_CODES.iter().find(|(n, _)| n == s),
        other => match Num::of(other).and_then(Num::as_i64_exact) {
            Some(code) => TYPE_CODES.iter().find(|(_, c)| i64::from(*c) == code),
            None => {
                return Err(DocError::failed_to_parse(format!(
                    "$convert's 'to' argument must be a string or number, but is {}",
                    type_name(other)
                )))
            }
        },
    };
    found.map(|(n, _)| *n).ok_or_else(|| {
        DocError::failed_to_parse(match to {
            Bson::String(s) => format!("Unknown type name: {s}"),
            other => format!(
                "In $convert, numeric value for 'to' does not correspond to a BSON type: {}",
                shell_repr(other)
            ),
        })
    })
}

/// `$convert`: `{input, to, onError, onNull}`. `onError` answers for a value that cannot be
/// converted (241), `onNull` for a null or missing input.
pub(super) fn convert_op(_op: Op, args: &NamedArgs, ctx: &Ctx) -> DocResult<Option<Bson>> {
    let to = match args.eval("to", ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(t) => target_type(&t)?,
    };
    let input = match args.eval("input", ctx)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => {
            return match args.get("onNull") {
                Some(e) => e.eval(ctx),
                None => Ok(Some(Bson::Null)),
            }
        }
        Some(v) => v,
    };
    match (convert(to, &input), args.get("onError")) {
        (Ok(v), _) => Ok(Some(v)),
        (Err(e), Some(on_error)) if e.code == 241 => on_error.eval(ctx),
        (Err(e), _) => Err(e),
    }
}

pub(super) fn conversion_failure(msg: String) -> DocError {
    DocError::with_code(241, "ConversionFailure", msg)
}

pub(super) fn to_string_value(v: &Bson) -> DocResult<String> {
    Ok(match v {
        Bson::String(s) | Bson::Symbol(s) => s.clone(),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(f) => {
            if f.fract() == 0.0 && f.abs() < 1e15 {
                format!("{}", *f as i64)
            } else {
                f.to_string()
            }
        }
        Bson::Decimal128(d) => d.to_string(),
        Bson::Boolean(b) => b.to_string(),
        Bson::ObjectId(o) => o.to_hex(),
        Bson::DateTime(d) => super::date_fmt::format_date(
            "%Y-%m-%dT%H:%M:%S.%LZ",
            d.timestamp_millis(),
            &super::date::Tz::UTC,
        )?,
        other => {
            return Err(conversion_failure(format!(
                "Unsupported conversion from {} to string in $convert with no onError value",
                type_name(other)
            )))
        }
    })
}

/// Converts `v` to the type named `target` (one of [`TYPE_CODES`]; only some have conversions, the others fail with 241).
pub(super) fn convert(target: &'static str, v: &Bson) -> DocResult<Bson> {
    let unsupported = || {
        conversion_failure(format!(
            "Unsupported conversion from {} to {target} in $convert with no onError value",
            type_name(v)
        ))
    };
    // A string becomes an int or a long only if it is written as an integer ("5.5" is not
    // one, as in mongod); doubles and decimals take any number.
    let parse_num = |s: &str| -> DocResult<Num> {
        if let Ok(i) = s.parse::<i64>() {
            return Ok(Num::I64(i));
        }
        let integral_target = matches!(target, "int" | "long");
        s.parse::<f64>()
            .ok()
            .filter(|_| !integral_target)
            .map(Num::F64)
            .ok_or_else(|| {
                conversion_failure(format!(
                    "Failed to parse number '{s}' in $convert with no onError value: \
                     Did not consume whole string."
                ))
            })
    };
    let num = match v {
        Bson::String(s) if matches!(target, "int" | "long" | "double" | "decimal") => {
            Some(parse_num(s)?)
        }
        Bson::Boolean(b) => Some(Num::I32(*b as i32)),
        Bson::DateTime(d) if target != "date" => Some(Num::I64(d.timestamp_millis())),
        other => Num::of(other),
    };
    Ok(match target {
        "string" => Bson::String(to_string_value(v)?),
        "bool" => Bson::Boolean(truthy(Some(v))),
        "objectId" => match v {
            Bson::ObjectId(_) => v.clone(),
            Bson::String(s) => Bson::ObjectId(bson::oid::ObjectId::parse_str(s).map_err(|_| {
                conversion_failure(format!(
                    "Failed to parse objectId '{s}' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found {}",
                    s.len()
                ))
            })?),
            _ => return Err(unsupported()),
        },
        "date" => match v {
            Bson::DateTime(_) => v.clone(),
            Bson::ObjectId(o) => Bson::DateTime(o.timestamp()),
            Bson::Timestamp(t) => Bson::DateTime(DateTime::from_millis(t.time as i64 * 1000)),
            Bson::String(s) => Bson::DateTime(DateTime::from_millis(
                super::date_fmt::parse_date_string(s)?,
            )),
            other => match Num::of(other) {
                Some(Num::I32(_)) | None => return Err(unsupported()),
                Some(n) => Bson::DateTime(DateTime::from_millis(n.as_f64() as i64)),
            },
        },
        "int" | "long" | "double" | "decimal" => {
            let Some(n) = num else {
                return Err(unsupported());
            };
            match target {
                "int" => {
                    let f = n.as_f64();
                    let i = int_of(n).unwrap_or(f.trunc() as i64);
                    if !f.is_finite() || !fits_i32(i) {
                        return Err(conversion_failure(format!(
                            "Conversion would overflow target type in $convert with no onError value: {}",
                            shell_repr(v)
                        )));
                    }
                    Bson::Int32(i as i32)
                }
                "long" => {
                    let f = n.as_f64();
                    if !f.is_finite() && int_of(n).is_none() {
                        return Err(conversion_failure(format!(
                            "Conversion would overflow target type in $convert with no onError value: {}",
                            shell_repr(v)
                        )));
                    }
                    Bson::Int64(int_of(n).unwrap_or(f.trunc() as i64))
                }
                "double" => Bson::Double(n.as_f64()),
                _ => Num::Dec(n.as_f64()).to_bson(),
            }
        }
        _ => return Err(unsupported()),
    })
}

/// `$binarySize`: the bytes of a string or a BinData.
pub(super) fn binary_size(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let n = match args.v(0) {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::String(s)) => s.len(),
        Some(Bson::Binary(b)) => b.bytes.len(),
        other => {
            return Err(DocError::with_code(
                51276,
                "Location51276",
                format!(
                    "$binarySize requires a string or BinData argument, found: {}",
                    tn(other)
                ),
            ))
        }
    };
    Ok(Some(Bson::Int32(n as i32)))
}

/// `$toHashedIndexKey`: the hash a hashed index stores for the value (missing hashes as null).
pub(super) fn to_hashed_index_key(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    let v = args.v(0).as_ref().unwrap_or(&Bson::Null);
    Ok(Some(Bson::Int64(crate::hash::hash_value(v))))
}

/// `$bsonSize`: the encoded size of a document.
pub(super) fn bson_size(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    match args.v(0) {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Document(d)) => {
            let bytes = bson::to_vec(d).map_err(|e| DocError::internal_error(e.to_string()))?;
            Ok(Some(Bson::Int32(bytes.len() as i32)))
        }
        other => Err(DocError::with_code(
            31393,
            "Location31393",
            format!("$bsonSize requires a document input, found: {}", tn(other)),
        )),
    }
}

/// `$tsSecond`, `$tsIncrement`: the two halves of a timestamp, as longs.
pub(super) fn timestamp_part(op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    match args.v(0) {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Timestamp(t)) => Ok(Some(Bson::Int64(if op == Op::TsSecond {
            t.time as i64
        } else {
            t.increment as i64
        }))),
        other => {
            let (code, name) = if op == Op::TsSecond {
                (5687301, "Location5687301")
            } else {
                (5687302, "Location5687302")
            };
            Err(DocError::with_code(
                code,
                name,
                format!(
                    "Argument to {} must be a timestamp, but is {}",
                    op.name(),
                    tn(other)
                ),
            ))
        }
    }
}

/// `$toUUID`: a hyphenated UUID string to BinData subtype 4.
pub(super) fn to_uuid(_op: Op, args: &Args, _ctx: &Ctx) -> DocResult<Option<Bson>> {
    match args.v(0) {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Binary(b)) if b.subtype == bson::spec::BinarySubtype::Uuid => {
            Ok(Some(Bson::Binary(b.clone())))
        }
        Some(Bson::String(s)) => {
            let uuid = bson::Uuid::parse_str(s).map_err(|_| {
                conversion_failure(format!(
                    "Failed to parse UUID '{s}' in $convert with no onError value"
                ))
            })?;
            Ok(Some(Bson::Binary(bson::Binary::from_uuid(uuid))))
        }
        Some(other) => Err(conversion_failure(format!(
            "Unsupported conversion from {} to binData in $convert with no onError value",
            type_name(other)
        ))),
    }
}
