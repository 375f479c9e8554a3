//! BSON values into JavaScript and back, as mongod's JavaScript shows them: numbers are JS
//! numbers (and come back as doubles, as mongod writes them), strings, objects, arrays, `Date`
//! and `RegExp`, and mongod's shell types for the rest (`ObjectId`, `NumberLong`,
//! `NumberDecimal`, `BinData`, `Timestamp`, `MinKey`, `MaxKey`, `Code`, `DBPointer`), which
//! `shell.js` defines and tags so they come back as the BSON type they left as.

use base64::Engine as _;
use bson::{Bson, Document};
use rquickjs::function::This;
use rquickjs::{Array, Ctx, Function, Object, Type, Value};

use crate::JsError;

/// How deep a value may nest on its way between BSON and JavaScript: BSON's own bound (a
/// deeper JavaScript value is a cycle or a document mongod could not store either).
pub const MAX_DEPTH: usize = 180;

/// The shell's constructors, from the frozen object `shell.js` leaves (user code can replace
/// the globals of the same names, not these).
pub(crate) struct Shell<'js> {
    ctors: Object<'js>,
}

fn js_err(e: rquickjs::Error) -> JsError {
    JsError::Conversion(e.to_string())
}

impl<'js> Shell<'js> {
    pub(crate) fn of(ctx: &Ctx<'js>) -> rquickjs::Result<Shell<'js>> {
        Ok(Shell {
            ctors: ctx.globals().get("__shell")?,
        })
    }

    fn make<A: rquickjs::function::IntoArgs<'js>>(
        &self,
        name: &str,
        args: A,
    ) -> rquickjs::Result<Value<'js>> {
        let ctor: rquickjs::Constructor = self.ctors.get(name)?;
        ctor.construct(args)
    }

    fn call<A: rquickjs::function::IntoArgs<'js>>(
        &self,
        name: &str,
        args: A,
    ) -> rquickjs::Result<Value<'js>> {
        let f: Function = self.ctors.get(name)?;
        f.call(args)
    }

    fn is(&self, obj: &Object<'js>, name: &str) -> bool {
        self.ctors
            .get::<_, Value>(name)
            .is_ok_and(|c| obj.is_instance_of(c))
    }
}

/// A BSON document as a JavaScript object.
pub(crate) fn doc_to_js<'js>(
    ctx: &Ctx<'js>,
    sh: &Shell<'js>,
    d: &Document,
    depth: usize,
) -> rquickjs::Result<Value<'js>> {
    if depth > MAX_DEPTH {
        return Err(rquickjs::Exception::throw_range(
            ctx,
            "document nests too deep",
        ));
    }
    let o = Object::new(ctx.clone())?;
    for (k, v) in d {
        o.set(k.as_str(), to_js(ctx, sh, v, depth + 1)?)?;
    }
    Ok(o.into_value())
}

/// A BSON value as a JavaScript value.
pub(crate) fn to_js<'js>(
    ctx: &Ctx<'js>,
    sh: &Shell<'js>,
    v: &Bson,
    depth: usize,
) -> rquickjs::Result<Value<'js>> {
    let c = || ctx.clone();
    Ok(match v {
        Bson::Double(f) => Value::new_float(c(), *f),
        Bson::Int32(i) => Value::new_int(c(), *i),
        Bson::Int64(i) => sh.make("NumberLong", (i.to_string(),))?,
        Bson::String(s) | Bson::Symbol(s) => rquickjs::String::from_str(c(), s)?.into_value(),
        Bson::Document(d) => doc_to_js(ctx, sh, d, depth)?,
        Bson::Array(a) => {
            if depth > MAX_DEPTH {
                return Err(rquickjs::Exception::throw_range(
                    ctx,
                    "array nests too deep",
                ));
            }
            let arr = Array::new(c())?;
            for (n, e) in a.iter().enumerate() {
                arr.set(n, to_js(ctx, sh, e, depth + 1)?)?;
            }
            arr.into_value()
        }
        Bson::Binary(b) => sh.make(
            "BinData",
            (
                u8::from(b.subtype) as i32,
                base64::engine::general_purpose::STANDARD.encode(&b.bytes),
            ),
        )?,
        Bson::Undefined => Value::new_undefined(c()),
        Bson::Null => Value::new_null(c()),
        Bson::ObjectId(o) => sh.make("ObjectId", (o.to_hex(),))?,
        Bson::Boolean(b) => Value::new_bool(c(), *b),
        Bson::DateTime(d) => sh.make("Date", (d.timestamp_millis() as f64,))?,
        Bson::RegularExpression(r) => sh.call("regex", (r.pattern.as_str(), r.options.as_str()))?,
        Bson::JavaScriptCode(code) => sh.make("Code", (code.as_str(),))?,
        Bson::JavaScriptCodeWithScope(cws) => {
            let scope = doc_to_js(ctx, sh, &cws.scope, depth + 1)?;
            sh.make("Code", (cws.code.as_str(), scope))?
        }
        Bson::Timestamp(t) => sh.make("Timestamp", (t.time as f64, t.increment as f64))?,
        Bson::Decimal128(d) => sh.make("NumberDecimal", (d.to_string(),))?,
        Bson::DbPointer(_) => {
            let (ns, id) = db_pointer_parts(v)
                .ok_or_else(|| rquickjs::Exception::throw_type(ctx, "unreadable DBPointer"))?;
            let id = sh.make("ObjectId", (id.to_hex(),))?;
            sh.make("DBPointer", (ns, id))?
        }
        Bson::MinKey => sh.make("MinKey", ())?,
        Bson::MaxKey => sh.make("MaxKey", ())?,
    })
}

