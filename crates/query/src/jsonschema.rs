//! `$jsonSchema`: MongoDB's dialect of JSON Schema draft 4 (with `bsonType`), as a query
//! predicate on whole documents. The query matcher uses it for the `$jsonSchema` operator, and
//! collection validators use it (with [`Schema::explain`] for the `errInfo` of a rejected
//! document, in mongod's shape).
//!
//! Keywords: `bsonType`, `type`, `enum`, `required`, `properties`, `patternProperties`,
//! `additionalProperties`, `minProperties`, `maxProperties`, `dependencies`, `minimum`,
//! `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `minLength`, `maxLength`,
//! `pattern`, `items`, `additionalItems`, `minItems`, `maxItems`, `uniqueItems`, `allOf`,
//! `anyOf`, `oneOf`, `not`, `title`, `description`. As in mongod, `$ref`, `$schema`,
//! `default`, `definitions`, `format` and `id` are refused ("not currently supported"), JSON
//! type `integer` is refused, and any other keyword is an error.
//!
//! Recursion follows the schema's nesting, which the wire bounds at 200 levels.

use crate::compare::{bson_equal, compare_bson, type_name, Num};
use crate::error::{DocError, DocResult};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;

/// A parsed schema.
#[derive(Clone, Debug)]
pub struct Schema {
    rules: Vec<(String, Bson, Rule)>,
}

#[derive(Clone, Debug)]
enum Rule {
    /// Type names (bsonType or JSON type), resolved to a predicate on values.
    Types(Vec<TypeName>),
    Enum(Vec<Bson>),
    Required(Vec<String>),
    Properties(Vec<(String, Schema)>),
    PatternProperties(Vec<(crate::regex::Regex, Schema)>),
    /// `additionalProperties`: false (none allowed) or a schema for the others. Uses the
    /// sibling `properties` and `patternProperties` to know which are "others".
    Additional(Box<Additional>),
    MinProperties(usize),
    MaxProperties(usize),
    /// `dependencies`: a property that, when present, requires others or a schema.
    Dependencies(Vec<(String, Dependency)>),
    Minimum(Bson, bool),
    Maximum(Bson, bool),
    MultipleOf(f64),
    MinLength(usize),
    MaxLength(usize),
    Pattern(crate::regex::Regex),
    Items(Box<Schema>),
    ItemsTuple(Vec<Schema>, Option<Box<Additional>>),
    MinItems(usize),
    MaxItems(usize),
    UniqueItems,
    AllOf(Vec<Schema>),
    AnyOf(Vec<Schema>),
    OneOf(Vec<Schema>),
    Not(Box<Schema>),
}

#[derive(Clone, Debug)]
enum Additional {
    Forbidden {
        named: Vec<String>,
        patterns: Vec<crate::regex::Regex>,
    },
    Schema {
        named: Vec<String>,
        patterns: Vec<crate::regex::Regex>,
        schema: Schema,
    },
    /// For `additionalItems`.
    Items(Option<Schema>),
}

