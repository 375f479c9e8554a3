//! The namespaces a pipeline names beyond its own input: the collections its joining stages
//! read (`$lookup`, `$graphLookup`, `$unionWith`, and those of the sub-pipelines in `$lookup`,
//! `$unionWith` and `$facet`, at any depth) and the ones its writing stages write (`$out`,
//! `$merge`). Authorization checks each of them (the server's `access` module); the view graph
//! (docdb's `views`) follows the reads.
//!
//! Every stage the parser knows has a rule here ([`STAGE_NAMESPACE_RULES`]); a test reads the
//! parser's match arms, so a new stage without a rule fails it.

use bson::{Bson, Document};

use super::out::Namespace;

/// What a stage does with a namespace it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Reads its documents (`$lookup`, `$graphLookup`, `$unionWith`).
    Read,
    /// Replaces the collection (`$out`): inserts, and removes what was there.
    Replace,
    /// Inserts into and updates the collection (`$merge`).
    Merge,
}

/// One namespace a stage names: in the pipeline's database unless `ns.db` says otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct StageNamespace {
    pub stage: &'static str,
    pub ns: Namespace,
    pub reach: Reach,
}

/// How a stage names namespaces other than the pipeline's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamespaceRule {
    /// None: it works on the documents it is given, on the input collection's own statistics
    /// (`$collStats`, `$indexStats`), on the server's operations (`$currentOp`, which the
    /// server checks on its own) or on none (`$documents`); or the parser refuses it.
    Own,
    /// `from` (a collection, or `{db, coll}`), and the sub-pipeline in `pipeline`.
    Lookup,
    /// `from`.
    GraphLookup,
    /// The collection as the whole spec, or `coll` and the sub-pipeline in `pipeline`.
    UnionWith,
    /// Every field is a sub-pipeline.
    Facet,
    /// The collection, or `{db, coll}`: replaced.
    Out,
    /// `into` (a collection or `{db, coll}`): merged into. Its `whenMatched` pipeline is an
    /// update pipeline, which names no collection.
    Merge,
}

/// Every stage name the stage parser (`parse::parse_stage`) knows, with its rule.
pub const STAGE_NAMESPACE_RULES: &[(&str, NamespaceRule)] = &[
    ("$match", NamespaceRule::Own),
    ("$project", NamespaceRule::Own),
    ("$addFields", NamespaceRule::Own),
    ("$set", NamespaceRule::Own),
    ("$unset", NamespaceRule::Own),
    ("$group", NamespaceRule::Own),
    ("$sort", NamespaceRule::Own),
    ("$skip", NamespaceRule::Own),
    ("$limit", NamespaceRule::Own),
    ("$unwind", NamespaceRule::Own),
    ("$count", NamespaceRule::Own),
    ("$lookup", NamespaceRule::Lookup),
    ("$unionWith", NamespaceRule::UnionWith),
    ("$facet", NamespaceRule::Facet),
    ("$bucket", NamespaceRule::Own),
    ("$bucketAuto", NamespaceRule::Own),
    ("$sample", NamespaceRule::Own),
    ("$graphLookup", NamespaceRule::GraphLookup),
    ("$setWindowFields", NamespaceRule::Own),
    ("$collStats", NamespaceRule::Own),
    ("$geoNear", NamespaceRule::Own),
    ("$currentOp", NamespaceRule::Own),
    ("$out", NamespaceRule::Out),
    ("$merge", NamespaceRule::Merge),
    ("$replaceRoot", NamespaceRule::Own),
    ("$replaceWith", NamespaceRule::Own),
    ("$sortByCount", NamespaceRule::Own),
    ("$changeStream", NamespaceRule::Own),
    ("$indexStats", NamespaceRule::Own),
    ("$listSessions", NamespaceRule::Own),
    ("$densify", NamespaceRule::Own),
    ("$fill", NamespaceRule::Own),
    ("$redact", NamespaceRule::Own),
    ("$search", NamespaceRule::Own),
    ("$documents", NamespaceRule::Own),
    ("$listLocalSessions", NamespaceRule::Own),
];