/// A JavaScript value as BSON.
pub(crate) fn to_bson<'js>(sh: &Shell<'js>, v: &Value<'js>, depth: usize) -> Result<Bson, JsError> {
    if depth > MAX_DEPTH {
        return Err(JsError::Conversion(
            "value nests too deep (or refers to itself) to be stored as BSON".into(),
        ));
    }
    Ok(match v.type_of() {
        Type::Uninitialized | Type::Undefined => Bson::Undefined,
        Type::Null => Bson::Null,
        Type::Bool => Bson::Boolean(v.as_bool().unwrap_or(false)),
        Type::Int | Type::Float => Bson::Double(v.as_number().unwrap_or(f64::NAN)),
        Type::String => Bson::String(v.get::<String>().map_err(js_err)?),
        Type::BigInt => {
            let b = v
                .as_big_int()
                .cloned()
                .ok_or_else(|| conv("not a BigInt"))?;
            Bson::Int64(b.to_i64().map_err(js_err)?)
        }
        Type::Array => {
            let arr = v.as_array().ok_or_else(|| conv("not an array"))?;
            let mut out = Vec::with_capacity(arr.len());
            for e in arr.iter::<Value>() {
                out.push(to_bson(sh, &e.map_err(js_err)?, depth + 1)?);
            }
            Bson::Array(out)
        }
        Type::Function | Type::Constructor => {
            let f = v.as_object().ok_or_else(|| conv("not a function"))?;
            let text: Function = f.get("toString").map_err(js_err)?;
            Bson::JavaScriptCode(text.call((This(f.clone()),)).map_err(js_err)?)
        }
        Type::Symbol => return Err(conv("a Symbol cannot be stored as BSON")),
        _ => {
            let o = v
                .as_object()
                .ok_or_else(|| conv("unknown JavaScript value"))?;
            object_to_bson(sh, o, depth)?
        }
    })
}

fn conv(msg: &str) -> JsError {
    JsError::Conversion(msg.to_string())
}

/// A JavaScript object as BSON: a `Date`, a `RegExp`, one of the shell's types (by its tag),
/// or else a document of its own enumerable properties.
fn object_to_bson<'js>(sh: &Shell<'js>, o: &Object<'js>, depth: usize) -> Result<Bson, JsError> {
    if sh.is(o, "Date") {
        let get_time: Function = o.get("getTime").map_err(js_err)?;
        let ms: f64 = get_time.call((This(o.clone()),)).map_err(js_err)?;
        return Ok(Bson::DateTime(bson::DateTime::from_millis(ms as i64)));
    }
    if sh.is(o, "RegExp") {
        let pattern: Option<String> = o.get("__bsonPattern").map_err(js_err)?;
        let (pattern, options) = match pattern {
            Some(p) => (p, o.get("__bsonOptions").map_err(js_err)?),
            None => {
                let flags: String = o.get("flags").map_err(js_err)?;
                let options = flags.chars().filter(|c| "ims".contains(*c)).collect();
                (o.get("source").map_err(js_err)?, options)
            }
        };
        return Ok(Bson::RegularExpression(bson::Regex { pattern, options }));
    }
    let tag: Option<String> = o.get("__bsonType").map_err(js_err)?;
    match tag {
        Some(tag) => tagged_to_bson(sh, o, &tag, depth),
        None => {
            let mut d = Document::new();
            for prop in o.props::<String, Value>() {
                let (k, v) = prop.map_err(js_err)?;
                d.insert(k, to_bson(sh, &v, depth + 1)?);
            }
            Ok(Bson::Document(d))
        }
    }
}

