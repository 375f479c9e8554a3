//! Partial indexes (`partialFilterExpression`): the filter's validation (mongod's operator
//! list and errors), and the planner's test that a query *implies* the filter — only then does
//! every document the query can match have entries in the index.
//!
//! Implication is decided per conjunct of the filter (its top level and `$and`s): some
//! predicate of the query's own top level (and `$and`s) on the same path must be at least as
//! restrictive — `{a: 5}` implies `{a: {$gt: 1}}`, `{a: {$exists: true}}` and `{a: {$in: [5,
//! 6]}}`; `{a: {$gt: 5}}` implies `{a: {$gte: 5}}`. A filter `$or` is implied when one of its
//! branches is. Anything else is "not implied", which only costs an index the planner could
//! have used (a false "implied" would lose documents, so every rule is conservative).

use bson::{Bson, Document};
use query::compare::{bson_equal, canonical_type_rank, compare_bson, Num};
use query::error::{DocError, DocResult};
use query::matcher::Matcher;
use std::cmp::Ordering;
use std::sync::Arc;

/// A validated `partialFilterExpression` and its compiled matcher.
#[derive(Clone, Debug)]
pub struct PartialFilter {
    pub filter: Document,
    pub matcher: Arc<Matcher>,
}

impl PartialEq for PartialFilter {
    fn eq(&self, other: &Self) -> bool {
        self.filter == other.filter
    }
}

impl PartialFilter {
    /// Validates a `partialFilterExpression` as mongod does: parse errors are the matcher's;
    /// an operator a partial index cannot hold is CannotCreateIndex (67).
    pub fn parse(v: &Bson) -> DocResult<PartialFilter> {
        let Bson::Document(filter) = v else {
            return Err(DocError::type_mismatch(format!(
                "The field 'partialFilterExpression' must be an object, but got {}",
                query::compare::type_name(v)
            )));
        };
        let matcher = Matcher::new(filter)?;
        check_supported(filter, 0)?;
        Ok(PartialFilter {
            filter: filter.clone(),
            matcher: Arc::new(matcher),
        })
    }

    pub fn matches(&self, doc: &Document) -> bool {
        self.matcher.matches(doc)
    }
}

fn unsupported(what: impl std::fmt::Display) -> DocError {
    DocError::with_code(
        67,
        "CannotCreateIndex",
        format!("Expression not supported in partial index: {what}"),
    )
}

/// mongod's list: equality, `$exists: true`, `$gt/$gte/$lt/$lte`, `$type`, `$in`, and `$and`
/// and `$or` at the top level.
fn check_supported(filter: &Document, level: usize) -> DocResult<()> {
    for (k, v) in filter {
        match k.as_str() {
            "$and" | "$or" => {
                if level > 0 {
                    return Err(DocError::with_code(
                        67,
                        "CannotCreateIndex",
                        format!("{k} only supported in partialFilterExpression at top level"),
                    ));
                }
                for e in v.as_array().into_iter().flatten() {
                    if let Bson::Document(d) = e {
                        check_supported(d, level + 1)?;
                    }
                }
            }
            op if op.starts_with('$') => return Err(unsupported(op)),
            path => match v {
                Bson::RegularExpression(_) => return Err(unsupported(format!("{path} regex"))),
                Bson::Document(d) if d.keys().next().is_some_and(|x| x.starts_with('$')) => {
                    for (op, arg) in d {
                        let ok = match op.as_str() {
                            "$eq" | "$gt" | "$gte" | "$lt" | "$lte" | "$type" | "$in" => true,
                            "$exists" => is_true(arg),
                            _ => false,
                        };
                        if !ok {
                            return Err(unsupported(format!("{path} {op}")));
                        }
                    }
                }
                _ => {}
            },
        }
    }
    Ok(())
}

fn is_true(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        other => Num::of(other).is_none_or(|n| n.as_f64() != 0.0),
    }
}

/// One path predicate, as both sides of an implication see it.
#[derive(Debug)]
enum Atom {
    Eq(Bson),
    Gt(Bson, bool),
    Lt(Bson, bool),
    In(Vec<Bson>),
    Exists,
    Type(Vec<Bson>),
}

enum Conjunct {
    Path(String, Atom),
    /// A filter `$or`: the branches' own conjuncts.
    Or(Vec<Vec<Conjunct>>),
}

