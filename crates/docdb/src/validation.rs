//! Collection validators (`create`/`collMod` options `validator`, `validationLevel`,
//! `validationAction`): a query filter, which may use `$jsonSchema`, that inserted and updated
//! documents must match.
//!
//! - `validationLevel: strict` (default) checks every insert and update; `moderate` checks
//!   updates only of documents that were valid before; `off` checks nothing.
//! - `validationAction: error` (default) refuses the write with DocumentValidationFailure (121)
//!   and mongod's `errInfo` (`failingDocumentId`, `details`); `warn` lets it through and
//!   reports it to the warning sink (the server's log).
//! - `bypassDocumentValidation: true` on a write skips the check.

use bson::{doc, Bson, Document};
use query::error::{DocError, DocResult};
use query::matcher::Matcher;
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Off,
    Strict,
    Moderate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Error,
    Warn,
}

pub struct Validator {
    /// One matcher per top-level clause, with the clause (for the explanation).
    clauses: Vec<(String, Bson, Matcher)>,
    pub level: Level,
    pub action: Action,
}

/// Receives the warnings of `validationAction: warn`.
pub type WarningSink = Box<dyn Fn(&str) + Send + Sync>;

static WARNING_SINK: OnceLock<WarningSink> = OnceLock::new();

/// Where `validationAction: warn` reports documents that fail (the server sets its log).
pub fn set_warning_sink(f: WarningSink) {
    let _ = WARNING_SINK.set(f);
}

fn warn(msg: &str) {
    match WARNING_SINK.get() {
        Some(f) => f(msg),
        None => eprintln!("flashdoc: {msg}"),
    }
}

/// Validates `validator`, `validationLevel` and `validationAction` as `create` receives them.
pub fn check_options(o: &Document) -> DocResult<()> {
    Validator::from_options(o).map(|_| ())
}

impl Validator {
    /// The validator of a collection's options (None when it has none, or it is `{}`).
    pub fn from_options(o: &Document) -> DocResult<Option<Validator>> {
        let level = match o.get("validationLevel") {
            None => Level::Strict,
            Some(Bson::String(s)) => match s.as_str() {
                "off" => Level::Off,
                "strict" => Level::Strict,
                "moderate" => Level::Moderate,
                other => {
                    return Err(DocError::bad_value(format!(
                    "Enumeration value '{other}' for field 'validationLevel' is not a valid value."
                )))
                }
            },
            Some(_) => return Err(DocError::type_mismatch("validationLevel must be a string")),
        };
        let action = match o.get("validationAction") {
            None => Action::Error,
            Some(Bson::String(s)) => match s.as_str() {
                "error" => Action::Error,
                "warn" => Action::Warn,
                other => {
                    return Err(DocError::bad_value(format!(
                        "Enumeration value '{other}' for field 'validationAction' is not a valid value."
                    )))
                }
            },
            Some(_) => return Err(DocError::type_mismatch("validationAction must be a string")),
        };
        let spec = match o.get("validator") {
            None => return Ok(None),
            Some(Bson::Document(d)) => d,
            Some(_) => return Err(DocError::type_mismatch("'validator' must be an object")),
        };
        if spec.is_empty() {
            return Ok(None);
        }
        let mut clauses = Vec::new();
        for (k, v) in spec {
            if matches!(k.as_str(), "$text" | "$where" | "$near" | "$nearSphere") {
                return Err(DocError::with_code(
                    72,
                    "InvalidOptions",
                    format!("{k} is not allowed in collection validators"),
                ));
            }
            clauses.push((
                k.clone(),
                v.clone(),
                Matcher::new(&doc! {k.clone(): v.clone()})?,
            ));
        }
        Ok(Some(Validator {
            clauses,
            level,
            action,
        }))
    }

    pub fn matches(&self, d: &Document) -> bool {
        self.clauses.iter().all(|(_, _, m)| m.matches(d))
    }

    /// Checks a document to be inserted, or `new` replacing `old` in an update.
    pub fn check(&self, ns: &str, new: &Document, old: Option<&Document>) -> DocResult<()> {
        match self.level {
            Level::Off => return Ok(()),
            Level::Moderate if old.is_some_and(|o| !self.matches(o)) => return Ok(()),
            _ => {}
        }
        if self.matches(new) {
            return Ok(());
        }
        let id = new.get("_id").cloned().unwrap_or(Bson::Null);
        if self.action == Action::Warn {
            warn(&format!(
                "Document would fail validation: namespace {ns}, _id {id}, details {}",
                self.explain(new)
            ));
            return Ok(());
        }
        let mut e = DocError::with_code(
            121,
            "DocumentValidationFailure",
            "Document failed validation",
        );
        e.extra = Some(Box::new(
            doc! {"errInfo": {"failingDocumentId": id, "details": self.explain(new)}},
        ));
        Err(e)
    }

