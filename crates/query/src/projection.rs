//! Projections: find's `projection` and aggregation's `$project`.
//!
//! Inclusion (`{a: 1, "b.c": 1}`, computed fields `{x: "$a"}`) or exclusion (`{a: 0}`), never
//! both except for `_id`, which is included unless excluded. Dotted paths reach into embedded
//! documents and arrays of documents. Find projections also support `$slice`, `$elemMatch` and
//! the positional `a.$`.

use bson::{Bson, Document};

use crate::compare::Num;
use crate::error::{DocError, DocResult};
use crate::expr::{parse_expr, Ctx, Expr};
use crate::matcher::Matcher;

#[derive(Clone, Debug)]
enum Action {
    Include,
    Exclude,
    Expr(Expr),
    /// `$slice`: (skip, limit) where skip may be negative (from the end); limit None = n form.
    Slice(i64, Option<i64>),
    ElemMatch(Box<Matcher>),
    Positional,
    Sub(Vec<(String, Action)>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Inclusion,
    Exclusion,
}

/// A parsed projection.
#[derive(Clone, Debug)]
pub struct Projection {
    mode: Mode,
    spec: Vec<(String, Action)>,
    id: bool,
    positional: bool,
    /// Fields a find projection sets to the text score (`{score: {$meta: "textScore"}}`).
    meta: Vec<String>,
    /// The command's `let` variables, which the projection's expressions read.
    scope: crate::vars::Scope,
}

fn collision(path: &str, remaining: &str) -> DocError {
    DocError::with_code(
        31250,
        "Location31250",
        format!("Path collision at {path} remaining portion {remaining}"),
    )
}

fn insert_action(
    spec: &mut Vec<(String, Action)>,
    parts: &[&str],
    full: &str,
    action: Action,
) -> DocResult<()> {
    let key = parts[0];
    let pos = spec.iter().position(|(k, _)| k == key);
    if parts.len() == 1 {
        if pos.is_some() {
            return Err(DocError::with_code(
                31249,
                "Location31249",
                format!("Path collision at {full}"),
            ));
        }
        spec.push((key.to_string(), action));
        return Ok(());
    }
    let idx = match pos {
        Some(i) => i,
        None => {
            spec.push((key.to_string(), Action::Sub(Vec::new())));
            spec.len() - 1
        }
    };
    match &mut spec[idx].1 {
        Action::Sub(children) => insert_action(children, &parts[1..], full, action),
        _ => Err(collision(full, &parts[1..].join("."))),
    }
}

fn is_truthy_flag(v: &Bson) -> Option<bool> {
    match v {
        Bson::Boolean(b) => Some(*b),
        other => Num::of(other).map(|n| n.as_f64() != 0.0),
    }
}

/// A find projection's `$elemMatch` on the top-level field `path`.
fn elem_match_action(path: &str, d: &Document) -> DocResult<Action> {
    if path.contains('.') {
        return Err(DocError::bad_value(
            "Cannot use $elemMatch projection on a nested field.",
        ));
    }
    let Some(Bson::Document(q)) = d.get("$elemMatch") else {
        return Err(DocError::bad_value(
            "elemMatch: Invalid argument, object required.",
        ));
    };
    let m = Matcher::new(&bson::doc! {path: {"$elemMatch": q.clone()}})?;
    Ok(Action::ElemMatch(Box::new(m)))
}

/// The projection's mode once field `path` decides `dm`: an inclusion and an exclusion do
/// not mix.
fn check_mode(mode: Option<Mode>, dm: Mode, path: &str) -> DocResult<Mode> {
    match mode {
        None => {}
        Some(m) if m != dm => {
            return Err(if dm == Mode::Exclusion {
                DocError::with_code(
                    31254,
                    "Location31254",
                    format!("Cannot do exclusion on field {path} in inclusion projection"),
                )
            } else {
                DocError::with_code(
                    31253,
                    "Location31253",
                    format!("Cannot do inclusion on field {path} in exclusion projection"),
                )
            });
        }
        _ => {}
    }

    Ok(dm)
}

impl Projection {
    /// Parses a find projection.
    pub fn parse(p: &Document) -> DocResult<Projection> {
        Self::parse_mode(p, true)
    }