/// The rule of stage `name`; None for a name the parser does not know (it refuses it).
pub fn namespace_rule(name: &str) -> Option<NamespaceRule> {
    STAGE_NAMESPACE_RULES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| *r)
}

/// The namespaces `pipeline` names, in stage order, a stage's own before its sub-pipelines'.
/// A spec the parser would refuse names what it can be read to name: the check that consumes
/// this runs before the parser, and the parser refuses the command anyway.
pub fn stage_namespaces(pipeline: &[Document]) -> Vec<StageNamespace> {
    let mut out = Vec::new();
    walk(pipeline.iter(), &mut out, 0);
    out
}

fn walk<'a>(
    stages: impl Iterator<Item = &'a Document>,
    out: &mut Vec<StageNamespace>,
    depth: usize,
) {
    // Deeper than any message may nest: nothing there to find.
    if depth > crate::limits::MAX_BSON_DEPTH {
        return;
    }
    for stage in stages {
        for (name, spec) in stage {
            if let Some((stage, rule)) = STAGE_NAMESPACE_RULES.iter().find(|(n, _)| n == name) {
                stage_names(stage, *rule, spec, out, depth);
            }
        }
    }
}

/// The namespaces one stage names, by its rule.
fn stage_names(
    stage: &'static str,
    rule: NamespaceRule,
    spec: &Bson,
    out: &mut Vec<StageNamespace>,
    depth: usize,
) {
    let mut named = |ns: Option<Namespace>, reach: Reach| {
        if let Some(ns) = ns {
            out.push(StageNamespace { stage, ns, reach });
        }
    };
    let field = |f: &str| spec.as_document().and_then(|d| d.get(f));
    match rule {
        NamespaceRule::Own => {}
        NamespaceRule::Lookup | NamespaceRule::GraphLookup => {
            named(field("from").and_then(namespace), Reach::Read)
        }
        NamespaceRule::UnionWith => match spec {
            Bson::String(_) => named(namespace(spec), Reach::Read),
            _ => named(field("coll").and_then(namespace), Reach::Read),
        },
        NamespaceRule::Out => named(namespace(spec), Reach::Replace),
        NamespaceRule::Merge => match spec {
            Bson::String(_) => named(namespace(spec), Reach::Merge),
            _ => named(field("into").and_then(namespace), Reach::Merge),
        },
        NamespaceRule::Facet => {}
    }
    let subs: Vec<&Bson> = match rule {
        NamespaceRule::Lookup | NamespaceRule::UnionWith => field("pipeline").into_iter().collect(),
        NamespaceRule::Facet => spec
            .as_document()
            .map(|d| d.values().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    for sub in subs {
        if let Bson::Array(stages) = sub {
            walk(stages.iter().filter_map(Bson::as_document), out, depth + 1);
        }
    }
}

/// A collection name, or `{db, coll}`.
fn namespace(v: &Bson) -> Option<Namespace> {
    match v {
        Bson::String(coll) => Some(Namespace {
            db: None,
            coll: coll.clone(),
        }),
        Bson::Document(d) => Some(Namespace {
            db: d.get_str("db").ok().map(str::to_string),
            coll: d.get_str("coll").ok()?.to_string(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn ns(db: Option<&str>, coll: &str) -> Namespace {
        Namespace {
            db: db.map(str::to_string),
            coll: coll.to_string(),
        }
    }

    fn named(pipeline: &[Document]) -> Vec<(&'static str, Namespace, Reach)> {
        stage_namespaces(pipeline)
            .into_iter()
            .map(|s| (s.stage, s.ns, s.reach))
            .collect()
    }

    /// The stage names `parse_stage` matches on, read from its source: every `"$name"` string
    /// in the function's body.
    fn parser_stage_names() -> Vec<String> {
        let src = include_str!("parse.rs");
        let start = src
            .find("pub(super) fn parse_stage(")
            .expect("parse_stage in parse.rs");
        let body = &src[start..];
        let body = &body[..body.find("\n}\n").expect("parse_stage's end")];
        let mut names = Vec::new();
        let mut rest = body;
        while let Some(i) = rest.find("\"$") {
            let after = &rest[i + 2..];
            let len = after
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(after.len());
            if after[len..].starts_with('"') && len > 0 {
                names.push(format!("${}", &after[..len]));
            }
            rest = &after[len..];
        }
        names.sort();
        names.dedup();
        names
    }

    #[test]
    fn every_stage_the_parser_knows_has_a_namespace_rule() {
        let names = parser_stage_names();
        // The reading works: the parser has dozens of stages, the joins among them.
        assert!(names.len() > 30, "{names:?}");
        for n in [
            "$lookup",
            "$graphLookup",
            "$unionWith",
            "$facet",
            "$out",
            "$merge",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} not found in parse_stage");
        }
        for n in &names {
            assert!(
                namespace_rule(n).is_some(),
                "stage {n} has no rule in STAGE_NAMESPACE_RULES"
            );
        }
        // And no rule for a stage the parser no longer knows.
        for (n, _) in STAGE_NAMESPACE_RULES {
            assert!(
                names.iter().any(|x| x == n),
                "{n} has a rule but no parser arm"
            );
        }
    }

    #[test]
    fn joins_at_any_depth_and_writes() {
        let pipeline = [
            doc! {"$lookup": {"from": "a", "as": "x", "pipeline": [
                {"$unionWith": {"coll": "b", "pipeline": [
                    {"$facet": {"f": [{"$graphLookup": {"from": "c", "startWith": "$x",
                        "connectFromField": "x", "connectToField": "y", "as": "z"}}]}},
                ]}},
            ]}},
            doc! {"$unionWith": "d"},
            doc! {"$facet": {"g": [{"$lookup": {"from": "e", "localField": "a",
            "foreignField": "b", "as": "c"}}], "h": [{"$match": {}}]}},
            doc! {"$match": {"from": "not a namespace"}},
            doc! {"$out": {"db": "other", "coll": "f"}},
        ];
        assert_eq!(
            named(&pipeline),
            [
                ("$lookup", ns(None, "a"), Reach::Read),
                ("$unionWith", ns(None, "b"), Reach::Read),
                ("$graphLookup", ns(None, "c"), Reach::Read),
                ("$unionWith", ns(None, "d"), Reach::Read),
                ("$lookup", ns(None, "e"), Reach::Read),
                ("$out", ns(Some("other"), "f"), Reach::Replace),
            ]
        );
        assert_eq!(
            named(&[doc! {"$merge": {"into": {"db": "x", "coll": "y"}, "on": "_id"}}]),
            [("$merge", ns(Some("x"), "y"), Reach::Merge)]
        );
        assert_eq!(
            named(&[doc! {"$merge": "y"}]),
            [("$merge", ns(None, "y"), Reach::Merge)]
        );
        assert_eq!(
            named(&[doc! {"$out": "y"}]),
            [("$out", ns(None, "y"), Reach::Replace)]
        );
        // A `{db, coll}` join (the parser refuses it today) still names its database.
        assert_eq!(
            named(&[
                doc! {"$lookup": {"from": {"db": "b", "coll": "c"}, "as": "x", "pipeline": []}}
            ]),
            [("$lookup", ns(Some("b"), "c"), Reach::Read)]
        );
        assert!(named(&[doc! {"$group": {"_id": "$from"}}, doc! {"$nope": "x"}]).is_empty());
    }

    #[test]
    fn nesting_deeper_than_any_message_is_not_followed() {
        let mut p = vec![doc! {"$unionWith": "deepest"}];
        for _ in 0..crate::limits::MAX_BSON_DEPTH + 5 {
            p = vec![doc! {"$facet": {"f": p.into_iter().map(Bson::Document).collect::<Vec<_>>()}}];
        }
        assert!(named(&p).is_empty());
        let mut p = vec![doc! {"$unionWith": "shallow"}];
        for _ in 0..10 {
            p = vec![doc! {"$facet": {"f": p.into_iter().map(Bson::Document).collect::<Vec<_>>()}}];
        }
        assert_eq!(named(&p).len(), 1);
    }
}