fn get_str<'js>(o: &Object<'js>, key: &str) -> Result<String, JsError> {
    let v: Value = o.get(key).map_err(js_err)?;
    match v.as_string() {
        Some(s) => s.to_string().map_err(js_err),
        None => Err(JsError::Conversion(format!("{key} must be a string"))),
    }
}

fn get_num<'js>(o: &Object<'js>, key: &str) -> Result<f64, JsError> {
    let v: Value = o.get(key).map_err(js_err)?;
    v.as_number()
        .ok_or_else(|| JsError::Conversion(format!("{key} must be a number")))
}

/// One of the shell's types back to the BSON type it stands for.
fn tagged_to_bson<'js>(
    sh: &Shell<'js>,
    o: &Object<'js>,
    tag: &str,
    depth: usize,
) -> Result<Bson, JsError> {
    let bad = |what: &str| JsError::Conversion(format!("invalid {tag}: {what}"));
    Ok(match tag {
        "ObjectId" => Bson::ObjectId(
            bson::oid::ObjectId::parse_str(get_str(o, "str")?).map_err(|e| bad(&e.to_string()))?,
        ),
        "NumberLong" => Bson::Int64(
            get_str(o, "__s")?
                .parse()
                .map_err(|_| bad("not a 64-bit integer"))?,
        ),
        "NumberInt" => Bson::Int32(get_num(o, "__v")? as i32),
        "NumberDecimal" => Bson::Decimal128(
            get_str(o, "__s")?
                .parse()
                .map_err(|_| bad("not a decimal"))?,
        ),
        "BinData" => Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::from(get_num(o, "__t")? as u8),
            bytes: base64::engine::general_purpose::STANDARD
                .decode(get_str(o, "__b64")?)
                .map_err(|_| bad("not base64"))?,
        }),
        "Timestamp" => Bson::Timestamp(bson::Timestamp {
            time: get_num(o, "t")? as u32,
            increment: get_num(o, "i")? as u32,
        }),
        "MinKey" => Bson::MinKey,
        "MaxKey" => Bson::MaxKey,
        "Code" => {
            let code = get_str(o, "code")?;
            let scope: Value = o.get("scope").map_err(js_err)?;
            match to_bson(sh, &scope, depth + 1)? {
                Bson::Document(scope) => {
                    Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope { code, scope })
                }
                _ => Bson::JavaScriptCode(code),
            }
        }
        "DBPointer" => {
            let id: Value = o.get("id").map_err(js_err)?;
            let Bson::ObjectId(id) = to_bson(sh, &id, depth + 1)? else {
                return Err(bad("id must be an ObjectId"));
            };
            db_pointer(&get_str(o, "ns")?, id).ok_or_else(|| bad("unreadable"))?
        }
        "BSONRegExp" => Bson::RegularExpression(bson::Regex {
            pattern: get_str(o, "pattern")?,
            options: get_str(o, "options")?,
        }),
        other => return Err(JsError::Conversion(format!("unknown shell type {other}"))),
    })
}

/// The namespace and id of a DBPointer (the bson crate keeps them private: read them from
/// the value's encoding, element type 0x0C: a string, then 12 bytes of ObjectId).
fn db_pointer_parts(v: &Bson) -> Option<(String, bson::oid::ObjectId)> {
    let bytes = bson::to_vec(&bson::doc! {"p": v.clone()}).ok()?;
    // document length (4), element type (1), "p\0" (2), string length (4)
    let body = bytes.get(7..)?;
    let len = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
    let ns = std::str::from_utf8(body.get(4..4 + len - 1)?)
        .ok()?
        .to_string();
    let id: [u8; 12] = body.get(4 + len..4 + len + 12)?.try_into().ok()?;
    Some((ns, bson::oid::ObjectId::from_bytes(id)))
}

/// A DBPointer from its parts (by its encoding, as [`db_pointer_parts`] reads it).
fn db_pointer(ns: &str, id: bson::oid::ObjectId) -> Option<Bson> {
    let mut elem = vec![0x0C, b'p', 0];
    elem.extend_from_slice(&((ns.len() + 1) as u32).to_le_bytes());
    elem.extend_from_slice(ns.as_bytes());
    elem.push(0);
    elem.extend_from_slice(&id.bytes());
    let mut doc = ((elem.len() + 5) as u32).to_le_bytes().to_vec();
    doc.extend_from_slice(&elem);
    doc.push(0);
    let d = Document::from_reader(&mut doc.as_slice()).ok()?;
    d.get("p").cloned()
}