    /// Parses an aggregation `$project` specification (`$slice`/`$elemMatch` are expressions
    /// there, and the specification must not be empty).
    pub fn parse_aggregation(p: &Document) -> DocResult<Projection> {
        if p.is_empty() {
            return Err(DocError::with_code(
                51272,
                "Location51272",
                "Invalid $project :: caused by :: projection specification must have at least one field",
            ));
        }
        Self::parse_mode(p, false)
    }

    fn parse_mode(p: &Document, find: bool) -> DocResult<Projection> {
        let mut spec = Vec::new();
        let mut mode: Option<Mode> = None;
        let mut id = true;
        let mut positional = false;
        let mut flat = Vec::new();
        let mut meta = Vec::new();
        flatten(p, "", &mut flat)?;
        for (path, v) in flat {
            crate::limits::check_path(&path)?;
            let is_id = path == "_id";
            let (action, decisive) = if let Some(b) = is_truthy_flag(&v) {
                if b {
                    (Action::Include, Some(Mode::Inclusion))
                } else {
                    (Action::Exclude, Some(Mode::Exclusion))
                }
            } else if let (true, Bson::Document(d)) = (find, &v) {
                match d.keys().next().map(String::as_str) {
                    Some("$slice") => (parse_slice(d.get("$slice").expect("key"))?, None),
                    Some("$elemMatch") => (elem_match_action(&path, d)?, Some(Mode::Inclusion)),
                    Some("$meta") => {
                        // A find projection's $meta neither includes nor excludes: the field
                        // is added to whatever the rest of the projection keeps.
                        crate::expr::parse_expr(&v)?;
                        if path.contains('.') {
                            return Err(DocError::bad_value(format!(
                                "a $meta projection must name a top-level field, found {path}"
                            )));
                        }
                        meta.push(path);
                        continue;
                    }
                    _ => (Action::Expr(parse_expr(&v)?), Some(Mode::Inclusion)),
                }
            } else {
                (Action::Expr(parse_expr(&v)?), Some(Mode::Inclusion))
            };
            let (path, action) = if find && path.ends_with(".$") {
                if positional {
                    return Err(DocError::bad_value(
                        "Cannot specify more than one positional proj. per query.",
                    ));
                }
                positional = true;
                (path[..path.len() - 2].to_string(), Action::Positional)
            } else {
                (path, action)
            };
            if is_id && matches!(action, Action::Exclude) {
                id = false;
                continue;
            }
            if is_id && matches!(action, Action::Include) {
                continue;
            }
            if let Some(dm) = decisive {
                mode = Some(check_mode(mode, dm, &path)?);
            }
            let parts: Vec<&str> = path.split('.').collect();
            insert_action(&mut spec, &parts, &path, action)?;
        }
        let mode = mode.unwrap_or(if !id && spec.is_empty() && p.len() == 1 {
            Mode::Exclusion
        } else if spec.is_empty() && p.contains_key("_id") && id {
            // {_id: 1} alone: only _id.
            Mode::Inclusion
        } else {
            Mode::Exclusion
        });
        Ok(Projection {
            mode,
            spec,
            id,
            positional,
            meta,
            scope: crate::vars::Scope::default(),
        })
    }

    /// The projection with the command's `let` variables in scope for its expressions.
    pub fn with_scope(mut self, scope: &crate::vars::Scope) -> Projection {
        self.scope = scope.clone();
        self
    }

    /// Whether the projection uses the positional `$` (then use [`Projection::apply_with_position`]).
    pub fn needs_position(&self) -> bool {
        self.positional
    }

    /// Applies the projection.
    pub fn apply(&self, doc: &Document) -> Document {
        self.apply_inner(doc, None).unwrap_or_else(|_| doc.clone())
    }

    /// Applies the projection with the array index the query matched at (for `a.$`).
    pub fn apply_with_position(&self, doc: &Document, pos: Option<usize>) -> DocResult<Document> {
        if self.positional && pos.is_none() {
            return Err(DocError::with_code(
                51246,
                "Location51246",
                "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array",
            ));
        }
        self.apply_inner(doc, pos)
    }

    /// Applies the projection to a document `filter` selected: a positional projection (`a.$`)
    /// re-matches the filter to find the array index it matched at.
    pub fn apply_matched(&self, doc: &Document, filter: Option<&Matcher>) -> DocResult<Document> {
        if !self.positional {
            return Ok(self.apply(doc));
        }
        let pos = filter.and_then(|f| f.matches_with_position(doc).1);
        self.apply_with_position(doc, pos)
    }