#[derive(Clone, Debug)]
enum Dependency {
    Fields(Vec<String>),
    Schema(Schema),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum TypeName {
    Bson(&'static str),
    Number,
}

const BSON_TYPES: &[&str] = &[
    "double",
    "string",
    "object",
    "array",
    "binData",
    "undefined",
    "objectId",
    "bool",
    "date",
    "null",
    "regex",
    "dbPointer",
    "javascript",
    "symbol",
    "javascriptWithScope",
    "int",
    "timestamp",
    "long",
    "decimal",
    "minKey",
    "maxKey",
];

fn bad(msg: impl Into<String>) -> DocError {
    DocError::failed_to_parse(msg)
}

fn type_err(msg: impl Into<String>) -> DocError {
    DocError::type_mismatch(msg)
}

fn non_negative(kw: &str, v: &Bson) -> DocResult<usize> {
    match Num::of(v).and_then(Num::as_i64_exact) {
        Some(n) if n >= 0 => Ok(n as usize),
        _ => Err(bad(format!(
            "${kw} must be a non-negative integer, got {}",
            crate::compare::shell_repr(v)
        ))),
    }
}

fn schema_list(kw: &str, v: &Bson) -> DocResult<Vec<Schema>> {
    let Bson::Array(a) = v else {
        return Err(type_err(format!(
            "$jsonSchema keyword '{kw}' must be an array"
        )));
    };
    if a.is_empty() {
        return Err(bad(format!(
            "$jsonSchema keyword '{kw}' must be a non-empty array"
        )));
    }
    a.iter()
        .map(|s| match s {
            Bson::Document(d) => Schema::parse(d),
            _ => Err(type_err(format!(
                "$jsonSchema keyword '{kw}' must be an array of objects"
            ))),
        })
        .collect()
}

fn string_list(kw: &str, v: &Bson) -> DocResult<Vec<String>> {
    let Bson::Array(a) = v else {
        return Err(type_err(format!(
            "$jsonSchema keyword '{kw}' must be an array"
        )));
    };
    let mut out: Vec<String> = Vec::new();
    for s in a {
        let Bson::String(s) = s else {
            return Err(type_err(format!(
                "$jsonSchema keyword '{kw}' must be an array of strings"
            )));
        };
        if out.contains(s) {
            return Err(bad(format!(
                "$jsonSchema keyword '{kw}' array cannot contain duplicate values"
            )));
        }
        out.push(s.clone());
    }
    Ok(out)
}

fn type_names(kw: &str, v: &Bson) -> DocResult<Vec<TypeName>> {
    let names: Vec<&Bson> = match v {
        Bson::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::new();
    for n in names {
        let Bson::String(s) = n else {
            return Err(type_err(format!(
                "$jsonSchema keyword '{kw}' must be a string or an array of strings"
            )));
        };
        let t = if kw == "bsonType" {
            if s == "number" {
                TypeName::Number
            } else {
                match BSON_TYPES.iter().find(|&&t| t == s) {
                    Some(&t) => TypeName::Bson(t),
                    // mongod's MatcherTypeAlias::parseFromStringAlias: BadValue, as `$type`.
                    None => {
                        return Err(DocError::bad_value(format!("Unknown type name alias: {s}")))
                    }
                }
            }
        } else {
            match s.as_str() {
                "object" => TypeName::Bson("object"),
                "array" => TypeName::Bson("array"),
                "string" => TypeName::Bson("string"),
                "boolean" => TypeName::Bson("bool"),
                "null" => TypeName::Bson("null"),
                "number" => TypeName::Number,
                "integer" => {
                    return Err(bad(
                        "$jsonSchema type 'integer' is not currently supported.",
                    ))
                }
                other => return Err(bad(format!("Unknown JSON Schema type: {other}"))),
            }
        };
        out.push(t);
    }
    Ok(out)
}

impl TypeName {
    fn matches(self, v: &Bson) -> bool {
        match self {
            TypeName::Number => Num::of(v).is_some(),
            TypeName::Bson(t) => type_name(v) == t,
        }
    }
}

/// A keyword about an object's fields; `None` for one read with another keyword.
fn object_rule(d: &Document, k: &str, v: &Bson) -> DocResult<Option<Rule>> {
    let names = |k: &str| -> Vec<String> {
        match d.get(k) {
            Some(Bson::Document(p)) => p.keys().cloned().collect(),
            _ => Vec::new(),
        }
    };
    Ok(Some(match k {
        "properties" => {
            let Bson::Document(p) = v else {
                return Err(type_err(
                    "$jsonSchema keyword 'properties' must be an object",
                ));
            };
            let mut props = Vec::new();
            for (name, s) in p {
                let Bson::Document(s) = s else {
                    return Err(type_err(format!(
                        "Nested schema for $jsonSchema property '{name}' must be an object"
                    )));
                };
                props.push((name.clone(), Schema::parse(s)?));
            }
            Rule::Properties(props)
        }
        "patternProperties" => {
            let Bson::Document(p) = v else {
                return Err(type_err(
                    "$jsonSchema keyword 'patternProperties' must be an object",
                ));
            };
            let mut props = Vec::new();
            for (pat, s) in p {
                let Bson::Document(s) = s else {
                    return Err(type_err(
                        "$jsonSchema keyword 'patternProperties' must have objects as values",
                    ));
                };
                props.push((crate::regex::compile_regex(pat, "")?, Schema::parse(s)?));
            }
            Rule::PatternProperties(props)
        }
        "additionalProperties" => {
            let named = names("properties");
            let patterns = names("patternProperties")
                .iter()
                .map(|p| crate::regex::compile_regex(p, ""))
                .collect::<DocResult<Vec<_>>>()?;
            Rule::Additional(Box::new(match v {
                Bson::Boolean(true) => return Ok(None),
                Bson::Boolean(false) => Additional::Forbidden { named, patterns },
                Bson::Document(s) => Additional::Schema {
                    named,
                    patterns,
                    schema: Schema::parse(s)?,
                },
                _ => {
                    return Err(type_err(
                        "$jsonSchema keyword 'additionalProperties' must be either an object or a boolean",
                    ))
                }
            }))
        }
        "minProperties" => Rule::MinProperties(non_negative(k, v)?),
        "maxProperties" => Rule::MaxProperties(non_negative(k, v)?),
        "dependencies" => {
            let Bson::Document(p) = v else {
                return Err(type_err(
                    "$jsonSchema keyword 'dependencies' must be an object",
                ));
            };
            let mut deps = Vec::new();
            for (name, dep) in p {
                deps.push((
                    name.clone(),
                    match dep {
                        Bson::Document(s) => Dependency::Schema(Schema::parse(s)?),
                        a @ Bson::Array(_) => Dependency::Fields(string_list(k, a)?),
                        _ => {
                            return Err(type_err(
                                "property dependencies in $jsonSchema 'dependencies' must be objects or arrays",
                            ))
                        }
                    },
                ));
            }
            Rule::Dependencies(deps)
        }
        _ => unreachable!("{k} is not one of its keywords"),
    }))
}

/// A keyword about a number's range; `None` for one read with another keyword.
fn number_rule(d: &Document, k: &str, v: &Bson) -> DocResult<Option<Rule>> {
    Ok(Some(match k {
        "minimum" | "maximum" => {
            if Num::of(v).is_none() {
                return Err(type_err(format!(
                    "$jsonSchema keyword '{k}' must be a number"
                )));
            }
            let excl_key = if k == "minimum" {
                "exclusiveMinimum"
            } else {
                "exclusiveMaximum"
            };
            let excl = match d.get(excl_key) {
                None => false,
                Some(Bson::Boolean(b)) => *b,
                Some(_) => {
                    return Err(type_err(format!(
                        "$jsonSchema keyword '{excl_key}' must be a boolean"
                    )))
                }
            };
            if k == "minimum" {
                Rule::Minimum(v.clone(), excl)
            } else {
                Rule::Maximum(v.clone(), excl)
            }
        }
        "exclusiveMinimum" | "exclusiveMaximum" => {
            let base = if k == "exclusiveMinimum" {
                "minimum"
            } else {
                "maximum"
            };
            if !d.contains_key(base) {
                return Err(bad(format!(
                    "$jsonSchema keyword '{base}' must be a present if {k} is present"
                )));
            }
            return Ok(None);
        }
        "multipleOf" => match Num::of(v).map(Num::as_f64) {
            Some(f) if f > 0.0 => Rule::MultipleOf(f),
            _ => {
                return Err(bad(
                    "$jsonSchema keyword 'multipleOf' must have a positive value",
                ))
            }
        },
        _ => unreachable!("{k} is not one of its keywords"),
    }))
}

/// A keyword about an array's items; `None` for one read with another keyword.
fn array_rule(d: &Document, k: &str, v: &Bson) -> DocResult<Option<Rule>> {
    Ok(Some(match k {
        "items" => match v {
            Bson::Document(s) => Rule::Items(Box::new(Schema::parse(s)?)),
            Bson::Array(_) => {
                let tuple = schema_list(k, v)?;
                let extra = match d.get("additionalItems") {
                    None | Some(Bson::Boolean(true)) => None,
                    Some(Bson::Boolean(false)) => Some(Box::new(Additional::Items(None))),
                    Some(Bson::Document(s)) => {
                        Some(Box::new(Additional::Items(Some(Schema::parse(s)?))))
                    }
                    Some(_) => {
                        return Err(type_err(
                            "$jsonSchema keyword 'additionalItems' must be either an object or a boolean",
                        ))
                    }
                };
                Rule::ItemsTuple(tuple, extra)
            }
            _ => {
                return Err(type_err(
                    "$jsonSchema keyword 'items' must be an array or an object",
                ))
            }
        },
        // Read with `items` (it only matters when `items` is an array).
        "additionalItems" => return Ok(None),
        "minItems" => Rule::MinItems(non_negative(k, v)?),
        "maxItems" => Rule::MaxItems(non_negative(k, v)?),
        "uniqueItems" => match v {
            Bson::Boolean(true) => Rule::UniqueItems,
            Bson::Boolean(false) => return Ok(None),
            _ => {
                return Err(type_err(
                    "$jsonSchema keyword 'uniqueItems' must be a boolean",
                ))
            }
        },
        _ => unreachable!("{k} is not one of its keywords"),
    }))
}

/// One keyword of a schema as its rule; `None` for a keyword that adds no rule (annotations,
/// keywords read with another one).
fn parse_rule(d: &Document, k: &str, v: &Bson) -> DocResult<Option<Rule>> {
    Ok(Some(match k {
        "properties" | "patternProperties" | "additionalProperties" | "minProperties" | "maxProperties" | "dependencies" => return object_rule(d, k, v),
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => return number_rule(d, k, v),
        "items" | "additionalItems" | "minItems" | "maxItems" | "uniqueItems" => return array_rule(d, k, v),
        "bsonType" | "type" => Rule::Types(type_names(k, v)?),
        "enum" => match v {
            Bson::Array(a) if !a.is_empty() => Rule::Enum(a.clone()),
            _ => return Err(bad("$jsonSchema keyword 'enum' must be a non-empty array")),
        },
        "required" => {
            let r = string_list(k, v)?;
            if r.is_empty() {
                return Err(bad("$jsonSchema keyword 'required' cannot be an empty array"));
            }
            Rule::Required(r)
        }
        "minLength" => Rule::MinLength(non_negative(k, v)?),
        "maxLength" => Rule::MaxLength(non_negative(k, v)?),
        "pattern" => match v {
            Bson::String(p) => Rule::Pattern(crate::regex::compile_regex(p, "")?),
            _ => return Err(type_err("$jsonSchema keyword 'pattern' must be a string")),
        },
        "allOf" => Rule::AllOf(schema_list(k, v)?),
        "anyOf" => Rule::AnyOf(schema_list(k, v)?),
        "oneOf" => Rule::OneOf(schema_list(k, v)?),
        "not" => match v {
            Bson::Document(s) => Rule::Not(Box::new(Schema::parse(s)?)),
            _ => return Err(type_err("$jsonSchema keyword 'not' must be an object")),
        },
        "title" | "description" => {
            if !matches!(v, Bson::String(_)) {
                return Err(type_err(format!("$jsonSchema keyword '{k}' must be a string")));
            }
            return Ok(None);
        }
        "$ref" | "$schema" | "default" | "definitions" | "format" | "id" => {
            return Err(bad(format!(
                "$jsonSchema keyword '{k}' is not currently supported"
            )))
        }
        "encrypt" | "encryptMetadata" => {
            return Err(bad(format!(
                "$jsonSchema keyword '{k}' is not supported by flashdoc (no client-side field level encryption)"
            )))
        }
        other => return Err(bad(format!("Unknown $jsonSchema keyword: {other}"))),
    }))
}

impl Schema {
    /// Parses a `$jsonSchema` document.
    pub fn parse(d: &Document) -> DocResult<Schema> {
        let mut rules = Vec::new();
        if d.contains_key("type") && d.contains_key("bsonType") {
            return Err(bad(
                "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
            ));
        }
        for (k, v) in d {
            let Some(rule) = parse_rule(d, k, v)? else {
                continue;
            };
            rules.push((k.clone(), v.clone(), rule));
        }
        Ok(Schema { rules })
    }

    /// Whether a document satisfies the schema (the top level is an object).
    pub fn matches_doc(&self, d: &Document) -> bool {
        self.rules_hold(&Subject::Doc(d))
    }

    /// Whether a value satisfies the schema.
    pub fn matches(&self, v: &Bson) -> bool {
        self.rules_hold(&subject(v))
    }

    /// mongod's explanation of why a document fails: `{operatorName: "$jsonSchema",
    /// schemaRulesNotSatisfied: [...]}`.
    pub fn explain_doc(&self, d: &Document) -> Document {
        doc! {
            "operatorName": "$jsonSchema",
            "schemaRulesNotSatisfied": self.failures(&Subject::Doc(d)),
        }
    }

    fn failures(&self, s: &Subject) -> Vec<Bson> {
        self.rules
            .iter()
            .filter(|(_, _, r)| !r.holds(s))
            .map(|(k, spec, r)| Bson::Document(r.explain(k, spec, s)))
            .collect()
    }
}

/// The value a schema is applied to; documents are not cloned into a `Bson`.
enum Subject<'a> {
    Doc(&'a Document),
    Value(&'a Bson),
}

impl Subject<'_> {
    fn as_value(&self) -> Bson {
        match self {
            Subject::Doc(d) => Bson::Document((*d).clone()),
            Subject::Value(v) => (*v).clone(),
        }
    }
    fn type_ok(&self, t: TypeName) -> bool {
        match self {
            Subject::Doc(_) => t == TypeName::Bson("object"),
            Subject::Value(v) => t.matches(v),
        }
    }
    fn doc(&self) -> Option<&Document> {
        match self {
            Subject::Doc(d) => Some(d),
            Subject::Value(Bson::Document(d)) => Some(d),
            _ => None,
        }
    }
    fn value(&self) -> Option<&Bson> {
        match self {
            Subject::Doc(_) => None,
            Subject::Value(v) => Some(v),
        }
    }
}

fn subject(v: &Bson) -> Subject<'_> {
    match v {
        Bson::Document(d) => Subject::Doc(d),
        other => Subject::Value(other),
    }
}

fn is_additional(name: &str, named: &[String], patterns: &[crate::regex::Regex]) -> bool {
    !named.iter().any(|n| n == name) && !patterns.iter().any(|p| p.is_match(name))
}

impl Rule {
    /// Whether the rule holds. Rules about one kind of value (strings, numbers, arrays,
    /// objects) hold for values of other kinds, as in JSON Schema.
    fn holds(&self, s: &Subject) -> bool {
        match self {
            Rule::Required(_)
            | Rule::Properties(_)
            | Rule::PatternProperties(_)
            | Rule::Additional(_)
            | Rule::MinProperties(_)
            | Rule::MaxProperties(_)
            | Rule::Dependencies(_) => self.holds_on_object(s),
            Rule::Items(_)
            | Rule::ItemsTuple(..)
            | Rule::MinItems(_)
            | Rule::MaxItems(_)
            | Rule::UniqueItems => self.holds_on_array(s),
            Rule::Types(ts) => ts.iter().any(|t| s.type_ok(*t)),
            Rule::Enum(vals) => {
                let v = s.as_value();
                vals.iter().any(|x| exact_eq(x, &v))
            }
            Rule::Minimum(m, excl) => match s.value().filter(|v| Num::of(v).is_some()) {
                Some(v) => match compare_bson(v, m) {
                    Ordering::Greater => true,
                    Ordering::Equal => !excl,
                    Ordering::Less => false,
                },
                None => true,
            },
            Rule::Maximum(m, excl) => match s.value().filter(|v| Num::of(v).is_some()) {
                Some(v) => match compare_bson(v, m) {
                    Ordering::Less => true,
                    Ordering::Equal => !excl,
                    Ordering::Greater => false,
                },
                None => true,
            },
            Rule::MultipleOf(m) => match s.value().and_then(Num::of) {
                Some(n) => {
                    let q = n.as_f64() / m;
                    q.is_finite() && q.fract() == 0.0
                }
                None => true,
            },
            Rule::MinLength(n) => match s.value() {
                Some(Bson::String(st)) => st.chars().count() >= *n,
                _ => true,
            },
            Rule::MaxLength(n) => match s.value() {
                Some(Bson::String(st)) => st.chars().count() <= *n,
                _ => true,
            },
            Rule::Pattern(re) => match s.value() {
                Some(Bson::String(st)) => re.is_match(st),
                _ => true,
            },
            Rule::AllOf(ss) => ss.iter().all(|sc| sc.rules_hold(s)),
            Rule::AnyOf(ss) => ss.iter().any(|sc| sc.rules_hold(s)),
            Rule::OneOf(ss) => ss.iter().filter(|sc| sc.rules_hold(s)).count() == 1,
            Rule::Not(sc) => !sc.rules_hold(s),
        }
    }

    /// An object keyword's rule (`properties`, `required`, ...): holds for a value that is no
    /// document.
    fn holds_on_object(&self, s: &Subject) -> bool {
        match self {
            Rule::Required(names) => match s.doc() {
                Some(d) => names.iter().all(|n| d.contains_key(n)),
                None => true,
            },
            Rule::Properties(props) => match s.doc() {
                Some(d) => props
                    .iter()
                    .all(|(n, sc)| d.get(n).is_none_or(|v| sc.matches(v))),
                None => true,
            },
            Rule::PatternProperties(props) => match s.doc() {
                Some(d) => d.iter().all(|(k, v)| {
                    props
                        .iter()
                        .filter(|(re, _)| re.is_match(k))
                        .all(|(_, sc)| sc.matches(v))
                }),
                None => true,
            },
            Rule::Additional(a) => match (s.doc(), a.as_ref()) {
                (Some(d), Additional::Forbidden { named, patterns }) => {
                    d.keys().all(|k| !is_additional(k, named, patterns))
                }
                (
                    Some(d),
                    Additional::Schema {
                        named,
                        patterns,
                        schema,
                    },
                ) => d
                    .iter()
                    .all(|(k, v)| !is_additional(k, named, patterns) || schema.matches(v)),
                _ => true,
            },
            Rule::MinProperties(n) => s.doc().is_none_or(|d| d.len() >= *n),
            Rule::MaxProperties(n) => s.doc().is_none_or(|d| d.len() <= *n),
            Rule::Dependencies(deps) => match s.doc() {
                Some(d) => deps.iter().all(|(n, dep)| {
                    !d.contains_key(n)
                        || match dep {
                            Dependency::Fields(fs) => fs.iter().all(|f| d.contains_key(f)),
                            Dependency::Schema(sc) => sc.matches_doc(d),
                        }
                }),
                None => true,
            },
            _ => unreachable!("not an object keyword's rule"),
        }
    }

    /// An array keyword's rule (`items`, `minItems`, ...): holds for a value that is no array.
    fn holds_on_array(&self, s: &Subject) -> bool {
        match self {
            Rule::Items(sc) => match s.value() {
                Some(Bson::Array(a)) => a.iter().all(|e| sc.matches(e)),
                _ => true,
            },
            Rule::ItemsTuple(tuple, extra) => match s.value() {
                Some(Bson::Array(a)) => {
                    a.iter().zip(tuple).all(|(e, sc)| sc.matches(e))
                        && match extra.as_deref() {
                            Some(Additional::Items(None)) => a.len() <= tuple.len(),
                            Some(Additional::Items(Some(sc))) => {
                                a.iter().skip(tuple.len()).all(|e| sc.matches(e))
                            }
                            _ => true,
                        }
                }
                _ => true,
            },
            Rule::MinItems(n) => match s.value() {
                Some(Bson::Array(a)) => a.len() >= *n,
                _ => true,
            },
            Rule::MaxItems(n) => match s.value() {
                Some(Bson::Array(a)) => a.len() <= *n,
                _ => true,
            },
            Rule::UniqueItems => match s.value() {
                Some(Bson::Array(a)) => {
                    // mongod's equality here: BSON comparison (1 == 1.0 == NumberLong(1)),
                    // strings compared binary whatever the collation, documents whatever their
                    // field order. With fields put in one order, equal items compare Equal
                    // and so sort next to each other.
                    let _binary = crate::collation::scope(None);
                    let mut items: Vec<Bson> = a.iter().map(fields_in_order).collect();
                    items.sort_by(compare_bson);
                    items
                        .windows(2)
                        .all(|w| compare_bson(&w[0], &w[1]) != std::cmp::Ordering::Equal)
                }
                _ => true,
            },
            _ => unreachable!("not an array keyword's rule"),
        }
    }

    fn explain(&self, keyword: &str, spec: &Bson, s: &Subject) -> Document {
        let mut d = doc! {"operatorName": keyword};
        match self {
            Rule::Required(names) => {
                d.insert("specifiedAs", doc! {keyword: spec.clone()});
                let missing: Vec<Bson> = match s.doc() {
                    Some(doc) => names
                        .iter()
                        .filter(|n| !doc.contains_key(*n))
                        .map(|n| Bson::String(n.clone()))
                        .collect(),
                    None => Vec::new(),
                };
                d.insert("missingProperties", missing);
            }
            Rule::Properties(props) => {
                let doc = s.doc().expect("properties fail only on documents");
                let failing: Vec<Bson> = props
                    .iter()
                    .filter_map(|(n, sc)| {
                        let v = doc.get(n)?;
                        (!sc.matches(v)).then(|| {
                            Bson::Document(doc! {
                                "propertyName": n.clone(),
                                "details": sc.failures(&subject(v)),
                            })
                        })
                    })
                    .collect();
                d.insert("propertiesNotSatisfied", failing);
            }
            Rule::Types(_) => {
                d.insert("specifiedAs", doc! {keyword: spec.clone()});
                d.insert("reason", "type did not match");
                let v = s.as_value();
                d.insert("consideredType", type_name(&v));
                d.insert("consideredValue", v);
            }
            _ => {
                d.insert("specifiedAs", doc! {keyword: spec.clone()});
                d.insert("reason", reason(keyword));
                if let Some(v) = s.value() {
                    d.insert("consideredValue", v.clone());
                }
            }
        }
        d
    }
}

impl Schema {
    fn rules_hold(&self, s: &Subject) -> bool {
        self.rules.iter().all(|(_, _, r)| r.holds(s))
    }
}

/// A value with every document's fields sorted by name (recursively), so that documents
/// differing only in field order compare Equal.
fn fields_in_order(v: &Bson) -> Bson {
    match v {
        Bson::Document(d) => {
            let mut fields: Vec<(&String, &Bson)> = d.iter().collect();
            fields.sort_by(|x, y| x.0.cmp(y.0));
            Bson::Document(
                fields
                    .into_iter()
                    .map(|(k, v)| (k.clone(), fields_in_order(v)))
                    .collect(),
            )
        }
        Bson::Array(a) => Bson::Array(a.iter().map(fields_in_order).collect()),
        other => other.clone(),
    }
}

/// Equal and of the same type (JSON Schema's `enum` treats 1 and 1.0 alike
/// in mongod, so numbers compare by value; other types must match exactly).
/// Arrays and documents are equal when their items (fields in order) are, by this rule.
fn exact_eq(a: &Bson, b: &Bson) -> bool {
    if Num::of(a).is_some() && Num::of(b).is_some() {
        return bson_equal(a, b);
    }
    match (a, b) {
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| exact_eq(p, q))
        }
        (Bson::Document(x), Bson::Document(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kp, p), (kq, q))| kp == kq && exact_eq(p, q))
        }
        _ => a == b,
    }
}