fn atoms_of(path: &str, v: &Bson, out: &mut Vec<Conjunct>) {
    let push = |out: &mut Vec<Conjunct>, a| out.push(Conjunct::Path(path.to_string(), a));
    match v {
        Bson::Document(d) if d.keys().next().is_some_and(|x| x.starts_with('$')) => {
            for (op, arg) in d {
                match op.as_str() {
                    "$eq" => push(out, Atom::Eq(arg.clone())),
                    "$gt" => push(out, Atom::Gt(arg.clone(), false)),
                    "$gte" => push(out, Atom::Gt(arg.clone(), true)),
                    "$lt" => push(out, Atom::Lt(arg.clone(), false)),
                    "$lte" => push(out, Atom::Lt(arg.clone(), true)),
                    "$in" => {
                        if let Some(a) = arg.as_array() {
                            push(out, Atom::In(a.clone()))
                        }
                    }
                    "$exists" if is_true(arg) => push(out, Atom::Exists),
                    "$type" => push(
                        out,
                        Atom::Type(match arg {
                            Bson::Array(a) => a.clone(),
                            one => vec![one.clone()],
                        }),
                    ),
                    _ => {}
                }
            }
        }
        Bson::RegularExpression(_) => {}
        other => push(out, Atom::Eq(other.clone())),
    }
}

/// The conjuncts of a filter: its top level and `$and`s (and, when `with_or`, its `$or`s).
fn conjuncts(filter: &Document, with_or: bool, out: &mut Vec<Conjunct>) {
    for (k, v) in filter {
        match k.as_str() {
            "$and" => {
                for d in v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Bson::as_document)
                {
                    conjuncts(d, with_or, out);
                }
            }
            "$or" if with_or => {
                let branches = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Bson::as_document)
                    .map(|d| {
                        let mut b = Vec::new();
                        conjuncts(d, false, &mut b);
                        b
                    })
                    .collect();
                out.push(Conjunct::Or(branches));
            }
            k if k.starts_with('$') => {}
            path => atoms_of(path, v, out),
        }
    }
}

/// Whether every document `query` matches also matches the partial filter.
pub fn implies(query: &Document, filter: &PartialFilter) -> bool {
    let mut have = Vec::new();
    conjuncts(query, false, &mut have);
    let mut need = Vec::new();
    conjuncts(&filter.filter, true, &mut need);
    need.iter().all(|n| conjunct_implied(&have, n))
}

fn conjunct_implied(have: &[Conjunct], need: &Conjunct) -> bool {
    match need {
        Conjunct::Path(path, atom) => have.iter().any(|h| match h {
            Conjunct::Path(p, a) => p == path && atom_implies(a, atom),
            Conjunct::Or(_) => false,
        }),
        Conjunct::Or(branches) => branches
            .iter()
            .any(|b| b.iter().all(|n| conjunct_implied(have, n))),
    }
}

/// Values compare within one type bracket only (as the matcher's comparisons do).
fn cmp_same_bracket(a: &Bson, b: &Bson) -> Option<Ordering> {
    (canonical_type_rank(a) == canonical_type_rank(b)
        && !matches!(a, Bson::Array(_) | Bson::Null | Bson::Undefined)
        && !matches!(b, Bson::Array(_)))
    .then(|| compare_bson(a, b))
}

/// Whether one value satisfies a filter atom, as a single (non-array) value.
fn value_satisfies(v: &Bson, need: &Atom) -> bool {
    if matches!(
        v,
        Bson::Array(_) | Bson::Document(_) | Bson::RegularExpression(_)
    ) {
        // An array or document operand matches by whole-value rules; leave it unproved.
        return matches!(need, Atom::Eq(x) if bson_equal(x, v));
    }
    match need {
        Atom::Eq(x) => bson_equal(x, v),
        Atom::In(xs) => xs.iter().any(|x| bson_equal(x, v)),
        Atom::Exists => !matches!(v, Bson::Null | Bson::Undefined),
        Atom::Gt(x, incl) => cmp_same_bracket(v, x)
            .is_some_and(|o| o == Ordering::Greater || (*incl && o == Ordering::Equal)),
        Atom::Lt(x, incl) => cmp_same_bracket(v, x)
            .is_some_and(|o| o == Ordering::Less || (*incl && o == Ordering::Equal)),
        Atom::Type(ts) => ts.iter().any(|t| type_selects(t, v)),
    }
}

fn type_selects(t: &Bson, v: &Bson) -> bool {
    let code = query::matcher::bson_type_code(v);
    match t {
        Bson::String(s) if s == "number" => Num::of(v).is_some(),
        Bson::String(s) => query::compare::TYPE_CODES
            .iter()
            .any(|(n, c)| n == s && *c == code),
        other => Num::of(other).and_then(|n| n.as_i64_exact()) == Some(code as i64),
    }
}