    fn apply_inner(&self, doc: &Document, pos: Option<usize>) -> DocResult<Document> {
        let mut out = self.apply_mode(doc, pos)?;
        // The text score rides along (a later stage or the find's end takes it off).
        if let Some(score) = doc.get(crate::text::SCORE_FIELD) {
            for name in &self.meta {
                out.insert(name.clone(), score.clone());
            }
            out.insert(crate::text::SCORE_FIELD, score.clone());
        }
        Ok(out)
    }

    fn apply_mode(&self, doc: &Document, pos: Option<usize>) -> DocResult<Document> {
        let ctx = Ctx::scoped(doc, &self.scope);
        match self.mode {
            Mode::Inclusion => {
                let mut out = include_doc(&self.spec, doc, &ctx, pos, true, self.id)?;
                if !self.id {
                    out.remove("_id");
                }
                Ok(out)
            }
            Mode::Exclusion => {
                let mut out = exclude_doc(&self.spec, doc);
                if !self.id {
                    out.remove("_id");
                }
                Ok(out)
            }
        }
    }
}

/// Flattens nested specs `{a: {b: 1}}` into dotted paths; leaves operator documents alone.
fn flatten(p: &Document, prefix: &str, out: &mut Vec<(String, Bson)>) -> DocResult<()> {
    for (k, v) in p {
        if k.starts_with('$') {
            return Err(DocError::with_code(
                16410,
                "Location16410",
                format!("FieldPath field names may not start with '$'. ('{k}')"),
            ));
        }
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Bson::Document(d) if d.is_empty() => {
                return Err(DocError::with_code(
                    51270,
                    "Location51270",
                    format!("An empty sub-projection is not a valid value. Found empty object at path {path}"),
                ))
            }
            Bson::Document(d) if !d.keys().next().is_some_and(|f| f.starts_with('$')) => {
                flatten(d, &path, out)?
            }
            _ => out.push((path, v.clone())),
        }
    }
    Ok(())
}

fn parse_slice(v: &Bson) -> DocResult<Action> {
    match v {
        Bson::Array(a) => {
            if a.len() != 2 {
                return Err(DocError::with_code(
                    28724,
                    "Location28724",
                    "First argument to $slice must be an array",
                ));
            }
            let skip = Num::of(&a[0]).map(|n| n.as_f64() as i64);
            let limit = Num::of(&a[1]).map(|n| n.as_f64() as i64);
            match (skip, limit) {
                (Some(s), Some(l)) if l > 0 => Ok(Action::Slice(s, Some(l))),
                (Some(_), Some(_)) => Err(DocError::with_code(
                    28724,
                    "Location28724",
                    "$slice limit must be positive",
                )),
                _ => Err(DocError::with_code(
                    28724,
                    "Location28724",
                    "$slice only supports numbers",
                )),
            }
        }
        other => match Num::of(other) {
            Some(n) => Ok(Action::Slice(n.as_f64() as i64, None)),
            None => Err(DocError::with_code(
                28667,
                "Location28667",
                "$slice only supports numbers and [skip, limit] arrays",
            )),
        },
    }
}

fn slice_value(v: &Bson, skip: i64, limit: Option<i64>) -> Bson {
    let Bson::Array(a) = v else { return v.clone() };
    let len = a.len() as i64;
    let (start, n) = match limit {
        None => {
            if skip >= 0 {
                (0, skip)
            } else {
                ((len + skip).max(0), -skip)
            }
        }
        Some(l) => {
            let s = if skip < 0 {
                (len + skip).max(0)
            } else {
                skip.min(len)
            };
            (s, l)
        }
    };
    Bson::Array(
        a.iter()
            .skip(start as usize)
            .take(n as usize)
            .cloned()
            .collect(),
    )
}