    /// mongod's `errInfo.details`: the failing clause's explanation, or `$and` with
    /// `clausesNotSatisfied` when the validator has several clauses.
    fn explain(&self, d: &Document) -> Document {
        let failing: Vec<(usize, Document)> = self
            .clauses
            .iter()
            .enumerate()
            .filter(|(_, (_, _, m))| !m.matches(d))
            .map(|(i, (k, v, _))| (i, explain_clause(k, v, d)))
            .collect();
        if self.clauses.len() == 1 {
            return failing.into_iter().next().map(|x| x.1).unwrap_or_default();
        }
        doc! {
            "operatorName": "$and",
            "clausesNotSatisfied": failing
                .into_iter()
                .map(|(i, details)| Bson::Document(doc! {"index": i as i32, "details": details}))
                .collect::<Vec<_>>(),
        }
    }
}

fn explain_clause(k: &str, v: &Bson, d: &Document) -> Document {
    if k == "$jsonSchema" {
        if let Bson::Document(s) = v {
            if let Ok(schema) = query::jsonschema::Schema::parse(s) {
                return schema.explain_doc(d);
            }
        }
    }
    if k.starts_with('$') {
        return doc! {"operatorName": k, "specifiedAs": {k: v.clone()}, "reason": "expression did not match"};
    }
    let op = match v {
        Bson::Document(c) if c.keys().next().is_some_and(|o| o.starts_with('$')) => {
            c.keys().next().cloned().unwrap_or_default()
        }
        _ => "$eq".to_string(),
    };
    let values = query::path::traverse_path(d, k);
    let present: Vec<Bson> = values.iter().filter_map(|r| r.value.cloned()).collect();
    let mut out = doc! {"operatorName": op, "specifiedAs": {k: v.clone()}};
    if present.is_empty() {
        out.insert("reason", "field was missing");
    } else {
        out.insert("reason", "comparison failed");
        out.insert(
            "consideredValue",
            if present.len() == 1 {
                present.into_iter().next().expect("one")
            } else {
                Bson::Array(present)
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_actions_and_errinfo() {
        let v =
            Validator::from_options(&doc! {"validator": {"a": {"$gt": 5}, "b": {"$exists": true}}})
                .unwrap()
                .unwrap();
        assert!(v
            .check("d.c", &doc! {"_id": 1, "a": 6, "b": 1}, None)
            .is_ok());
        let e = v.check("d.c", &doc! {"_id": 2, "a": 3}, None).unwrap_err();
        assert_eq!(e.code, 121);
        let info = e.extra.unwrap();
        let info = info.get_document("errInfo").unwrap();
        assert_eq!(info.get_i32("failingDocumentId").unwrap(), 2);
        let details = info.get_document("details").unwrap();
        assert_eq!(details.get_str("operatorName").unwrap(), "$and");
        assert_eq!(details.get_array("clausesNotSatisfied").unwrap().len(), 2);
        // moderate: updates of already-invalid documents are let through.
        let m = Validator::from_options(
            &doc! {"validator": {"a": {"$gt": 5}}, "validationLevel": "moderate"},
        )
        .unwrap()
        .unwrap();
        assert!(m.check("d.c", &doc! {"a": 1}, Some(&doc! {"a": 0})).is_ok());
        assert!(m
            .check("d.c", &doc! {"a": 1}, Some(&doc! {"a": 9}))
            .is_err());
        let w = Validator::from_options(&doc! {"validator": {"a": 1}, "validationAction": "warn"})
            .unwrap()
            .unwrap();
        assert!(w.check("d.c", &doc! {"a": 2}, None).is_ok());
        let off = Validator::from_options(&doc! {"validator": {"a": 1}, "validationLevel": "off"})
            .unwrap()
            .unwrap();
        assert!(off.check("d.c", &doc! {"a": 2}, None).is_ok());
        assert!(
            Validator::from_options(&doc! {"validator": {"a": 1}, "validationLevel": "loose"})
                .is_err()
        );
        assert!(Validator::from_options(&doc! {"validator": {"$where": "1"}}).is_err());
        let s = Validator::from_options(&doc! {"validator": {"$jsonSchema": {"required": ["x"]}}})
            .unwrap()
            .unwrap();
        let e = s.check("d.c", &doc! {"_id": 3}, None).unwrap_err();
        let d = e.extra.unwrap();
        let details = d
            .get_document("errInfo")
            .unwrap()
            .get_document("details")
            .unwrap();
        assert_eq!(details.get_str("operatorName").unwrap(), "$jsonSchema");
    }
}