fn atom_implies(have: &Atom, need: &Atom) -> bool {
    match have {
        Atom::Eq(v) => value_satisfies(v, need),
        Atom::In(vs) => !vs.is_empty() && vs.iter().all(|v| value_satisfies(v, need)),
        Atom::Exists => matches!(need, Atom::Exists),
        Atom::Gt(x, incl) => match need {
            Atom::Exists => !matches!(x, Bson::Null | Bson::MinKey),
            Atom::Gt(y, need_incl) => cmp_same_bracket(x, y).is_some_and(|o| {
                o == Ordering::Greater || (o == Ordering::Equal && (*need_incl || !*incl))
            }),
            _ => false,
        },
        Atom::Lt(x, incl) => match need {
            Atom::Exists => !matches!(x, Bson::Null | Bson::MaxKey) && !*incl,
            Atom::Lt(y, need_incl) => cmp_same_bracket(x, y).is_some_and(|o| {
                o == Ordering::Less || (o == Ordering::Equal && (*need_incl || !*incl))
            }),
            _ => false,
        },
        Atom::Type(ts) => match need {
            Atom::Type(want) => ts.iter().all(|t| want.iter().any(|w| bson_equal(t, w))),
            Atom::Exists => ts
                .iter()
                .all(|t| !type_selects(t, &Bson::Null) && !type_selects(t, &Bson::Undefined)),
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn pf(d: Document) -> PartialFilter {
        PartialFilter::parse(&Bson::Document(d)).unwrap()
    }

    #[test]
    fn supported_operators_and_errors() {
        let code = |d: Document| {
            PartialFilter::parse(&Bson::Document(d))
                .err()
                .map(|e| e.code)
        };
        assert_eq!(code(doc! {"a": {"$exists": true}, "b": {"$gt": 5}}), None);
        assert_eq!(code(doc! {"$or": [{"a": 1}, {"b": {"$in": [1, 2]}}]}), None);
        assert_eq!(code(doc! {"a": {"$type": "string"}}), None);
        assert_eq!(code(doc! {"a": {"$exists": false}}), Some(67));
        assert_eq!(code(doc! {"a": {"$ne": 1}}), Some(67));
        assert_eq!(code(doc! {"$nor": [{"a": 1}]}), Some(67));
        assert_eq!(code(doc! {"$and": [{"$and": [{"a": 1}]}]}), Some(67));
        assert_eq!(code(doc! {"a": {"$bogus": 1}}), Some(2));
        assert_eq!(
            PartialFilter::parse(&Bson::Int32(1)).err().map(|e| e.code),
            Some(14)
        );
    }

    #[test]
    fn implication() {
        let deleted = pf(doc! {"deleted": false});
        assert!(implies(&doc! {"email": "x", "deleted": false}, &deleted));
        assert!(implies(
            &doc! {"$and": [{"email": "x"}, {"deleted": {"$eq": false}}]},
            &deleted
        ));
        assert!(!implies(&doc! {"email": "x"}, &deleted));
        assert!(!implies(&doc! {"deleted": true}, &deleted));
        let gt = pf(doc! {"r": {"$gt": 5}});
        assert!(implies(&doc! {"r": 7}, &gt));
        assert!(implies(&doc! {"r": {"$gt": 5}}, &gt));
        assert!(implies(&doc! {"r": {"$gte": 6}}, &gt));
        assert!(!implies(&doc! {"r": {"$gte": 5}}, &gt));
        assert!(!implies(&doc! {"r": 5}, &gt));
        assert!(!implies(&doc! {"r": "7"}, &gt));
        assert!(implies(&doc! {"r": {"$in": [6, 9]}}, &gt));
        assert!(!implies(&doc! {"r": {"$in": [6, 2]}}, &gt));
        let ex = pf(doc! {"a": {"$exists": true}});
        assert!(implies(&doc! {"a": 1}, &ex));
        assert!(!implies(&doc! {"a": null}, &ex));
        assert!(implies(&doc! {"a": {"$gt": 1}}, &ex));
        let or = pf(doc! {"$or": [{"a": 1}, {"b": 2}]});
        assert!(implies(&doc! {"b": 2, "c": 3}, &or));
        assert!(!implies(&doc! {"c": 3}, &or));
        let ty = pf(doc! {"a": {"$type": "string"}});
        assert!(implies(&doc! {"a": "s"}, &ty));
        assert!(!implies(&doc! {"a": 1}, &ty));
        let inl = pf(doc! {"s": {"$in": ["A", "B"]}});
        assert!(implies(&doc! {"s": {"$in": ["A"]}}, &inl));
        assert!(!implies(&doc! {"s": {"$in": ["A", "C"]}}, &inl));
    }
}