fn include_doc(
    spec: &[(String, Action)],
    doc: &Document,
    ctx: &Ctx,
    pos: Option<usize>,
    top: bool,
    keep_id: bool,
) -> DocResult<Document> {
    let mut out = Document::new();
    for (k, v) in doc {
        let Some((_, action)) = spec.iter().find(|(n, _)| n == k) else {
            if top && k == "_id" && keep_id {
                out.insert(k.clone(), v.clone());
            }
            continue;
        };
        match action {
            Action::Include => {
                out.insert(k.clone(), v.clone());
            }
            Action::Sub(children) => match v {
                Bson::Document(d) => {
                    out.insert(k.clone(), include_doc(children, d, ctx, pos, false, false)?);
                }
                Bson::Array(a) => {
                    out.insert(k.clone(), include_array(children, a, ctx, pos)?);
                }
                _ => {}
            },
            Action::Slice(s, l) => {
                out.insert(k.clone(), slice_value(v, *s, *l));
            }
            Action::ElemMatch(m) => {
                if let Bson::Array(a) = v {
                    let wrapped = Document::from_iter([(k.clone(), v.clone())]);
                    let (hit, idx) = m.matches_with_position(&wrapped);
                    if let (true, Some(i)) = (hit, idx) {
                        out.insert(k.clone(), Bson::Array(vec![a[i].clone()]));
                    }
                }
            }
            Action::Positional => {
                if let (Bson::Array(a), Some(i)) = (v, pos) {
                    if let Some(e) = a.get(i) {
                        out.insert(k.clone(), Bson::Array(vec![e.clone()]));
                    }
                }
            }
            Action::Expr(_) | Action::Exclude => {}
        }
    }
    // Computed fields, in specification order, after the included ones.
    for (k, action) in spec {
        match action {
            Action::Expr(e) => {
                if let Some(v) = e.eval(ctx)? {
                    out.insert(k.clone(), v);
                }
            }
            Action::Sub(children) if !doc.contains_key(k) && has_expr(children) => {
                let sub = include_doc(children, &Document::new(), ctx, pos, false, false)?;
                out.insert(k.clone(), sub);
            }
            _ => {}
        }
    }
    Ok(out)
}

fn has_expr(spec: &[(String, Action)]) -> bool {
    spec.iter().any(|(_, a)| match a {
        Action::Expr(_) => true,
        Action::Sub(c) => has_expr(c),
        _ => false,
    })
}

fn include_array(
    spec: &[(String, Action)],
    a: &[Bson],
    ctx: &Ctx,
    pos: Option<usize>,
) -> DocResult<Bson> {
    let mut out = Vec::new();
    for e in a {
        match e {
            Bson::Document(d) => out.push(Bson::Document(include_doc(
                spec, d, ctx, pos, false, false,
            )?)),
            Bson::Array(inner) => out.push(include_array(spec, inner, ctx, pos)?),
            _ if has_expr(spec) => out.push(Bson::Document(include_doc(
                spec,
                &Document::new(),
                ctx,
                pos,
                false,
                false,
            )?)),
            _ => {}
        }
    }
    Ok(Bson::Array(out))
}

fn exclude_doc(spec: &[(String, Action)], doc: &Document) -> Document {
    let mut out = doc.clone();
    for (k, action) in spec {
        match action {
            Action::Exclude => {
                out.remove(k);
            }
            Action::Sub(children) => {
                if let Some(v) = out.get_mut(k) {
                    exclude_value(children, v);
                }
            }
            Action::Slice(s, l) => {
                if let Some(v) = out.get_mut(k) {
                    *v = slice_value(v, *s, *l);
                }
            }
            _ => {}
        }
    }
    out
}