fn reason(keyword: &str) -> &'static str {
    match keyword {
        "enum" => "value was not found in enum",
        "minimum" | "maximum" => "comparison failed",
        "multipleOf" => "considered value was not a multiple of specified value",
        "minLength" | "maxLength" => "specified string length was not satisfied",
        "pattern" => "regular expression did not match",
        "minItems" | "maxItems" => "array did not match specified length",
        "uniqueItems" => "found a duplicate item",
        "items" | "additionalItems" => "At least one item did not match the sub-schema",
        "additionalProperties" => "found additional properties",
        "minProperties" | "maxProperties" => "specified number of properties was not satisfied",
        "not" => "child expression matched",
        "anyOf" | "oneOf" | "allOf" => "no matching schemas",
        _ => "rule was not satisfied",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(schema: Document, d: Document) -> bool {
        Schema::parse(&schema).unwrap().matches_doc(&d)
    }

    #[test]
    fn keywords() {
        let s = doc! {
            "bsonType": "object",
            "required": ["name", "age"],
            "properties": {
                "name": {"bsonType": "string", "minLength": 2, "pattern": "^[A-Z]"},
                "age": {"bsonType": ["int", "long"], "minimum": 0, "maximum": 150, "exclusiveMaximum": true},
                "tags": {"bsonType": "array", "items": {"bsonType": "string"}, "uniqueItems": true, "maxItems": 3},
                "kind": {"enum": ["a", "b"]},
            },
            "additionalProperties": false,
        };
        assert!(ok(s.clone(), doc! {"name": "Ann", "age": 30}));
        assert!(ok(
            s.clone(),
            doc! {"name": "Ann", "age": 30, "tags": ["x", "y"], "kind": "a"}
        ));
        assert!(!ok(s.clone(), doc! {"name": "Ann"}));
        assert!(!ok(s.clone(), doc! {"name": "ann", "age": 30}));
        assert!(!ok(s.clone(), doc! {"name": "Ann", "age": 150}));
        assert!(!ok(s.clone(), doc! {"name": "Ann", "age": 3.5}));
        assert!(!ok(
            s.clone(),
            doc! {"name": "Ann", "age": 3, "tags": ["x", "x"]}
        ));
        assert!(!ok(s.clone(), doc! {"name": "Ann", "age": 3, "kind": "c"}));
        assert!(!ok(s.clone(), doc! {"name": "Ann", "age": 3, "extra": 1}));
        assert!(ok(
            doc! {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 2}}},
            doc! {"n": 4.0}
        ));
        assert!(!ok(
            doc! {"properties": {"n": {"type": "number", "multipleOf": 2}}},
            doc! {"n": 3}
        ));
        assert!(ok(
            doc! {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
            doc! {"b": 1}
        ));
        assert!(!ok(
            doc! {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
            doc! {"a": 1, "b": 1}
        ));
        assert!(!ok(doc! {"not": {"required": ["a"]}}, doc! {"a": 1}));
        assert!(!ok(doc! {"dependencies": {"a": ["b"]}}, doc! {"a": 1}));
        assert!(ok(
            doc! {"dependencies": {"a": ["b"]}},
            doc! {"a": 1, "b": 2}
        ));
        assert!(ok(
            doc! {"patternProperties": {"^x": {"bsonType": "int"}}},
            doc! {"x1": 1, "y": "s"}
        ));
        assert!(!ok(
            doc! {"patternProperties": {"^x": {"bsonType": "int"}}},
            doc! {"x1": "s"}
        ));
        assert!(!ok(doc! {"minProperties": 2}, doc! {"a": 1}));
        assert!(ok(
            doc! {"properties": {"a": {"items": [{"bsonType": "int"}], "additionalItems": false}}},
            doc! {"a": [1]}
        ));
        assert!(!ok(
            doc! {"properties": {"a": {"items": [{"bsonType": "int"}], "additionalItems": false}}},
            doc! {"a": [1, 2]}
        ));
        assert!(!ok(doc! {"bsonType": "array"}, doc! {}));
    }

    #[test]
    fn refused_keywords_and_bad_specs() {
        for s in [
            doc! {"$ref": "#/x"},
            doc! {"format": "email"},
            doc! {"type": "integer"},
            doc! {"bogus": 1},
            doc! {"type": "object", "bsonType": "object"},
            doc! {"required": []},
            doc! {"exclusiveMinimum": true},
            doc! {"bsonType": "nope"},
        ] {
            assert!(Schema::parse(&s).is_err(), "{s}");
        }
        let unknown = Schema::parse(&doc! {"bsonType": "nope"}).unwrap_err();
        assert_eq!(unknown.code, 2, "{unknown}");
    }

    #[test]
    fn unique_items_finds_duplicates_by_value() {
        let s = doc! {"properties": {"a": {"uniqueItems": true}}};
        let sym = Bson::Symbol("x".into());
        for (a, unique) in [
            (bson::bson!([1, 1.0]), false),
            (bson::bson!([1, 1i64, 1]), false),
            (bson::bson!([1, 2, 1.0]), false),
            (bson::bson!([{"k": 1}, {"k": 1.0}]), false),
            (
                bson::bson!([{"k": 1, "j": [{"a": 1, "b": 2}]}, {"j": [{"b": 2.0, "a": 1}], "k": 1}]),
                false,
            ),
            (bson::bson!(["x", 2, sym]), false),
            (
                bson::bson!([1, "1", [1], {"k": 1}, {"j": 1}, {"k": 1, "j": 1}]),
                true,
            ),
            (bson::bson!([{"k": [1, 2]}, {"k": [2, 1]}]), true),
            (bson::bson!(["a", "A"]), true),
        ] {
            assert_eq!(ok(s.clone(), doc! {"a": a.clone()}), unique, "{a}");
        }
    }

    #[test]
    fn explanation_has_mongods_shape() {
        let s =
            Schema::parse(&doc! {"required": ["a"], "properties": {"b": {"bsonType": "string"}}})
                .unwrap();
        let e = s.explain_doc(&doc! {"b": 1});
        assert_eq!(e.get_str("operatorName").unwrap(), "$jsonSchema");
        let rules = e.get_array("schemaRulesNotSatisfied").unwrap();
        assert_eq!(rules.len(), 2);
        let req = rules[0].as_document().unwrap();
        assert_eq!(req.get_str("operatorName").unwrap(), "required");
        assert_eq!(
            req.get_array("missingProperties").unwrap(),
            &vec![Bson::String("a".into())]
        );
        let props = rules[1].as_document().unwrap();
        let p = props.get_array("propertiesNotSatisfied").unwrap()[0]
            .as_document()
            .unwrap();
        assert_eq!(p.get_str("propertyName").unwrap(), "b");
    }
}