fn exclude_value(spec: &[(String, Action)], v: &mut Bson) {
    match v {
        Bson::Document(d) => *d = exclude_doc(spec, d),
        Bson::Array(a) => a.iter_mut().for_each(|e| exclude_value(spec, e)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn p(spec: Document, d: Document) -> Document {
        Projection::parse(&spec).unwrap().apply(&d)
    }

    fn perr(spec: Document) -> DocError {
        Projection::parse(&spec).unwrap_err()
    }

    #[test]
    fn inclusion_exclusion() {
        let d =
            doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, {"x": 1}, 5]};
        assert_eq!(p(doc! {"a": 1}, d.clone()), doc! {"_id": 1, "a": 1});
        assert_eq!(p(doc! {"a": true, "_id": 0}, d.clone()), doc! {"a": 1});
        assert_eq!(
            p(doc! {"b.c": 1}, d.clone()),
            doc! {"_id": 1, "b": {"c": 2}}
        );
        assert_eq!(
            p(doc! {"b": {"c": 1}}, d.clone()),
            doc! {"_id": 1, "b": {"c": 2}}
        );
        assert_eq!(
            p(doc! {"e.c": 1}, d.clone()),
            doc! {"_id": 1, "e": [{"c": 1}, {}]}
        );
        assert_eq!(p(doc! {"zz": 1}, d.clone()), doc! {"_id": 1});
        assert_eq!(p(doc! {"_id": 1}, d.clone()), doc! {"_id": 1});
        assert_eq!(
            p(doc! {"a": 0}, d.clone()),
            doc! {"_id": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, {"x": 1}, 5]}
        );
        assert_eq!(
            p(doc! {"_id": 0}, d.clone()),
            doc! {"a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, {"x": 1}, 5]}
        );
        assert_eq!(
            p(doc! {"b.c": 0, "e.x": 0, "_id": 0}, d.clone()),
            doc! {"a": 1, "b": {"d": 3}, "e": [{"c": 1}, {}, 5]}
        );
        assert_eq!(p(doc! {}, d.clone()), d.clone());
        // Included fields keep document order.
        assert_eq!(
            p(doc! {"b": 1, "a": 1}, d.clone()),
            doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}}
        );
    }

    #[test]
    fn errors() {
        let e = perr(doc! {"a": 1, "b": 0});
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                31254,
                "Cannot do exclusion on field b in inclusion projection"
            )
        );
        let e = perr(doc! {"a": 0, "b": 1});
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                31253,
                "Cannot do inclusion on field b in exclusion projection"
            )
        );
        assert_eq!(perr(doc! {"a": 1, "a.b": 1}).code, 31250);
        assert_eq!(perr(doc! {"a.b": 1, "a": 1}).code, 31249);
        assert_eq!(perr(doc! {"a": {}}).code, 51270);
        assert!(Projection::parse(&doc! {"_id": 0, "a": 1}).is_ok());
        assert!(Projection::parse(&doc! {"_id": 1, "a": 0}).is_ok());
        assert_eq!(
            Projection::parse_aggregation(&doc! {}).unwrap_err().code,
            51272
        );
    }

    #[test]
    fn computed_slice_elem_match_positional() {
        let d =
            doc! {"_id": 1, "a": 2, "arr": [1, 2, 3, 4, 5], "docs": [{"x": 1}, {"x": 2, "y": 1}]};
        assert_eq!(
            p(doc! {"a": 1, "twice": {"$multiply": ["$a", 2]}}, d.clone()),
            doc! {"_id": 1, "a": 2, "twice": 4}
        );
        assert_eq!(
            p(doc! {"lit": "hello", "_id": 0}, d.clone()),
            doc! {"lit": "hello"}
        );
        assert_eq!(
            p(doc! {"n.m": "$a", "_id": 0}, d.clone()),
            doc! {"n": {"m": 2}}
        );
        assert_eq!(
            p(doc! {"arr": {"$slice": 2}, "docs": 0}, d.clone()),
            doc! {"_id": 1, "a": 2, "arr": [1, 2]}
        );
        assert_eq!(
            p(doc! {"arr": {"$slice": -2}, "a": 1}, d.clone()),
            doc! {"_id": 1, "a": 2, "arr": [4, 5]}
        );
        assert_eq!(
            p(
                doc! {"arr": {"$slice": [1, 2]}, "a": 1, "_id": 0},
                d.clone()
            ),
            doc! {"a": 2, "arr": [2, 3]}
        );
        assert_eq!(
            p(
                doc! {"arr": {"$slice": [-2, 5]}, "_id": 0, "a": 1},
                d.clone()
            ),
            doc! {"a": 2, "arr": [4, 5]}
        );
        assert_eq!(perr(doc! {"arr": {"$slice": [1, 0]}}).code, 28724);
        assert_eq!(
            p(doc! {"docs": {"$elemMatch": {"x": 2}}}, d.clone()),
            doc! {"_id": 1, "docs": [{"x": 2, "y": 1}]}
        );
        assert_eq!(
            p(doc! {"docs": {"$elemMatch": {"x": 9}}}, d.clone()),
            doc! {"_id": 1}
        );
        let pr = Projection::parse(&doc! {"arr.$": 1}).unwrap();
        assert!(pr.needs_position());
        assert_eq!(
            pr.apply_with_position(&d, Some(2)).unwrap(),
            doc! {"_id": 1, "arr": [3]}
        );
        assert_eq!(pr.apply_with_position(&d, None).unwrap_err().code, 51246);
        let _ = bson!(1);
    }

    #[test]
    fn aggregation_mode() {
        let d = doc! {"_id": 1, "a": [1, 2, 3]};
        let pr = Projection::parse_aggregation(&doc! {"s": {"$slice": ["$a", 1]}}).unwrap();
        assert_eq!(pr.apply(&d), doc! {"_id": 1, "s": [1]});
    }
}
